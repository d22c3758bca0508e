"""Fit the one remaining training constant, check it family by family.

The constant is `end_to_end` (gpuplan.estimate.efficiency.TRAINING_END_TO_END): the share of
the kernel ceilings that matmul and attention ops realise inside a whole training step. Every
other efficiency comes from a sourced mechanism (device ceilings, GEMM quantization, attention
kernel tables, framework overlaps).

Objective (chosen before looking at results): the median over families of each family's
median |error|, so a family with many rows (llm-foundry) weighs as much as one with a single
run; ties broken by the same statistic at the 90th percentile. Only calibration families are
ever fitted on; the validation (hold-out) families in benchmarks/data/training_validation.csv
are never used here.

    PYTHONPATH=src python benchmarks/fit_training.py          # fit on all calibration families
    PYTHONPATH=src python benchmarks/validate_training.py --lofo   # leave one family out
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from training_runs import CALIBRATION_FAMILIES, RUNS
from validate_training import Row, _percentile, run_all, split_of

GRID: tuple[float, ...] = tuple(round(0.50 + 0.02 * i, 2) for i in range(26))  # 0.50 .. 1.00
"""Candidate end-to-end factors."""


def _family_errors(rows: list[Row]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        if r.metric.primary and r.error_pct is not None:
            out.setdefault(r.run.family, []).append(abs(r.error_pct))
    return out


def grid_errors(families: tuple[str, ...] = CALIBRATION_FAMILIES,
                grid: tuple[float, ...] = GRID) -> dict[float, dict[str, list[float]]]:
    """|error| % of every primary row of `families`, per grid value and family."""
    runs = [r for r in RUNS if r.family in families]
    splits = split_of()
    return {e: _family_errors(run_all(runs, splits, end_to_end=e)) for e in grid}


def objective(errs: dict[str, list[float]], families: list[str]) -> tuple[float, float]:
    """(median over families of the family median |error|, same at the 90th percentile)."""
    med = [statistics.median(errs[f]) for f in families if errs.get(f)]
    p90 = [_percentile(errs[f], 90) for f in families if errs.get(f)]
    if not med:
        return math.inf, math.inf
    return statistics.median(med), statistics.median(p90)


def fit(table: dict[float, dict[str, list[float]]], families: list[str]) -> float:
    """The grid value minimising the objective on `families`."""
    return min(table, key=lambda e: objective(table[e], families))


@dataclass
class FamilyResult:
    family: str
    end_to_end: float
    """fitted without this family"""
    n: int
    median_abs_error_pct: float
    p90_abs_error_pct: float
    max_abs_error_pct: float


def lofo(table: dict[float, dict[str, list[float]]]) -> list[FamilyResult]:
    """Leave one family out: fit on the others, score the family left out."""
    fams = [f for f in CALIBRATION_FAMILIES if any(table[e].get(f) for e in table)]
    out = []
    for f in fams:
        e = fit(table, [g for g in fams if g != f])
        errs = table[e][f]
        out.append(FamilyResult(f, e, len(errs), statistics.median(errs),
                                _percentile(errs, 90), max(errs)))
    return out


def main() -> None:
    table = grid_errors()
    fams = list(CALIBRATION_FAMILIES)
    e = fit(table, fams)
    med, p90 = objective(table[e], fams)
    allerr = [x for f in fams for x in table[e].get(f, [])]
    print(f"end_to_end = {e:.2f} fitted on {len(fams)} calibration families "
          f"({len(allerr)} rows): median over families of the family median |error| "
          f"{med:.1f} %, of the family p90 {p90:.1f} %; all rows: median "
          f"{statistics.median(allerr):.1f} %, p90 {_percentile(allerr, 90):.1f} %")


if __name__ == "__main__":
    main()
