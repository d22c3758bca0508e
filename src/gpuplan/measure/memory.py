"""Memory bandwidth, host-device copies and launch overhead.

Bytes are compulsory traffic, read + written (STREAM convention, McCalpin 1995):
copy b = a moves 2·S, triad a = b + s·c moves 3·S (S = bytes of one buffer). The ceilings use
buffers several times the last-level cache, so no cache flatters them; the working-set sweep
shrinks the buffers on purpose, and its plateaus show L1/L2/L3 on a CPU or L2/HBM on a GPU
(the smallest sizes include the per-op overhead). Host-device: one direction, S bytes, pinned
and pageable host memory (GPU only). Launch overhead: a 1-element op in a loop: PyTorch CPU
op dispatch on the CPU, dispatch + CUDA launch on a GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuplan.measure.timing import Clock, Stats, measure, poison, random_tensor, was_written

Progress = Callable[[str], None]


def copy_bytes(buffer_bytes: int) -> int:
    """copy reads one buffer and writes one."""
    return 2 * buffer_bytes


def triad_bytes(buffer_bytes: int) -> int:
    """triad a = b + s·c reads two buffers and writes one."""
    return 3 * buffer_bytes


def stream_buffer_bytes(cache_bytes: int, device: str, quick: bool) -> int:
    """4x the last-level cache, at least 64 MiB (CPU) / 256 MiB (GPU); 1 GiB on a full GPU run."""
    floor = (64 if device == "cpu" else 256) * 2**20
    size = max(4 * cache_bytes, floor)
    if device == "cuda" and not quick:
        size = max(size, 2**30)
    return size


def _bw(kind: str, nbytes: int, stats: Stats, **extra: Any) -> dict[str, Any]:
    return {"kind": kind, "bytes": nbytes, "time_s": stats.median_s,
            "bw_bytes_per_s": stats.rate(nbytes), "best_bw_bytes_per_s": stats.rate(nbytes, "best"),
            "stats": stats.to_json(), **extra}


def stream(device: str, clock: Clock, buffer_bytes: int, budget_s: float) -> dict[str, Any]:
    """Copy and triad on `buffer_bytes` buffers (fp32), median over samples."""
    import torch

    n = buffer_bytes // 4
    a = random_tensor((n,), torch.float32, device)
    b = random_tensor((n,), torch.float32, device)
    c = random_tensor((n,), torch.float32, device)
    out: dict[str, Any] = {"buffer_bytes": n * 4}
    st = measure(lambda: b.copy_(a), clock, setup=lambda: poison(b), budget_s=budget_s,
                 min_samples=5, max_samples=40)
    if not was_written(b):
        raise RuntimeError("copy: destination not written")
    out["copy"] = _bw("copy", copy_bytes(n * 4), st)
    st = measure(lambda: torch.add(b, c, alpha=3.0, out=a), clock, setup=lambda: poison(a),
                 budget_s=budget_s, min_samples=5, max_samples=40)
    if not was_written(a):
        raise RuntimeError("triad: destination not written")
    out["triad"] = _bw("triad", triad_bytes(n * 4), st)
    best = max(("copy", "triad"), key=lambda k: out[k]["bw_bytes_per_s"])
    # re-measure the better kernel in rounds until they agree (measure.stability)
    from gpuplan.measure.stability import REL_TOL, repeated

    fn, dst, nbytes = ((lambda: b.copy_(a)), b, copy_bytes(n * 4)) if best == "copy" else (
        (lambda: torch.add(b, c, alpha=3.0, out=a)), a, triad_bytes(n * 4))
    r = repeated(fn, clock, nbytes, budget_s=budget_s / 2, setup=lambda: poison(dst))
    if not was_written(dst):
        raise RuntimeError(f"{best}: destination not written")
    out["repeats"] = r.to_json(3, REL_TOL, "bytes_per_s")
    out["bw_bytes_per_s"] = r.best_rate
    out["statistic"] = (f"{best} (the higher of copy and triad), re-measured in rounds: the "
                        "best round's median (see repeats)")
    return out


def sweep_sizes(quick: bool, device: str) -> list[int]:
    """Working sets 16 KiB .. 1 GiB (quick: x4 steps up to 256 MiB)."""
    hi, step = (256 * 2**20, 4) if quick else (2**30, 2)
    out, s = [], 16 * 2**10
    while s <= hi:
        out.append(s)
        s *= step
    return out


def working_set_sweep(device: str, clock: Clock, sizes: list[int], budget_s: float,
                      progress: Progress | None = None) -> list[dict[str, Any]]:
    """Copy bandwidth with the working set (source + destination) = each size."""
    import torch

    rows = []
    for ws in sizes:
        if progress:
            progress(f"memory sweep {ws // 2**10} KiB")
        n = max(1, ws // 8)
        a = random_tensor((n,), torch.float32, device)
        b = torch.empty_like(a)
        st = measure(lambda a=a, b=b: b.copy_(a), clock, budget_s=budget_s, min_samples=5,
                     max_samples=30, warmup_s=0.02)
        rows.append(_bw("copy", copy_bytes(n * 4), st, working_set_bytes=2 * n * 4))
        del a, b
    return rows


def host_device(clock: Clock, nbytes: int, budget_s: float) -> dict[str, Any]:
    """H2D and D2H of `nbytes`, pinned and pageable host memory (CUDA only)."""
    import torch

    n = nbytes // 4
    dev = random_tensor((n,), torch.float32, "cuda")
    out: dict[str, Any] = {"bytes": n * 4}
    for pinned in (True, False):
        host = random_tensor((n,), torch.float32, "cpu")
        if pinned:
            host = host.pin_memory()
        tag = "pinned" if pinned else "pageable"
        st = measure(lambda h=host: dev.copy_(h, non_blocking=True), clock, budget_s=budget_s,
                     min_samples=5, max_samples=30)
        out[f"h2d_{tag}"] = _bw("h2d", n * 4, st, pinned=pinned)
        st = measure(lambda h=host: h.copy_(dev, non_blocking=True), clock, budget_s=budget_s,
                     min_samples=5, max_samples=30)
        out[f"d2h_{tag}"] = _bw("d2h", n * 4, st, pinned=pinned)
    return out


def launch_overhead(device: str, clock: Clock, budget_s: float) -> dict[str, Any]:
    """Seconds per tiny op (1 element): the floor every kernel pays."""
    import torch

    x = random_tensor((1,), torch.float32, device)
    y = torch.empty_like(x)
    st = measure(lambda: torch.add(x, 1.0, out=y), clock, budget_s=budget_s, min_samples=7,
                 max_samples=50, min_block_s=5e-3, warmup_s=0.05)
    what = ("PyTorch CPU op dispatch (1-element add)" if device == "cpu"
            else "PyTorch dispatch + CUDA kernel launch (1-element add), back to back")
    return {"time_s": st.median_s, "best_s": st.best_s, "what": what, "stats": st.to_json()}
