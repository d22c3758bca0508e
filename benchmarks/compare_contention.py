"""Does overlapped communication that crosses nodes slow compute as much as NVLink traffic?
Leave-one-family-out on the calibration families only.

    PYTHONPATH=src python benchmarks/compare_contention.py

Why asked: the overlap slowdown (Lee et al. 2025, 18.9 % of compute for as long as hidden
collectives run, measured inside a node) is weighed, for groups that span nodes, by the
network's rate over the scale-up rate (estimate.step.contention_weight): NCCL's load on SMs and
HBM is taken to scale with the bytes it moves per second. The alternative: NCCL's channels
hold their thread blocks for the whole collective whatever its rate, so every hidden second
weighs in full. That would slow the communication-heavy multi-node rows, most of which the
model predicts too fast (estimate/accuracy.py regime 'multi-node, communication-heavy').

Both variants refit every class's end-to-end factor (fit_training.GRID_NARROW) and score by
leave-one-family-out. The variant replaces `contention_weight` as `estimate.training` calls it
(a module attribute, restored afterwards): a modelling experiment, not an option of the tool.

Adoption rule, fixed before the run: kept only if the median over families and the pooled p90
both improve, and the pooled median worsens by at most 0.2 points.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft

import gpuplan.estimate.training as training


def main() -> None:
    print(f"Network contention weight by leave-one-family-out over "
          f"{len(ft.CALIBRATION_FAMILIES)} calibration families")
    print("| hidden network seconds weigh | factors fitted on all | left-out median over "
          "families | pooled left-out rows | median | p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    base = training.contention_weight
    per_family = {}
    try:
        for label, weight in (("the rate ratio (current)", base),
                              ("in full", lambda group, local, cluster: 1.0)):
            training.contention_weight = weight  # type: ignore[assignment]
            line, left_out = ft.lofo_table_row(label, ft.grid_errors_with(lambda e, d: e))
            per_family[label] = {r.family: r.median_abs_error_pct for r in left_out}
            print(line, flush=True)
    finally:
        training.contention_weight = base
    cur, full = per_family.values()
    print("\nFamilies whose left-out median |error| moves by 2 points or more (current -> full):")
    for fam, before in cur.items():
        after = full.get(fam)
        if after is not None and abs(after - before) >= 2:
            print(f"  {fam}: {before:.1f} -> {after:.1f}")


if __name__ == "__main__":
    main()
