"""Matmul FLOP/s per dtype over a sweep of shapes: each size, the best size, the sustained rate.

FLOPs of C[m,n] = A[m,k] B[k,n]: 2·m·n·k (a multiply-add counts 2). The sustained rate of a
dtype is the MEDIAN rate at its best size (the size with the highest median); the best single
sample is reported next to it. Inputs are random; the output is poisoned before every sample
and checked afterwards; operands rotate through up to 4 sets so that small shapes do not
replay the same cache lines, and a single-call sample is preceded by a cache flush.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.measure.timing import Clock, Stats, cache_flusher, measure, poison, random_tensor, was_written

CPU_DTYPES = ("fp32", "fp64", "bf16", "int8")
CUDA_DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")

Progress = Callable[[str], None]


def matmul_flops(m: int, n: int, k: int) -> float:
    """2·m·n·k: one multiply and one add per inner-product term."""
    return 2.0 * m * n * k


def square_sizes(lo: int, hi: int) -> list[int]:
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def shapes(device: str, quick: bool) -> list[tuple[int, int, int]]:
    """(m, n, k): squares 64..hi, then skinny shapes (small batch; small inner dim)."""
    hi = (1024 if quick else 4096) if device == "cpu" else (8192 if quick else 16384)
    sq = [(s, s, s) for s in square_sizes(64, hi)]
    mid = min(hi, 4096)
    return [*sq, (16, mid, mid), (mid, mid, 64)]


@dataclass
class MatmulPoint:
    m: int
    n: int
    k: int
    stats: Stats

    @property
    def flops(self) -> float:
        return matmul_flops(self.m, self.n, self.k)

    def to_json(self) -> dict[str, Any]:
        return {"m": self.m, "n": self.n, "k": self.k, "flops": self.flops,
                "time_s": self.stats.median_s, "flops_per_s": self.stats.rate(self.flops),
                "best_flops_per_s": self.stats.rate(self.flops, "best"),
                "stats": self.stats.to_json()}


@dataclass
class DtypeResult:
    dtype: str
    points: list[MatmulPoint] = field(default_factory=list)
    skipped: str | None = None
    """why the dtype was not measured"""
    skipped_sizes: list[str] = field(default_factory=list)
    repeats: dict[str, Any] | None = None
    """the best size re-measured in rounds (measure.stability): rate, spread, stable flag"""

    @property
    def sustained(self) -> float | None:
        """The dtype's rate: the best size's best round when it was repeated."""
        if self.repeats is not None:
            return float(self.repeats["best_round_flops_per_s"])
        b = self.best
        return b.stats.rate(b.flops) if b is not None else None

    @property
    def best(self) -> MatmulPoint | None:
        return max(self.points, key=lambda p: p.stats.rate(p.flops), default=None)

    def to_json(self) -> dict[str, Any]:
        b = self.best
        if b is None:
            return {"skipped": self.skipped or "no size measured"}
        return {"sustained_flops_per_s": self.sustained,
                "best_flops_per_s": b.stats.rate(b.flops, "best"),
                "statistic": ("best size, re-measured in rounds: the best round's median "
                              "(see repeats)" if self.repeats else
                              "median at the best size (best_flops_per_s: best sample)"),
                "repeats": self.repeats,
                "best_size": {"m": b.m, "n": b.n, "k": b.k}, "n": b.stats.n,
                "sizes": [p.to_json() for p in self.points],
                "skipped_sizes": self.skipped_sizes}


def _kernel(dtype: str, device: str, m: int, n: int, k: int,
            sets: int) -> tuple[Callable[[], object], Any]:
    """fn() running one matmul per call (rotating operand sets) and the output it writes."""
    import torch

    tdt = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32,
           "bf16": torch.bfloat16, "fp16": torch.float16, "int8": torch.int8}.get(dtype)
    if dtype == "fp8":
        f8 = torch.float8_e4m3fn
        ops = [(random_tensor((m, k), f8, device),
                random_tensor((n, k), f8, device).t()) for _ in range(sets)]  # B column-major
        one = torch.ones((), device=device)
        out = torch.empty((m, n), dtype=torch.bfloat16, device=device)
        it = [0]

        def fp8() -> object:
            a, b = ops[it[0] % sets]
            it[0] += 1
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                    out=out)

        return fp8, out
    if tdt is None:
        raise ValueError(dtype)
    ops = [(random_tensor((m, k), tdt, device), random_tensor((k, n), tdt, device))
           for _ in range(sets)]
    out_dt = torch.int32 if dtype == "int8" else tdt
    out = torch.empty((m, n), dtype=out_dt, device=device)
    mm = torch._int_mm if dtype == "int8" else torch.mm
    i = [0]

    def run() -> object:
        a, b = ops[i[0] % sets]
        i[0] += 1
        return mm(a, b, out=out)

    return run, out


def _precision(dtype: str) -> str:
    return "high" if dtype == "tf32" else "highest"


def supported(dtype: str, device: str) -> str | None:
    """None when `dtype` matmuls run here; else the reason they do not."""
    import torch

    if dtype == "fp8":
        if device != "cuda" or not hasattr(torch, "float8_e4m3fn"):
            return "fp8 matmul needs a CUDA GPU with fp8 tensor cores (torch._scaled_mm)"
        if torch.cuda.get_device_capability(0) < (8, 9):
            return "fp8 needs compute capability >= 8.9 (Ada/Hopper or newer)"
    if dtype == "int8" and not hasattr(torch, "_int_mm"):
        return "this PyTorch has no torch._int_mm"
    if dtype == "tf32" and device != "cuda":
        return "tf32 is a CUDA tensor-core mode"
    try:
        fn, _out = _kernel(dtype, device, 32, 32, 32, 1)
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # an unsupported kernel raises RuntimeError/NotImplementedError
        return f"{type(e).__name__}: {' '.join(str(e).split())[:160]}"
    return None


def _time_one(dtype: str, device: str, clock: Clock, m: int, n: int, k: int, cache_bytes: int,
              flush: Callable[[], None], budget_s: float) -> Stats:
    set_bytes = (m * k + k * n) * 4
    sets = max(1, min(4, math.ceil(2 * cache_bytes / set_bytes)))
    fn, out = _kernel(dtype, device, m, n, k, sets)

    def setup() -> None:
        poison(out)
        flush()

    st = measure(fn, clock, setup=setup, budget_s=budget_s, min_samples=3, max_samples=30,
                 warmup_s=min(0.05, budget_s / 4))
    if not was_written(out):
        raise RuntimeError(f"matmul {dtype} {m}x{n}x{k}: output not written")
    return st


def _confirm(res: DtypeResult, dtype: str, device: str, clock: Clock, cache_bytes: int,
             flush: Callable[[], None], budget_s: float, rounds: int) -> dict[str, Any]:
    """Re-measure the best size in separate rounds until they agree (measure.stability)."""
    from gpuplan.measure.stability import REL_TOL, repeated

    b = res.best
    assert b is not None
    sets = max(1, min(4, math.ceil(2 * cache_bytes / ((b.m * b.k + b.k * b.n) * 4))))
    fn, out = _kernel(dtype, device, b.m, b.n, b.k, sets)

    def setup() -> None:
        poison(out)
        flush()

    r = repeated(fn, clock, b.flops, rounds=rounds, budget_s=budget_s, setup=setup)
    if not was_written(out):
        raise RuntimeError(f"matmul {dtype} {b.m}x{b.n}x{b.k}: output not written")
    return {**r.to_json(rounds, REL_TOL), "size": {"m": b.m, "n": b.n, "k": b.k}}


def measure_dtype(dtype: str, device: str, clock: Clock, sizes: list[tuple[int, int, int]],
                  cache_bytes: int, per_call_cap_s: float, budget_s: float,
                  progress: Progress | None = None, confirm_rounds: int = 3) -> DtypeResult:
    """Sweep `sizes` (by FLOPs, ascending); skip a size whose predicted call time exceeds
    `per_call_cap_s` (CPU bf16 without a bf16 unit runs at a few GFLOP/s)."""
    import torch

    res = DtypeResult(dtype)
    why = supported(dtype, device)
    if why is not None:
        res.skipped = why
        return res
    prev = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(_precision(dtype))
    flush = cache_flusher(cache_bytes, device)
    try:
        rate = math.inf
        for m, n, k in sorted(sizes, key=lambda s: matmul_flops(*s)):
            predicted = matmul_flops(m, n, k) / rate
            if predicted > per_call_cap_s:
                res.skipped_sizes.append(f"{m}x{n}x{k}: predicted {predicted:.2g} s per call")
                continue
            if progress:
                progress(f"matmul {dtype} {m}x{n}x{k}")
            try:
                st = _time_one(dtype, device, clock, m, n, k, cache_bytes, flush, budget_s)
            except Exception as e:  # a shape the kernel rejects (int8 on CUDA: m > 16), OOM
                res.skipped_sizes.append(f"{m}x{n}x{k}: {type(e).__name__}: "
                                         f"{' '.join(str(e).split())[:120]}")
                if device == "cuda":
                    torch.cuda.empty_cache()
                continue
            p = MatmulPoint(m, n, k, st)
            res.points.append(p)
            rate = max(p.stats.rate(p.flops), 1.0) if m == n == k else rate
        if res.points and confirm_rounds:
            res.repeats = _confirm(res, dtype, device, clock, cache_bytes, flush, budget_s,
                                   confirm_rounds)
    finally:
        torch.set_float32_matmul_precision(prev)
    return res


def matmul_bytes(m: int, n: int, k: int) -> int:
    """Upper bound of what one timed shape allocates: up to 4 fp32 sets of A, B and C."""
    return 4 * 4 * (m * k + k * n + m * n)


def measure_matmul(device: str, clock: Clock, cache_bytes: int, quick: bool,
                   dtypes: tuple[str, ...] | None = None,
                   progress: Progress | None = None,
                   max_bytes: int | None = None) -> dict[str, DtypeResult]:
    """Every dtype over `shapes`, leaving out shapes that would allocate more than max_bytes."""
    dts = dtypes or (CPU_DTYPES if device == "cpu" else CUDA_DTYPES)
    cap = (0.25 if quick else 2.0) if device == "cpu" else (0.1 if quick else 0.5)
    budget = (0.25 if quick else 1.0) if device == "cpu" else (0.1 if quick else 0.3)
    sz = [s for s in shapes(device, quick) if max_bytes is None or matmul_bytes(*s) <= max_bytes]
    if not sz:
        raise GpuplanError(f"bench matmul: even a 64x64 matmul exceeds the memory budget of "
                           f"{max_bytes} bytes; free memory or raise --memory-fraction")
    return {dt: measure_dtype(dt, device, clock, sz, cache_bytes, cap, budget, progress)
            for dt in dts}


def flops_by_dtype(results: dict[str, DtypeResult]) -> dict[str, float]:
    """The contract's `matmul_flops_per_s`: sustained rate per measured dtype."""
    out = {}
    for dt, r in results.items():
        rate = r.sustained
        if rate is not None:
            out[dt] = rate
    return out
