"""Regression guard on the published-run validation (benchmarks/validate_training.py): the
training model must keep its median error within the issue's 10% on the held-out half."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_published_runs_median_error_within_ten_percent():
    sys.path.insert(0, str(BENCH))
    try:
        from training_runs import RUNS
        from validate_training import run_all, split_of, stats
    finally:
        sys.path.remove(str(BENCH))
    rows = run_all(RUNS, split_of())
    test = stats([r for r in rows if r.split == "test"])
    overall = stats(rows)
    assert test["predicted"] >= 80 and overall["predicted"] >= 170
    assert test["median_abs_error_pct"] <= 10.0
    assert overall["median_abs_error_pct"] <= 10.0
    assert abs(overall["median_speed_bias_pct"]) <= 10.0
