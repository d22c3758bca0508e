"""gpuplan's measured ceilings side by side with the direct loops anyone would write.

For each figure: gpuplan's number (timing core: warm-up, sync, samples, median), a direct loop
measured in the same run (plain `for` loop, one sync at the end), and their ratio (goal:
>= 0.9). A/B runs are interleaved three times; the table shows the median of each. Also the
sync demo (a host timer without a device sync) and the launch floor. Run with
`python benchmarks/bench_measure.py [--device cuda]`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch

from gpuplan.measure import compute, memory
from gpuplan.measure.machine import identity, last_level_cache_bytes
from gpuplan.measure.timing import clock_for, random_tensor, sync_vs_unsync


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def direct(fn: Callable[[], object], work: float, reps: int, device: str) -> float:
    """The textbook loop: one warm-up call, `reps` calls, one sync, work / mean time."""
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return work * reps / (time.perf_counter() - t0)


def side_by_side(name: str, ours: Callable[[], float], theirs: Callable[[], float],
                 unit: str, scale: float) -> float:
    pairs = [(ours(), theirs()) for _ in range(3)]
    o = statistics.median(p[0] for p in pairs)
    d = statistics.median(p[1] for p in pairs)
    print(f"{name:34s} gpuplan {o / scale:10.2f} {unit}  direct loop {d / scale:10.2f} {unit}  "
          f"ratio {o / d:5.2f}")
    return o / d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    dev = ap.parse_args().device
    ident = identity(dev)
    print(f"machine: {ident['name']} ({ident['cpu_model']}, {ident['cpu_cores']} cores, torch "
          f"{ident['torch']} with {ident['torch_threads']} threads, {platform.python_version()}"
          f"), load average {load()}")
    clock, llc = clock_for(dev), last_level_cache_bytes(dev)
    big = 1024 if dev == "cpu" else 8192
    dts = ("fp32", "fp64") if dev == "cpu" else ("fp32", "bf16", "fp16")
    tdt = {"fp32": torch.float32, "fp64": torch.float64, "bf16": torch.bfloat16,
           "fp16": torch.float16}
    ratios = []
    for dt in dts:
        a, b = (random_tensor((big, big), tdt[dt], dev) for _ in range(2))
        sizes = [(s, s, s) for s in (big // 4, big // 2, big)]

        def ours(dt: str = dt, sizes: list[tuple[int, int, int]] = sizes) -> float:
            r = compute.measure_dtype(dt, dev, clock, sizes, llc, 2.0, 0.5)
            return compute.flops_by_dtype({dt: r})[dt]

        ratios.append(side_by_side(
            f"matmul {dt} ceiling vs mm {big}^3", ours,
            lambda a=a, b=b: direct(lambda: torch.mm(a, b), 2 * big**3, 10, dev), "GFLOP/s",
            1e9))
    buf = memory.stream_buffer_bytes(llc, dev, True)
    n = buf // 4
    src, dst, c = (random_tensor((n,), torch.float32, dev) for _ in range(3))
    ratios.append(side_by_side(
        f"copy bandwidth, {buf >> 20} MiB buffers",
        lambda: memory.stream(dev, clock, buf, 0.5)["copy"]["bw_bytes_per_s"],
        lambda: direct(lambda: dst.copy_(src), 2 * buf, 10, dev), "GB/s", 1e9))
    ratios.append(side_by_side(
        "triad bandwidth",
        lambda: memory.stream(dev, clock, buf, 0.5)["triad"]["bw_bytes_per_s"],
        lambda: direct(lambda: torch.add(dst, c, alpha=3.0, out=src), 3 * buf, 10, dev),
        "GB/s", 1e9))
    x, y = random_tensor((1,), torch.float32, dev), random_tensor((1,), torch.float32, dev)
    lo = memory.launch_overhead(dev, clock, 0.5)["time_s"]
    d = 1 / direct(lambda: torch.add(x, 1.0, out=y), 1.0, 20000, dev)
    print(f"{'launch overhead (1-element add)':34s} gpuplan {lo * 1e6:10.2f} µs       "
          f"direct loop {d * 1e6:10.2f} µs       ratio {d / lo:5.2f} (rate ratio)")
    a, b = (random_tensor((big, big), torch.float32, dev) for _ in range(2))
    s = sync_vs_unsync(lambda: torch.mm(a, b), clock, inner=5 if dev == "cpu" else 20)
    print(f"sync demo, fp32 mm {big}^3: synchronised {s['synced_s'] * 1e3:.3f} ms per call, host "
          f"timer without sync {s['unsynced_s'] * 1e3:.3f} ms ({s['ratio']:.2f}x)")
    print(f"min ratio gpuplan / direct: {min(ratios):.2f} (goal >= 0.90); "
          f"load average now {load()}")


if __name__ == "__main__":
    main()
