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

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft
from training_runs import run_device
from validate_training import Row

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
    "megatron-lm on FP8 GPUs its own class (adopted)": ft.row_class,
    "every class by GPU generation": lambda r: (
        _profile_class(r) + ("-fp8" if _fp8_gen(r) else "-older")),
}


def main() -> None:
    rows = ft.grid_rows()
    print(f"Stack-class groupings by leave-one-family-out over {len(ft.CALIBRATION_FAMILIES)} "
          "calibration families")
    print("| grouping | factors fitted on all | left-out median over families | pooled "
          "left-out rows | median | p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for name, group in GROUPINGS.items():
        tables = ft.class_tables(rows, group)
        line, _ = ft.lofo_table_row(name, tables)
        print(line)


if __name__ == "__main__":
    main()
