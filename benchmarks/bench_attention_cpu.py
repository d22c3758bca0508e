"""CPU attention: the roofline's predicted speed-up of fused attention (SDPA) over naive
attention next to the measured one, several rounds on this (shared, busy) machine.

Each round measures the matmul and memory ceilings (measure.stability: repeated rounds, best
round) and then naive vs F.scaled_dot_product_attention (measure.fusion.measure_attention),
predicting both with the round's measured ceilings and the CPU attention mechanism
(estimate.efficiency.CPU_ATTENTION_CEILING: CPU flash attention runs at the matmul rate).
Bar (issue 10): right direction and within 30 % of the measured speed-up.
Run: PYTHONPATH=src python benchmarks/bench_attention_cpu.py [--rounds 5] [--full]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
from pathlib import Path

from gpuplan.measure import compute, fusion, memory
from gpuplan.measure.machine import identity, last_level_cache_bytes
from gpuplan.measure.profile import prediction_target
from gpuplan.measure.timing import clock_for


def one_round(quick: bool) -> dict[str, object]:
    clock, llc = clock_for("cpu"), last_level_cache_bytes("cpu")
    mm = compute.measure_matmul("cpu", clock, llc, quick, dtypes=("fp32",))
    mem = memory.stream("cpu", clock, memory.stream_buffer_bytes(llc, "cpu", quick), 0.4)
    prof = {"device": "cpu", "date": datetime.date.today().isoformat(), "identity": identity("cpu"),
            "matmul_flops_per_s": compute.flops_by_dtype(mm),
            "matmul": {dt: x.to_json() for dt, x in mm.items()},  # the size sweep, as bench saves
            "memory_bw_bytes_per_s": mem["bw_bytes_per_s"]}
    spec, eff = prediction_target(prof)
    a = fusion.measure_attention("cpu", clock, spec, eff, quick)
    meas, pred = a["speedup_measured"], a["speedup_predicted"]
    return {"fp32_flops_per_s": prof["matmul_flops_per_s"]["fp32"],
            "fp32_stable": mm["fp32"].repeats["stable"] if mm["fp32"].repeats else None,
            "memory_bw_bytes_per_s": mem["bw_bytes_per_s"],
            "memory_stable": mem["repeats"]["stable"], "shape": a["shape"],
            "speedup_measured": meas, "speedup_predicted": pred,
            "error": pred / meas - 1, "right_direction": (pred > 1) == (meas > 1),
            "load_average": list(os.getloadavg())}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    rows = [one_round(not args.full) for _ in range(args.rounds)]
    errs = [abs(float(r["error"])) for r in rows]  # type: ignore[arg-type]
    out = {"date": datetime.date.today().isoformat(), "machine": platform.processor() or
           platform.machine(), "cores": os.cpu_count(), "rounds": rows,
           "median_abs_error": statistics.median(errs),
           "within_30pct": sum(e <= 0.30 for e in errs),
           "right_direction": sum(bool(r["right_direction"]) for r in rows)}
    res = Path(__file__).parent / "results" / f"attention-cpu-{out['date']}.json"
    res.write_text(json.dumps(out, indent=1))
    for r in rows:
        print(f"measured {r['speedup_measured']:.2f}x  predicted {r['speedup_predicted']:.2f}x"
              f"  error {r['error']:+.0%}  fp32 {float(r['fp32_flops_per_s']) / 1e9:.1f} "  # type: ignore[arg-type]
              f"GFLOP/s (stable {r['fp32_stable']})  load {r['load_average']}")
    print(f"median |error| {out['median_abs_error']:.0%}; within 30 %: {out['within_30pct']} of "
          f"{len(rows)}; right direction: {out['right_direction']} of {len(rows)} -> {res}")


if __name__ == "__main__":
    main()
