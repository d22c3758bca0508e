"""Does the attention kernel's length factor (estimate/efficiency_attention.length_factor:
each call reaches keys / (keys + overhead) of the kernel's long-sequence rate) predict unseen
families better? Leave-one-family-out on the calibration families only.

    PYTHONPATH=src python benchmarks/compare_attention_length.py

Why asked: the attention ceilings were one number per device and kernel, whatever the sequence
length, while FlashAttention kernels are measured to run 20-40 % below their long-sequence rate
at 1-2k tokens (the Triton tutorial's published sweep the overhead constants are fitted to), and
context parallelism splits each query's keys over cp ring steps, so each kernel call is shorter.
Both variants refit every class's end-to-end factor (fit_training.GRID_NARROW) and score by
leave-one-family-out; printed per variant: the factors fitted on all families, the median over
families of the left-out family's median |error|, and the pooled left-out rows' median and 90th
percentile; then the families whose left-out median moves by 2 points or more.

Adoption rule, fixed before the run: the factor is kept only if the median over families and
the pooled p90 both improve, and the pooled median worsens by at most 0.2 points.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft


def main() -> None:
    print(f"Attention length factor by leave-one-family-out over "
          f"{len(ft.CALIBRATION_FAMILIES)} calibration families")
    print("| length factor | factors fitted on all | left-out median over families | "
          "pooled left-out rows | median | p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    per_family = {}
    for on in (False, True):
        tables = ft.grid_errors_with(
            lambda eff, device, on=on: replace(eff, attention_length=on and device.kind == "gpu"))
        line, left_out = ft.lofo_table_row("on" if on else "off", tables)
        per_family[on] = {r.family: r.median_abs_error_pct for r in left_out}
        print(line, flush=True)
    print("\nFamilies whose left-out median |error| moves by 2 points or more (off -> on):")
    for fam, off in per_family[False].items():
        on = per_family[True].get(fam)
        if on is not None and abs(on - off) >= 2:
            print(f"  {fam}: {off:.1f} -> {on:.1f}")


if __name__ == "__main__":
    main()
