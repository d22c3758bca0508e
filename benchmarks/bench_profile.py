"""`gpuplan profile` on the scripts with injected problems (tests/profile_scripts/): what it
reports next to what is known about each script, and how long a run takes. Prints a table;
results with the machine go to benchmarks/results/.

    PYTHONPATH=src python benchmarks/bench_profile.py [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
S = ROOT / "tests" / "profile_scripts"


def run(script: str, *args: str, steps: int = 5, warmup: int = 2) -> tuple[dict, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "gpuplan.cli.main", "profile", str(S / script), "--json",
           "--steps", str(steps), "--warmup", str(warmup)]
    out = subprocess.run(cmd + (["--", *args] if args else []), capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    if out.returncode != 0:
        raise SystemExit(f"{script}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout), wall, cpu


def first(r: dict) -> str:
    return r["advice"][0]["kind"] if r["advice"] else "-"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    dev = ap.parse_args().device
    load = os.getloadavg()
    from gpuplan.measure.machine import cpu_model

    print(f"# bench_profile.py, {time.strftime('%Y-%m-%d %H:%M')}, {cpu_model()}"
          f" ({os.cpu_count()} cores), python {platform.python_version()}, device {dev}, load "
          f"average {load[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "steps.jsonl"
        r, wall, cpu = run("slow_loader.py", str(log), "0.004", "0")
        rows = [json.loads(x) for x in log.read_text().splitlines()][2:]
        own = sum(x["wait_s"] for x in rows) / sum(x["step_s"] for x in rows)
        print(f"slow_loader (4 ms/sample, 8/batch): input wait {r['input_wait_fraction']:.1%}, the "
              f"script's own {own:.1%} (diff {100 * (r['input_wait_fraction'] - own):+.1f} pp); "
              f"first advice {first(r)}; {wall:.0f} s wall, {cpu:.0f} s CPU")
    r, wall, cpu = run("item_per_step.py")
    s = r["host_reads"]["sites"][0]
    print(f"item_per_step: {r['host_reads_per_step']:g} host reads/step ({s['call']} at line "
          f"{s['line']}); first advice {first(r)}; {wall:.0f} s wall, {cpu:.0f} s CPU")
    r, wall, cpu = run("elementwise.py", steps=3, warmup=1)
    ev = r["advice"][0]["evidence"] if r["advice"] else {}
    print(f"elementwise: first advice {first(r)} (element-wise {ev.get('elementwise_s', 0):.3g} "
          f"s/step measured; roofline fused {ev.get('predicted_fused_s', 0):.3g} s vs unfused "
          f"{ev.get('predicted_unfused_s', 0):.3g} s); {wall:.0f} s wall, {cpu:.0f} s CPU")
    r, wall, cpu = run("pageable.py", dev)
    pg = r["host_to_device"]["pageable"]
    print(f"pageable ({dev}): {pg['bytes']} pageable bytes/step; first advice {first(r)}; "
          f"{wall:.0f} s wall, {cpu:.0f} s CPU")
    r, wall, cpu = run("gpt2_tiny.py", dev, steps=3, warmup=1)
    print(f"gpt2_tiny ({dev}): step {r['step_time_s'] * 1e3:.1f} ms; {wall:.0f} s wall, "
          f"{cpu:.0f} s CPU; roofline: {r['assumptions']['roofline']}")
    for k, c in r["predicted"]["components"].items():
        err = "-" if c["error"] is None else f"{c['error']:+.0%}"
        print(f"  {k:<9} predicted {c['predicted_s'] * 1e3:8.2f} ms  measured "
              f"{c['measured_s'] * 1e3:8.2f} ms  error {err}")
    print("  advice: " + "; ".join(f"{a['kind']} {a['expected_saving_s'] * 1e3:.1f} ms"
                                   for a in r["advice"]))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
