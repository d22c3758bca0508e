"""Benchmarks that cannot take the machine down: buffers sized from the free memory within a
budget (default half of what is free), process counts bounded by the cores or GPUs present,
and a wall-clock deadline that ends a run with one clear error."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from typing import Any

from gpuplan.errors import GpuplanError

DEFAULT_MEMORY_FRACTION = 0.5
"""share of the free host RAM (CPU runs) or free GPU memory a benchmark may allocate"""
MAX_FORCED_NPROC = 1024
"""processes even --force may start (each rank needs its own interpreter and a socket)"""


def free_memory_bytes(device: str) -> int:
    """Free GPU memory (cudaMemGetInfo) or the host's MemAvailable (/proc/meminfo)."""
    if device == "cuda":
        import torch

        return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # macOS and other POSIX: physical pages (an upper bound of what is free)
        return int(os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


def memory_budget(device: str, fraction: float = DEFAULT_MEMORY_FRACTION) -> int:
    """Bytes a benchmark may hold at once."""
    if not 0 < fraction <= 0.9:
        raise GpuplanError(f"--memory-fraction: {fraction!r} is not valid; expected a fraction "
                           "above 0 and at most 0.9")
    return int(free_memory_bytes(device) * fraction)


def fit_buffer(wanted: int, count: int, budget: int, minimum: int, what: str) -> int:
    """Bytes per buffer for `count` buffers: `wanted`, or less to stay within `budget`; a
    polite refusal when even `minimum` does not fit."""
    size = min(wanted, budget // max(1, count))
    if size < minimum:
        raise GpuplanError(
            f"{what}: needs {count} x {minimum / 2**20:,.0f} MiB but the memory budget is "
            f"{budget / 2**20:,.0f} MiB (half of the free memory by default): free memory or "
            "raise --memory-fraction")
    return size


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_nproc(nproc: int, device: str, gpus: int, force: bool) -> None:
    """More ranks than cores (CPU) or GPUs only with --force; never above MAX_FORCED_NPROC."""
    limit = gpus if device == "cuda" else cpu_count()
    what = f"{gpus} GPUs visible" if device == "cuda" else f"{limit} CPU cores available"
    if nproc > MAX_FORCED_NPROC:
        raise GpuplanError(f"--nproc: {nproc} is not valid; at most {MAX_FORCED_NPROC} local "
                           "processes (use torchrun across nodes for more)")
    if device == "cuda" and nproc > gpus:
        raise GpuplanError(f"--nproc: {nproc} processes need {nproc} GPUs; {what}")
    if nproc > limit and not force:
        raise GpuplanError(f"--nproc: {nproc} is more than the {what}; ranks would share "
                           "cores and measure contention (add --force to run anyway)")


class BenchTimeout(GpuplanError):
    """The run passed its --timeout."""


@contextlib.contextmanager
def deadline(timeout_s: float | None, what: str = "bench") -> Iterator[None]:
    """Raise BenchTimeout in the main thread after timeout_s (SIGALRM; a no-op elsewhere)."""
    usable = (timeout_s is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def fire(_sig: int, _frame: Any) -> None:
        raise BenchTimeout(f"{what}: --timeout {timeout_s:g} s reached; stopped (child "
                           "processes were terminated)")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(timeout_s))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, old)
