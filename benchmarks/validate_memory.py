"""Validate the training memory model against what really happened.

Three kinds of evidence:

1. Measured peaks (`benchmarks/data/memory_peaks.csv`): torchtitan's published per-GPU peak
   *reserved* memory (Llama 3.1 8B/70B/405B on H100 96 GB and H200). Compared with what the
   caching allocator holds: the prediction less the CUDA context and NCCL's own buffers. The
   torchtitan rows (H100 96 GB, H200) are calibration: every one was seen during modelling (the
   2024-12 Tables 2, 4, 5 and 6 and the 2025 H200 rows were first marked validation, then looked
   at and modelled on). The 90th percentile of |error| on them is the model's stated band
   (specs.memory_behaviour.MEMORY_BAND). Rows added later as validation (torchao's B200 table)
   are scored only with `--split validation`.
2. Runs that ran (must not be declared out of memory): every modelled GPU row of
   training_runs.RUNS of the calibration split, each with its framework profile applied as
   `--framework` would, and again without one. `--split validation` scores the hold-out rows
   and the configurations documented to have run (`documented_fits`) instead (for the lead;
   not looked at while modelling).
3. Documented out-of-memory configurations (must be declared out of memory).

The verdict (estimate.memory.memory_verdict): fits, tight (capacity inside the predicted
peak's ±band) or does_not_fit; "declared out of memory" = does_not_fit.

Tolerances fixed before the first run of this script: a measured peak within ±20 % per row;
at most one run that really ran declared out of memory; every documented OOM declared out of
memory. Nothing here is tuned per row.

Changed after looking, and said so: the two 2025 H200 rows read 34 % high; that torchtitan
version compiles the loss under --training.compile (torchtitan components/loss.py
build_cross_entropy_loss), which the 2024 tables' version did not, so those rows use the
`fused` loss kind (a compiled cross-entropy: column loss_compiled). Pipeline rows split the
local batch into pp x v micro-batches (torchtitan's default: "the number of pipeline stages",
--experimental.pipeline_parallel_microbatches).

Run: PYTHONPATH=src python benchmarks/validate_memory.py [--json] [--split validation]
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from training_runs import H100_96GB, RUNS, memory_not_scored, run_device

from gpuplan.estimate.memory import MemoryResult, TrainConfig, train_memory
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.device import Device
from gpuplan.specs.framework import get_framework
from gpuplan.specs.memory_behaviour import MEMORY_BAND, MemoryBehaviour, behaviour_for

DATA = Path(__file__).parent / "data"
GiB = 2**30
PEAK_TOLERANCE = 0.20
"""per-row tolerance on measured peaks, fixed before looking"""
MAX_VALIDATION_MISSES = 1

FAMILY_BEHAVIOUR: dict[str, MemoryBehaviour] = {
    "llmfoundry": behaviour_for("llm-foundry"),
    "megatron2021-t1": behaviour_for("megatron"),
    "megatron2021-t2": behaviour_for("megatron"),
    "bloom": behaviour_for("megatron"),
    "opt": behaviour_for("megatron"),
    # flash-attention's training code: flash_attn CrossEntropyLoss(inplace_backward=True)
    "flashattn-train": behaviour_for("megatron", loss="fused-inplace", name="flashattn-train"),
}
"""the loss a family's own code uses where it differs from its framework profile's (source:
the family's code as cited in training_runs.py)"""


def h100_96gb() -> Device:
    """torchtitan's Grand Teton H100: 96 GB HBM2e; 95 GiB usable (assumption, as in
    tests/test_memory_cases.py)."""
    return run_device(H100_96GB)


@dataclass
class PeakRow:
    case_id: str
    split: str
    measured_gib: float
    predicted_gib: float
    note: str

    @property
    def error(self) -> float:
        return self.predicted_gib / self.measured_gib - 1


def allocator_bytes(r: MemoryResult) -> int:
    """What torch.cuda.max_memory_reserved can see: not the CUDA context, not NCCL's buffers."""
    return r.total_bytes - r.other_items.get("cuda_context", 0) - r.other_items.get(
        "nccl_buffers", 0)


def peak_rows(fragmentation: float | None = None) -> list[PeakRow]:
    out = []
    with open(DATA / "memory_peaks.csv") as f:
        for row in csv.DictReader(f):
            d = h100_96gb() if row["device"] == "H100-96GB" else get_device(row["device"])
            m = get_model(row["model"])
            gpus, tp, pp, cp = (int(row[k]) for k in ("gpus", "tp", "pp", "cp"))
            dp = gpus // (tp * pp * cp)
            lb = int(row["local_batch"])
            rec = {"selective-op": "selective", "full": "full"}[row["recompute"]]
            # torchtitan splits the local batch into as many micro-batches as there are
            # pipeline stages, pp x v (pipeline_parallel_microbatches unset; the tables do
            # not state it)
            v = 2 if row["schedule"] == "interleaved" else 1
            micro = lb // (pp * v)
            cfg = TrainConfig(
                micro_batch=micro, seq_len=int(row["seq_len"]), fsdp="full", dp=dp, tp=tp,
                pp=pp, cp=cp, sp=tp > 1, recompute=rec,  # type: ignore[arg-type]
                precision="fp8-mixed" if row["precision"] == "fp8" else "bf16-mixed",
                fused=row["compile"] == "True", dropout=False,
                global_batch=lb * dp, virtual_stages=v)
            cfg = get_framework("fsdp").apply(cfg)  # torchtitan: fp32 gradients, no KV cache
            cfg = replace(cfg, memory_behaviour=behaviour_for(
                "fsdp", **({"loss": "fused"} if row["loss_compiled"] == "True" else {})))
            if fragmentation is not None:
                cfg = replace(cfg, fragmentation=fragmentation)
            r = train_memory(m, d, cfg)
            note = (f"{r.details['peak_moment']}; per-op SAC modelled as selective"
                    if rec == "selective" else str(r.details["peak_moment"]))
            out.append(PeakRow(row["case_id"], row["split"], float(row["measured_gib"]),
                               allocator_bytes(r) / GiB, note))
    return out


@dataclass
class FitRow:
    run_id: str
    split: str
    family: str
    verdict: str
    need_gb: float
    capacity_gb: float

    @property
    def declared_oom(self) -> bool:
        return self.verdict == "does_not_fit"


def _fit(run_id: str, split: str, family: str, m: Any, d: Device, cfg: TrainConfig) -> FitRow:
    r = train_memory(m, d, cfg)
    return FitRow(run_id, split, family, r.verdict, r.total_bytes / 1e9, r.capacity_bytes / 1e9)


def run_config(run: Any, named: bool = True) -> TrainConfig:
    """The run's job as `gpuplan train --framework F` builds it (named=False: without
    --framework, the layout's inferred memory behaviour), with its family's own loss where
    FAMILY_BEHAVIOUR says it differs."""
    fw = get_framework(run.framework or None)
    cfg = fw.apply(TrainConfig(**run.train), named=named)
    if named and run.family in FAMILY_BEHAVIOUR:
        cfg = replace(cfg, memory_behaviour=FAMILY_BEHAVIOUR[run.family])
    return cfg


def ran(split: str, named: bool = True) -> list[FitRow]:
    """training_runs.RUNS of one split: all ran (TPU rows, JAX/XLA families on GPUs and runs
    that offload activations skipped: training_runs.memory_not_scored)."""
    return [_fit(run.run_id, run.split, run.family, run.model, run_device(run.device),
                 run_config(run, named))
            for run in RUNS if run.split == split and not run.device.startswith("TPU")
            and not memory_not_scored(run)]


def documented_fits() -> list[FitRow]:
    """Configurations documented to have run (must fit), outside the training-run tables."""
    rows = []
    # Llama 3 70B SFT, 32 x H100 80GB, FP8, TP4 PP4 VP10 DP2, mbs 1, gbs 32, seq 4096, recompute
    # core_attn: 'Passed' in NVIDIA-NeMo/Megatron-Bridge PR #3107 (2026-04; VP5 OOMed in 30-60 %
    # of runs, so that one is left out: borderline, neither verdict is documented)
    rows.append(_fit("mbridge-pr3107-llama3-70b-sft-h100-vp10", "validation", "documented",
                     get_model("llama-3-70b"), get_device("h100"),
                     get_framework("megatron").apply(TrainConfig(
                         micro_batch=1, seq_len=4096, tp=4, pp=4, dp=2, sp=True,
                         virtual_stages=10, recompute="selective", precision="fp8-mixed",
                         global_batch=32, zero=1, fused=True, dropout=False))))
    return rows


def documented_ooms() -> list[FitRow]:
    """Configurations documented to run out of memory (must not fit)."""
    rows = []
    # Llama-2-7B full fine-tune, AdamW mixed precision, on one 24 GB card: 16 bytes/param
    # = 108 GB of states (Rajbhandari et al. 2020 §3.1; DeepSpeed ZeRO-Offload tutorial)
    rows.append(_fit("llama2-7b-full-ft-rtx4090", "validation", "oom", get_model("llama-2-7b"),
                     get_device("rtx-4090"), TrainConfig(micro_batch=1, seq_len=2048)))
    # GPT-2 1.5B, batch 32 x 1024, plain data parallel on a 32 GB V100: "cannot train"
    # (Rajbhandari et al. 2020 §3.1-3.2: 24 GB states + 60 GB activations)
    rows.append(_fit("zero-gpt2-1.5b-v100-32gb", "validation", "oom", get_model("gpt2-xl"),
                     get_device("v100-sxm2-32gb"),
                     TrainConfig(micro_batch=32, seq_len=1024, precision="fp16-mixed",
                                 attention="naive")))
    # Llama 3.3 70B SFT with NeMo Automodel (FSDP2 dp 4 x PP 8 = 32 H100 80GB), packed
    # sequences of 1024, pp_microbatch_size 4: 'CUDA out of memory' on every rank in the first
    # backward, 73.15 GiB allocated (NVIDIA-NeMo/Automodel PR #2673, 2026-06). Inferred: no
    # activation checkpointing (the PR puts ~52 GB in activations); 8 micro-batches per step.
    rows.append(_fit("automodel-pr2673-llama3.3-70b-sft-h100-pp8-mb4", "validation", "oom",
                     get_model("llama-3-70b"), get_device("h100"),
                     get_framework("fsdp").apply(TrainConfig(
                         micro_batch=4, seq_len=1024, pp=8, dp=4, fsdp="full",
                         global_batch=4 * 4 * 8, dropout=False))))
    return rows


OVERHEAD_ROWS = ("tt-t1-", "tt-t3-")
"""The peaks the allocator overhead was fitted on, once (torchtitan 2024-12 Tables 1 and 3:
FSDP only, where every other term is modelled); the other calibration peaks were modelled on
with the overhead fixed, so their residual errors show structure, not the allocator."""


def calibrate_overhead() -> float:
    """The allocator's reserved overhead that minimises the median |error| on OVERHEAD_ROWS
    (grid 0.00-0.30 by 0.01); the code's RESERVED_OVERHEAD is set from this, once."""
    def med(x: float) -> float:
        return statistics.median(abs(r.error) for r in peak_rows(x)
                                 if r.case_id.startswith(OVERHEAD_ROWS))
    return min((i / 100 for i in range(31)), key=med)


def band(errs: list[float]) -> float:
    """The model's stated band: the 90th percentile of |error| on the calibration peaks
    (statistics.quantiles, exclusive method), rounded up to a whole percent."""
    return math.ceil(statistics.quantiles(errs, n=10)[-1] * 100) / 100


def families(rows: list[FitRow]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in rows:
        f = out.setdefault(r.family, {"runs": 0, "fits": 0, "tight": 0, "does_not_fit": 0})
        f["runs"] += 1
        f[r.verdict] += 1
    return out


def summary(peaks: list[PeakRow], runs: list[FitRow], split: str, unnamed: list[FitRow],
            ooms: list[FitRow]) -> dict[str, Any]:
    errs = [abs(r.error) for r in peaks if r.split == "calibration"]
    return {
        "peak_tolerance": PEAK_TOLERANCE,
        "peaks_calibration": {
            "rows": len(errs), "median_abs_error": statistics.median(errs),
            "max_abs_error": max(errs), "within_tolerance": sum(e <= PEAK_TOLERANCE
                                                                for e in errs)},
        "band": band(errs), "band_in_code": MEMORY_BAND,
        f"ran_{split}": {"runs": len(runs), "declared_oom": sum(r.declared_oom for r in runs),
                         "tight": sum(r.verdict == "tight" for r in runs),
                         "bar": MAX_VALIDATION_MISSES, "per_family": families(runs)},
        f"ran_{split}_without_framework": {
            "runs": len(unnamed), "declared_oom": sum(r.declared_oom for r in unnamed),
            "tight": sum(r.verdict == "tight" for r in unnamed)},
        "documented_oom": {"cases": len(ooms), "declared_oom": sum(r.declared_oom
                                                                   for r in ooms)},
    }


def main(argv: list[str]) -> int:
    split = "validation" if "--split" in argv and "validation" in argv else "calibration"
    peaks, ooms = peak_rows(), documented_ooms()
    runs, unnamed = ran(split), ran(split, named=False)
    if split == "validation":
        runs += documented_fits()
    s = summary(peaks, runs, split, unnamed, ooms)
    if split == "validation":
        errs = [abs(r.error) for r in peaks if r.split == "validation"]
        s["peaks_validation"] = {"rows": len(errs), "median_abs_error": statistics.median(errs),
                                 "max_abs_error": max(errs), "within_tolerance": sum(
                                     e <= PEAK_TOLERANCE for e in errs)}
    peaks = [r for r in peaks if r.split == split]
    s["reserved_overhead_calibrated"] = calibrate_overhead()
    if "--json" in argv:
        print(json.dumps({"summary": s, "peaks": [r.__dict__ | {"error": r.error}
                                                  for r in peaks],
                          "ran": [r.__dict__ for r in runs],
                          "oom": [r.__dict__ for r in ooms]}))
        return 0
    print("Measured peaks (torchtitan, peak reserved GiB; predicted = allocator-visible)")
    print(f"{'case':22} {'split':12} {'measured':>9} {'predicted':>9} {'error':>7}  moment")
    for r in peaks:  # of the split asked for
        print(f"{r.case_id:22} {r.split:12} {r.measured_gib:9.1f} {r.predicted_gib:9.1f} "
              f"{r.error:+7.1%}  {r.note}")
    print(f"\nRuns that ran ({split}), by family: runs / fits / tight / declared OOM")
    for fam, c in families(runs).items():
        print(f"  {fam:28} {c['runs']:4} {c['fits']:5} {c['tight']:6} {c['does_not_fit']:5}")
    for label, rows in (("with --framework", runs), ("without --framework", unnamed)):
        print(f"\nRuns that ran ({split}, {label}), not 'fits':")
        for r in rows:
            if r.verdict != "fits":
                print(f"  {r.run_id}: {r.verdict} ({r.need_gb:.1f} GB of {r.capacity_gb:.1f})")
    print("\nDocumented OOMs:")
    for r in ooms:
        print(f"  {r.run_id}: {'declared OOM' if r.declared_oom else 'MISSED: ' + r.verdict} "
              f"({r.need_gb:.1f} GB of {r.capacity_gb:.1f} GB)")
    print("\n" + json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
