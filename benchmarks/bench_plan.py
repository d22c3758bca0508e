"""How long `gpuplan plan llama-3-8b` takes (target: under two seconds), end to end as a user
runs it (a fresh process: imports, catalog, search, simulation, options), and where the time
goes inside one process.

Run with `PYTHONPATH=src python benchmarks/bench_plan.py`; the machine, its load and the
results go in benchmarks/results/. CPU seconds (user + sys) are reported next to wall seconds
because this machine is shared: on an idle core the wall time is about the CPU time.
"""

from __future__ import annotations

import os
import platform
import resource
import statistics
import subprocess
import sys
import time

RUNS = 5


def end_to_end(argv: list[str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv], check=True,
                   stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def parts() -> list[tuple[str, float, float]]:
    """(part, cpu s, wall s) inside one process."""
    out = []
    c0, w0 = time.process_time(), time.perf_counter()

    def lap(name: str) -> None:
        nonlocal c0, w0
        out.append((name, time.process_time() - c0, time.perf_counter() - w0))
        c0, w0 = time.process_time(), time.perf_counter()

    from gpuplan.cli.job_opts import DEFAULTS, train_job
    from gpuplan.estimate import plan as p
    from gpuplan.estimate.serve_rank import ServeLoad, best_for_device
    from gpuplan.specs.catalog import device_catalog, get_device, get_model

    lap("imports")
    m, d = get_model("llama-3-8b"), get_device("h100")
    devs = list(device_catalog())
    o = dict(DEFAULTS)
    o["seq_len"] = 4096  # train's default (guards.default_len) for llama-3-8b
    base = train_job(o, 1, d.kind)
    inp = p.PlanInputs(8, None, ServeLoad(512, 256, 2.0, 2.0, 0.2))
    lap("catalog")
    p.plan_train(m, d, base, inp, {"usd_per_gpu_hour": d.cloud_usd_per_hour})
    lap("train: search + step")
    p.plan_serve(m, d, inp, d.cloud_usd_per_hour)
    lap("serve: simulation")
    for dev in devs:
        p.train_option(m, dev, base, inp, dev.cloud_usd_per_hour)
    lap(f"options: train x {len(devs)}")
    for dev in devs:
        best_for_device(m, dev, inp.load, dev.cloud_usd_per_hour, smallest_tp_only=True)
    lap(f"options: serve x {len(devs)}")
    return out


def main() -> None:
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start")
    for argv in (["plan", "llama-3-8b"], ["plan", "llama-3-8b", "--json"]):
        runs = [end_to_end(argv) for _ in range(RUNS)]
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"gpuplan {' '.join(argv)}: wall median {statistics.median(walls):.2f} s "
              f"(min {min(walls):.2f}), CPU median {statistics.median(cpus):.2f} s "
              f"(min {min(cpus):.2f}) over {RUNS} runs")
    for name, cpu, wall in parts():
        print(f"  {name:22s} CPU {cpu:.3f} s, wall {wall:.3f} s")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
