"""Choose the fit objective of the end-to-end factors by leave-one-family-out (calibration only).

For each candidate objective, fit every stack class's factor on all calibration families but
one, predict the one left out, and report the left-out errors over families (median and mean of
the family medians) and the rows' errors at the fit on all families. The objective with the
lowest left-out error is the one benchmarks/fit_training.py uses. No hold-out row is read.

    PYTHONPATH=src python benchmarks/compare_fit_objectives.py
"""

from __future__ import annotations

import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft
from validate_training import _percentile

Errors = dict[str, list[float]]


def _family_medians(errs: Errors, families: list[str]) -> list[float]:
    return [statistics.median(errs[f]) for f in families if errs.get(f)]


def median_of_family_medians(errs: Errors, families: list[str]) -> tuple[float, ...]:
    m = _family_medians(errs, families)
    return (statistics.median(m) if m else math.inf,)


def mean_of_family_medians(errs: Errors, families: list[str]) -> tuple[float, ...]:
    m = _family_medians(errs, families)
    return (statistics.fmean(m) if m else math.inf,)


def mean_of_capped_family_medians(errs: Errors, families: list[str]) -> tuple[float, ...]:
    m = [min(x, 50.0) for x in _family_medians(errs, families)]
    return (statistics.fmean(m) if m else math.inf,)


CANDIDATES: dict[str, ft.Objective] = {
    "median over families of the family median": median_of_family_medians,
    "mean over families of the family median": mean_of_family_medians,
    "mean of the family medians capped at 50 %": mean_of_capped_family_medians,
    "median over rows (fit_training.objective)": ft.objective,
}


def evaluate(tables: dict[str, ft.ErrorTable], families: list[str], score: ft.Objective
             ) -> tuple[dict[str, float], list[float], list[float]]:
    """(factors fitted on all families, left-out family medians of the fitted families, rows'
    |error| at the fit on all families), every fit minimising `score`."""
    fit_all = {c: ft.fit(t, families, score) for c, t in tables.items()}
    left_out = [r.median_abs_error_pct for r in ft.lofo(tables, score)
                if r.family not in ft.NOT_FITTED_FAMILIES]
    rows = [x for c, e in fit_all.items() for f in families for x in tables[c][e].get(f, [])]
    return fit_all, left_out, rows


def main() -> None:
    tables = ft.grid_errors()
    fams = [f for f in ft.CALIBRATION_FAMILIES
            if any(t[e].get(f) for t in tables.values() for e in t)]
    print(f"Fit objectives by leave-one-family-out over {len(fams)} calibration families")
    print("| objective | fitted factors | left-out median | left-out mean | rows median | "
          "rows p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, score in CANDIDATES.items():
        fit_all, left, rows = evaluate(tables, fams, score)
        factors = ", ".join(f"{c} {e:.2f}" for c, e in fit_all.items())
        print(f"| {name} | {factors} | {statistics.median(left):.2f} | "
              f"{statistics.fmean(left):.2f} | {statistics.median(rows):.2f} | "
              f"{_percentile(rows, 90):.1f} |")


if __name__ == "__main__":
    main()
