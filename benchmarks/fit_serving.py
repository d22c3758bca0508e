"""Fit the serving end-to-end factors (estimate/latency.py SERVING_FACTORS) on the CALIBRATION
family and report the VALIDATION families, which the fit never sees.

Calibration: TensorRT-LLM perf-overview, Llama-3.3-70B (FP8 on H100/H200, FP4 on B200/GB200).
Validation: TensorRT-LLM Llama-3.1-8B and Llama-3.1-405B (other model sizes, TP 1-8), and every
other family of benchmarks/data/inference_cases.csv. Objective: median |log(pred/published)|.
Coordinate search over a fixed grid (0.30 .. 1.00 in steps of 0.1) from two starting points,
passes until no change (at most 3).

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

CALIBRATION = vi.CALIBRATION
GRID = [round(0.30 + 0.1 * i, 2) for i in range(8)]
START_POINTS = ((1.0, 1.0, 1.0), (0.7, 0.7, 0.7))
"""Coordinate search is local: it starts from no loss and from the grid's middle, keeps the
better end point."""


def score(rows: list[dict[str, str]], factors: tuple[float, float, float]) -> float:
    errs = [abs(math.log(vi.predict(r, factors)[0] / float(r["value"]))) for r in rows]
    return statistics.median(errs)


def coordinate_search(rows: list[dict[str, str]], start: tuple[float, float, float]
                      ) -> tuple[float, list[float]]:
    f = list(start)
    best = score(rows, tuple(f))  # type: ignore[arg-type]
    for _ in range(3):
        before = best
        for i in range(3):
            for g in GRID:
                trial = list(f)
                trial[i] = g
                s = score(rows, tuple(trial))  # type: ignore[arg-type]
                if s < best - 1e-9:
                    best, f = s, trial
        print(f"  pass from {start}: factors (compute, fp4 compute, memory) = {tuple(f)}, "
              f"calibration median |log err| {best:.4f}", flush=True)
        if best >= before - 1e-9:
            break
    return best, f


def main() -> None:
    rows = [r for r in csv.DictReader(vi.DATA.open()) if r["family"] == CALIBRATION]
    results = [coordinate_search(rows, s) for s in START_POINTS]
    best, f = min(results)
    print(f"fitted on {len(rows)} rows of '{CALIBRATION}': SERVING_FACTORS = {tuple(f)} "
          f"(median |log err| {best:.4f})")


if __name__ == "__main__":
    main()
