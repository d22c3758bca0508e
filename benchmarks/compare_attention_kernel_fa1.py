"""Do the calibration families predict unseen families better when the runs that ran a
FlashAttention-1-generation kernel are timed with it? Leave-one-family-out on calibration only.

    PYTHONPATH=src python benchmarks/compare_attention_kernel_fa1.py

Why asked (stop 19): llm-foundry's 2023 benchmark tables ran `attn_impl: triton`
(scripts/train/benchmarking/submit_benchmarks.py default, not overridden by sweep.sh), the
pre-MLIR Triton FlashAttention; MosaicGPT's 2023-02 tables ran FlashAttention v1 (FlashMHA); the
FlashAttention-1 paper's GPT-2 rows ran FlashAttention-1. They are timed with their profiles'
FlashAttention-2. With those runs timed as `--attention-kernel fa1` (fa1_run below;
estimate.efficiency_attention: half of FA2's ceiling, Dao 2023) against as they are, every
class's end-to-end factor is refitted
(fit_training.GRID_NARROW) and scored by leave-one-family-out; printed per variant: the factors
fitted on all families, the median over families of the left-out family's median |error|, and the
pooled left-out rows' median and 90th percentile. Rule fixed before running: adopted only if the
family median and the pooled p90 both improve and the pooled median worsens by at most 0.2.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fit_training as ft
import validate_training as vt
from training_runs import TrainingRun

from gpuplan.estimate.memory import TrainConfig
from gpuplan.specs.framework import Framework

FA1_FAMILIES = ("llmfoundry-a100-40gb", "llmfoundry-a100-80gb", "llmfoundry-h100",
                "llmfoundry-h100-fp8", "mosaicgpt-a100-40gb-2302", "mosaicgpt-a100-80gb-2302")
"""the families whose runs ran a FlashAttention-1-generation kernel (their rows' inferred notes)"""


def fa1_run(run: TrainingRun) -> bool:
    return run.family in FA1_FAMILIES or (run.family == "fa1-gpt2" and
                                          run.run_id.endswith("-FlashAttention"))


def main() -> None:
    as_they_are = vt.run_framework

    def as_fa1(run: TrainingRun, auto: bool = False) -> tuple[Framework, TrainConfig]:
        fw, cfg = as_they_are(run, auto)
        return (fw.with_attention_kernel("fa1") if fa1_run(run) else fw), cfg
    print(f"Stated attention kernels by leave-one-family-out over "
          f"{len(ft.CALIBRATION_FAMILIES)} calibration families")
    print("| FA1-generation runs timed | factors fitted on all | left-out median over families | "
          "pooled left-out rows | median | p90 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for variant in ("with their profile's fa2", "as fa1"):
        if variant == "as fa1":
            vt.run_framework = as_fa1
        try:
            tables = ft.grid_errors(grid=ft.GRID_NARROW)
        finally:
            vt.run_framework = as_they_are
        line, left_out = ft.lofo_table_row(variant, tables)
        print(line, flush=True)
        if variant == "as fa1":
            print("\nleft-out family medians, FA1-generation runs as fa1:")
            for r in left_out:
                print(f"  {r.family}: {r.median_abs_error_pct:.1f} %")


if __name__ == "__main__":
    main()
