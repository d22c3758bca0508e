"""Fit the serving end-to-end factors (estimate/latency.py SERVING_FACTORS) on the CALIBRATION
family and report the VALIDATION families, which the fit never sees.

Calibration: TensorRT-LLM perf-overview, Llama-3.3-70B (FP8 on H100/H200, FP4 on B200/GB200).
Validation: TensorRT-LLM Llama-3.1-8B and Llama-3.1-405B (other model sizes, TP 1-8), and every
other family of benchmarks/data/inference_cases.csv. Objective: median |log(pred/published)|.
Coordinate search over a fixed grid (0.30 .. 1.00 in steps of 0.1), two passes.

Run: PYTHONPATH=src python benchmarks/fit_serving.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import validate_inference as vi

CALIBRATION = "TensorRT-LLM max throughput Llama-3.3-70B"
GRID = [round(0.30 + 0.1 * i, 2) for i in range(8)]


def score(rows: list[dict[str, str]], factors: tuple[float, float, float]) -> float:
    errs = [abs(math.log(vi.predict(r, factors)[0] / float(r["value"]))) for r in rows]
    return statistics.median(errs)


def main() -> None:
    rows = [r for r in csv.DictReader(vi.DATA.open()) if r["family"] == CALIBRATION]
    f = [1.0, 1.0, 1.0]
    best = score(rows, tuple(f))  # type: ignore[arg-type]
    for _ in range(2):
        for i in range(3):
            for g in GRID:
                trial = list(f)
                trial[i] = g
                s = score(rows, tuple(trial))  # type: ignore[arg-type]
                if s < best - 1e-9:
                    best, f = s, trial
        print(f"pass: factors (compute, fp4 compute, memory) = {tuple(f)}, calibration median "
              f"|log err| {best:.3f}", flush=True)
    print(f"fitted on {len(rows)} rows of '{CALIBRATION}': SERVING_FACTORS = {tuple(f)}")


if __name__ == "__main__":
    main()
