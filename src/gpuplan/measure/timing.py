"""The one timing core every benchmark uses (warm-up, synchronise, median of repeats).

- Warm-up by time, not by count: past JIT, autotuning, allocator growth and lazy loading.
- The device is synchronised around every timed block (GPU work is asynchronous); a block runs
  `inner` iterations so that tiny ops are not dominated by the synchronisation itself. On a
  CUDA device the block is timed with CUDA events (one stream), on the CPU with perf_counter.
- Repeated samples; the median with its spread (quartiles, min, max) and n are reported. Ceilings
  use the best sample (say so: `best_s`); workloads use the median.
- `setup` runs before each sample OUTSIDE the timed region: poison outputs, reset inputs, flush
  the cache (a write of >= 2x the last-level cache).
- Inputs are random, never zeros (a zero operand can take fast paths and flatters power/clocks).

`unsynchronised_time` shows the classic mistake: a host timer around GPU work without a sync
measures how fast the host enqueues kernels, not how long the device takes.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Stats:
    """Per-iteration seconds of each timed sample."""

    samples_s: tuple[float, ...]
    inner: int = 1
    """iterations per timed block (sample = block time / inner)"""
    warmup_s: float = 0.0

    @property
    def n(self) -> int:
        return len(self.samples_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)

    @property
    def best_s(self) -> float:
        return min(self.samples_s)

    @property
    def worst_s(self) -> float:
        return max(self.samples_s)

    def quartiles(self) -> tuple[float, float]:
        if self.n < 2:
            return self.samples_s[0], self.samples_s[0]
        q = statistics.quantiles(self.samples_s, n=4, method="inclusive")
        return q[0], q[2]

    def rate(self, work: float, stat: str = "median") -> float:
        """work / time: FLOP/s or bytes/s from the median (default) or the best sample."""
        t = self.best_s if stat == "best" else self.median_s
        return work / t if t > 0 else math.inf

    def to_json(self, work: float | None = None) -> dict[str, Any]:
        q1, q3 = self.quartiles()
        out: dict[str, Any] = {"n": self.n, "inner": self.inner, "median_s": self.median_s,
                               "best_s": self.best_s, "q1_s": q1, "q3_s": q3,
                               "min_s": self.best_s, "max_s": self.worst_s,
                               "warmup_s": self.warmup_s}
        if work is not None:
            out["median_rate"] = self.rate(work)
            out["best_rate"] = self.rate(work, "best")
        return out


class Clock(Protocol):
    """A host clock plus a way to wait for the device."""

    def now(self) -> float: ...

    def sync(self) -> None: ...

    def block(self, fn: Callable[[], object], inner: int) -> float:
        """Seconds for `inner` calls of fn, device work included."""
        ...


class HostClock:
    """perf_counter, synchronised with `sync_fn` (a no-op on the CPU, where work is eager)."""

    def __init__(self, sync_fn: Callable[[], None] | None = None,
                 now_fn: Callable[[], float] = time.perf_counter) -> None:
        self._sync, self._now = sync_fn, now_fn

    def now(self) -> float:
        return self._now()

    def sync(self) -> None:
        if self._sync is not None:
            self._sync()

    def block(self, fn: Callable[[], object], inner: int) -> float:
        self.sync()
        t0 = self.now()
        for _ in range(inner):
            fn()
        self.sync()
        return self.now() - t0


class CudaEventClock(HostClock):
    """CUDA events around the block on the current stream (they see that stream only)."""

    def __init__(self) -> None:
        import torch

        super().__init__(torch.cuda.synchronize)
        self._torch = torch

    def block(self, fn: Callable[[], object], inner: int) -> float:
        ev = self._torch.cuda.Event
        start, end = ev(enable_timing=True), ev(enable_timing=True)
        self.sync()
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3


def clock_for(device: str) -> Clock:
    return CudaEventClock() if device == "cuda" else HostClock()


def measure(fn: Callable[[], object], clock: Clock, *, setup: Callable[[], None] | None = None,
            warmup_s: float = 0.05, warmup_calls: int | None = None, min_samples: int = 5,
            max_samples: int = 50, budget_s: float = 0.3, min_block_s: float = 2e-3,
            inner: int | None = None) -> Stats:
    """Warm up, then time samples of `inner` calls each until `budget_s` has passed and at
    least `min_samples` were taken (at most `max_samples`).

    `warmup_calls` (with `inner`) makes the run deterministic in its call counts, as
    collectives need (every rank must make the same calls).
    """
    t0 = clock.now()
    calls = 0
    while True:
        fn()
        calls += 1
        clock.sync()
        elapsed = clock.now() - t0
        if (calls >= warmup_calls) if warmup_calls is not None else elapsed >= warmup_s:
            break
    per_call = max(elapsed / calls, 1e-9)
    if inner is None:
        inner = max(1, math.ceil(min_block_s / per_call))
    samples: list[float] = []
    start = clock.now()
    while len(samples) < max_samples and (len(samples) < min_samples
                                           or clock.now() - start < budget_s):
        if setup is not None:
            setup()
        samples.append(clock.block(fn, inner) / inner)
    return Stats(tuple(samples), inner, elapsed)


def unsynchronised_time(fn: Callable[[], object], clock: Clock, inner: int = 20) -> float:
    """What a host timer WITHOUT a device sync reports per call (the classic mistake): on a GPU
    only the launch cost while the queue has room; on the CPU the same as the synced time."""
    clock.sync()
    t0 = clock.now()
    for _ in range(inner):
        fn()
    t1 = clock.now()
    clock.sync()
    return (t1 - t0) / inner


def sync_vs_unsync(fn: Callable[[], object], clock: Clock, inner: int = 20) -> dict[str, float]:
    """The same work timed right (synchronised) and wrong (host timer only)."""
    fn()
    clock.sync()
    t0 = clock.now()
    for _ in range(inner):
        fn()
    clock.sync()
    synced = (clock.now() - t0) / inner
    unsynced = unsynchronised_time(fn, clock, inner)
    return {"synced_s": synced, "unsynced_s": unsynced,
            "ratio": synced / unsynced if unsynced > 0 else math.inf}


# ---- inputs, outputs, caches --------------------------------------------------------------


def random_tensor(shape: tuple[int, ...], dtype: Any, device: str) -> Any:
    """Random values, never zeros: normal floats, full-range int8, fp8 from a normal draw."""
    import torch

    if dtype in (torch.int8, torch.uint8, torch.int32, torch.int64):
        lo, hi = (-128, 128) if dtype == torch.int8 else (0, 127)
        t = torch.randint(lo, hi, shape, dtype=dtype, device=device)
        return t.masked_fill_(t == 0, 1)
    if dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        return torch.randn(shape, dtype=dtype, device=device)
    return torch.randn(shape, dtype=torch.float32, device=device).to(dtype)


def poison(t: Any) -> None:
    """Fill an output with a value no correct kernel writes (NaN; int: the minimum)."""
    import torch

    if t.is_floating_point():
        t.fill_(math.nan)
    else:
        t.fill_(torch.iinfo(t.dtype).min)


def was_written(t: Any) -> bool:
    """True when no poison is left (checked outside the timed region)."""
    import torch

    if t.is_floating_point():
        return not bool(torch.isnan(t.float()).any())
    return not bool((t == torch.iinfo(t.dtype).min).all())


def cache_flusher(cache_bytes: int, device: str) -> Callable[[], None]:
    """A write of >= 2x the last-level cache evicts the operands of the op timed next."""
    import torch

    buf = torch.empty(max(2 * cache_bytes, 1 << 20) // 4, dtype=torch.float32, device=device)
    state = {"v": 1.0}

    def flush() -> None:
        state["v"] += 1.0
        buf.fill_(state["v"])

    return flush
