"""Which grouping of the calibration rows into end-to-end classes predicts a family it has not
seen best: leave-one-family-out (fit each class's factor on the other families, predict the one
left out) under four groupings, on the calibration families only.

    PYTHONPATH=src python benchmarks/compare_stack_classes.py

Groupings: the two profile classes (megatron, pytorch; profile megatron-lm counted as megatron),
megatron-lm as a class of its own, megatron-lm as a class of its own on NVIDIA GPUs with FP8
tensor cores only (efficiency.stack_class, adopted at stop 17), and every class split by GPU
generation (FP8 tensor cores or not). Printed: the factors fitted on all families, the median
over families of the left-out family's median |error|, and the pooled left-out rows' median and
90th percentile (families on devices the catalog does not model left out of the pool).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft
from training_runs import CALIBRATION_FAMILIES, NOT_FITTED_FAMILIES, RUNS, run_device
from validate_training import Row, _percentile, run_all, split_of

from gpuplan.estimate.efficiency import fp8_generation_nvidia
from gpuplan.specs.framework import get_framework


def _profile_class(r: Row) -> str:
    cls = get_framework(r.run.framework).end_to_end_class
    return "megatron" if cls == "megatron-lm" else cls


def _fp8_gen(r: Row) -> bool:
    return fp8_generation_nvidia(run_device(r.run.device))


GROUPINGS: dict[str, Callable[[Row], str]] = {
    "two profile classes": _profile_class,
    "megatron-lm its own class": lambda r: (
        "megatron-lm" if r.run.framework == "megatron-lm" else _profile_class(r)),
    "megatron-lm on FP8 GPUs its own class (adopted)": lambda r: (
        "megatron-lm-hopper" if r.run.framework == "megatron-lm" and _fp8_gen(r)
        else _profile_class(r)),
    "every class by GPU generation": lambda r: (
        _profile_class(r) + ("-fp8" if _fp8_gen(r) else "-older")),
}


def main() -> None:
    runs = [r for r in RUNS if r.family in CALIBRATION_FAMILIES]
    splits = split_of()
    rows = {e: [x for x in run_all(runs, splits, end_to_end=e)
                if x.metric.primary and x.error_pct is not None] for e in ft.GRID}
    print(f"Stack-class groupings by leave-one-family-out over {len(CALIBRATION_FAMILIES)} "
          "calibration families")
    print("| grouping | factors fitted on all | left-out median over families | pooled "
          "left-out rows | median | p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, group in GROUPINGS.items():
        classes = sorted({group(x) for x in rows[ft.GRID[0]]})
        tables: dict[str, ft.ErrorTable] = {c: {e: {} for e in ft.GRID} for c in classes}
        for e in ft.GRID:
            for x in rows[e]:
                tables[group(x)][e].setdefault(x.run.family, []).append(abs(x.error_pct))
        fams = [f for f in CALIBRATION_FAMILIES
                if any(t[e].get(f) for t in tables.values() for e in t)]
        pooled: list[float] = []
        medians = []
        for f in fams:
            others = [g for g in fams if g != f]
            errs = [x for t in tables.values() if any(t[e].get(f) for e in t)
                    for x in t[ft.fit(t, others)].get(f, [])]
            medians.append(statistics.median(errs))
            if f not in NOT_FITTED_FAMILIES:
                pooled += errs
        fitted = ", ".join(f"{c} {ft.fit(t, fams):.2f}" for c, t in tables.items())
        print(f"| {name} | {fitted} | {statistics.median(medians):.2f} | {len(pooled)} | "
              f"{_percentile(pooled, 50):.2f} | {_percentile(pooled, 90):.2f} |")


if __name__ == "__main__":
    main()
