"""Speed of the serving simulator: 100,000 requests (Poisson arrivals, varied lengths) through
continuous batching with chunked prefill, and through static batching, on this machine.

Run: PYTHONPATH=src python benchmarks/bench_serving.py [--requests N]
Writes benchmarks/results/serving-<date>-cpu.txt (wall and CPU seconds, the machine)."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

from gpuplan.estimate.latency import step_model
from gpuplan.estimate.request_stream import poisson_workload
from gpuplan.estimate.serving import kv_capacity, summarize
from gpuplan.estimate.serving_sim import Engine, simulate
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.serving import ServeConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=100_000)
    args = ap.parse_args()
    m, d = get_model("llama-3-8b"), get_device("h100")
    cfg = ServeConfig(weight_dtype="fp8")
    sm = step_model(m, d, cfg)
    blocks, _ = kv_capacity(m, d, cfg, 32, 8192, int(0.537e9))
    lines = [f"# bench_serving {dt.date.today()} on {platform.processor() or platform.machine()}"
             f", {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
             "# Llama-3-8B fp8 on H100-SXM; Poisson 50 req/s; prompt uniform:64:1024; "
             "output exponential:256; seed 1"]
    for sched in ("continuous", "static"):
        w = poisson_workload(args.requests, 50.0, "uniform:64:1024", "exponential:256", seed=1)
        eng = replace(Engine(kv_blocks=blocks), scheduler=sched)
        t0, c0 = time.perf_counter(), time.process_time()
        r = simulate(sm, w, eng)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        s = summarize(r)
        lines.append(f"{sched:<10} requests={args.requests} completed={s['completed_requests']} "
                     f"iterations={s['iterations']} wall_s={wall:.2f} cpu_s={cpu:.2f} "
                     f"ttft_p99_s={s['ttft_p99_s']:.4f} tpot_p99_s={s['tpot_p99_s']:.4f}")
        print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / f"serving-{dt.date.today()}-cpu.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
