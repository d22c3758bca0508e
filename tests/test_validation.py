"""Validation machinery (benchmarks/): the calibration set's regression guard and the
leave-one-family-out (LOFO) fit. The hold-out validation families
(benchmarks/data/training_validation.csv) are deliberately NOT scored here: scoring them on
every run would invite tuning to them. They are scored once, by hand, with
`validate_training.py --split validation` (README)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Iterator[dict[str, ModuleType]]:
    sys.path.insert(0, str(BENCH))
    try:
        import fit_training
        import training_runs
        import validate_training
        yield {"runs": training_runs, "validate": validate_training, "fit": fit_training}
    finally:
        sys.path.remove(str(BENCH))


def test_calibration_regression_guard(bench):
    """Tolerances fixed before modelling: the issue's bar (median |error| <= 10 %), p90 <= 25 %
    and the median speed bias within +-10 %, on the development families (calibration from the
    start). The hold-out families promoted to calibration after their one scoring
    (training_runs.PROMOTED_FAMILIES) failed the bar when scored; they are guarded against
    getting worse than their record at stop 14 (median 8.7 %, p90 29.0 %, 449 rows): median
    <= 10 %, p90 <= 30 %. Until stop 13 one p90 <= 25 % guard covered both; the stop-14
    hold-outs took the pooled p90 to 25.05 %. The stop-22 sets have their own guard, at their
    hold-out score."""
    tr, v = bench["runs"], bench["validate"]
    cal = [r for r in tr.RUNS if r.split == "calibration"]
    rows = [r for r in v.run_all(cal, v.split_of()) if r.metric.primary]
    dev = v.stats([r for r in rows if r.run.family not in tr.PROMOTED_FAMILIES])
    assert dev["predicted"] == dev["rows"] >= 220
    assert dev["median_abs_error_pct"] <= 10.0
    assert dev["p90_abs_error_pct"] <= 25.0
    assert abs(dev["median_speed_bias_pct"]) <= 10.0
    promoted = v.stats([r for r in rows if r.run.family in tr.PROMOTED_FAMILIES
                        and r.run.family not in STOP22_FAMILIES])
    assert promoted["predicted"] == promoted["rows"] >= 400
    assert promoted["median_abs_error_pct"] <= 10.0
    assert promoted["p90_abs_error_pct"] <= 30.0
    assert abs(promoted["median_speed_bias_pct"]) <= 10.0
    # the stop-22 sets: no worse than their one scoring as hold-out (13.3 %, 53.0 %, +13.2 %,
    # benchmarks/results/training-validation-data34to35-2026-12-04-stop22.txt)
    s22 = v.stats([r for r in rows if r.run.family in STOP22_FAMILIES])
    assert s22["predicted"] == s22["rows"] == 448
    assert s22["median_abs_error_pct"] <= 13.3
    assert s22["p90_abs_error_pct"] <= 53.0
    assert abs(s22["median_speed_bias_pct"]) <= 13.2


STOP22_FAMILIES = frozenset({"hagemann-aa-a100-2311", "llmfoundry-h100-largescale-2401",
                             "mosaicgpt-a100-80gb-2304"})
"""promoted at stop 22; Hagemann et al.'s 401-trial sweep alone fails the guard above"""


def test_calibration_and_validation_are_disjoint_whole_families(bench):
    tr = bench["runs"]
    assert set(tr.CALIBRATION_FAMILIES).isdisjoint(tr.VALIDATION_FAMILIES)
    # a scored hold-out family is promoted (the validation file may be empty between sets)
    assert set(tr.VALIDATION_FAMILIES).isdisjoint(tr.PROMOTED_FAMILIES)
    assert set(tr.CALIBRATION_FAMILIES) >= tr.PROMOTED_FAMILIES
    for fam in tr.FAMILIES:  # a family is entirely on one side
        assert len({r.split for r in tr.RUNS if r.family == fam}) == 1


def test_every_csv_row_names_its_source(bench):
    for name in ("training_calibration.csv", "training_validation.csv"):
        with (BENCH / "data" / name).open(newline="") as f:
            for row in csv.DictReader(f):
                assert row["source"] and row["source_location"] and row["verification"]


def test_fit_minimises_the_row_median(bench):
    """A synthetic error table: family a (3 rows) prefers 0.6, b (1 row) prefers 0.8. Over
    rows, 0.6 gives median(2, 2, 2, 20) = 2 and 0.8 gives median(9, 9, 9, 1) = 9: the fit picks
    0.6, and the objective is (row median, row p90). Families on unmodelled devices are left
    out of the fit."""
    f = bench["fit"]
    table = {0.6: {"a": [2.0] * 3, "b": [20.0]}, 0.8: {"a": [9.0] * 3, "b": [1.0]}}
    assert f.fit(table, ["a", "b"]) == 0.6
    assert f.objective(table[0.6], ["a", "b"])[0] == 2.0
    assert f.objective(table[0.8], ["b"]) == (1.0, 1.0)


def test_lofo_fits_without_the_family_it_scores(bench, monkeypatch):
    """Leaving out b: the others (a, c) decide; a and c prefer 0.6 here, so b is scored at 0.6
    even though b alone would prefer 0.8."""
    f = bench["fit"]
    monkeypatch.setattr(f, "CALIBRATION_FAMILIES", ("a", "b", "c"))
    table = {0.6: {"a": [1.0, 2.0], "b": [30.0], "c": [2.0]},
             0.8: {"a": [9.0, 9.0], "b": [1.0], "c": [9.0]}}
    res = {r.family: r for r in f.lofo({"pytorch": table})}
    assert res["b"].end_to_end == {"pytorch": 0.6} and res["b"].median_abs_error_pct == 30.0
    # leaving out a: b and c give median(30, 2) = 16 at 0.6 and median(1, 9) = 5 at 0.8
    assert res["a"].end_to_end == {"pytorch": 0.8}
    assert res["a"].n == 2 and res["a"].median_abs_error_pct == 9.0


def test_stack_classes_are_fitted_on_their_own_families(bench, monkeypatch):
    """Two classes, each row depending only on its own class's factor: the megatron family m
    prefers 0.8, the pytorch families a and b 0.6; each class gets its own value, and a family
    of one class is scored only at its class's factor, fitted without it."""
    f = bench["fit"]
    monkeypatch.setattr(f, "CALIBRATION_FAMILIES", ("a", "b", "m", "n"))
    tables = {"pytorch": {0.6: {"a": [1.0], "b": [2.0]}, 0.8: {"a": [9.0], "b": [8.0]}},
              "megatron": {0.6: {"m": [12.0], "n": [10.0]}, 0.8: {"m": [1.0], "n": [3.0]}}}
    assert f.fit_classes(tables, ["a", "b", "m", "n"]) == {"pytorch": 0.6, "megatron": 0.8}
    res = {r.family: r for r in f.lofo(tables)}
    assert res["m"].end_to_end == {"megatron": 0.8} and res["m"].median_abs_error_pct == 1.0
    assert res["a"].end_to_end == {"pytorch": 0.6}
