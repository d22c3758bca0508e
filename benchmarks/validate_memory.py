"""Validate the training memory model against what really happened.

Three kinds of evidence, each row named calibration or validation:

1. Measured peaks (`benchmarks/data/memory_peaks.csv`): torchtitan's published per-GPU peak
   *reserved* memory (Llama 3.1 8B/70B/405B on H100 96 GB and H200). Compared with what the
   caching allocator holds: the prediction less the CUDA context and NCCL's own buffers.
   Calibration rows: Tables 1 and 3 (seen by the project before); validation: the rest.
2. Runs that ran (must fit): every modelled row of training_runs.csv (`training_runs.RUNS`, the
   development set: calibration) and llm-foundry's H100 80GB BF16 table
   (`benchmarks/data/llmfoundry_h100_bf16_runs.csv`, never used before: validation), and
   configurations documented to have run (`documented_fits`: validation).
3. Documented out-of-memory configurations (must not fit).

Tolerances fixed before the first run of this script: a measured peak within ±20 % per row;
at most one validation run that really ran declared out of memory; every documented OOM
declared out of memory. Nothing here is tuned per row.

Changed after the first look at validation errors, and said so: the two 2025 H200 rows read
34 % high; that torchtitan version compiles the loss under --training.compile
(torchtitan components/loss.py build_cross_entropy_loss), which the 2024 tables' version did
not, so those rows use the `fused` loss kind (a compiled cross-entropy: column loss_compiled).
No constant changed.

Run: PYTHONPATH=src python benchmarks/validate_memory.py [--json]
"""

from __future__ import annotations

import csv
import json
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from training_runs import H100_96GB, RUNS, mpt, run_device

from gpuplan.estimate.memory import MemoryResult, TrainConfig, train_memory
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.device import Device
from gpuplan.specs.memory_behaviour import BEHAVIOURS, MemoryBehaviour, behaviour_for

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
    "flashattn-train": behaviour_for(None, loss="fused-inplace"),
}
"""which stack each family of runs used (source: the family's code as cited in
training_runs.py); families not listed: 'default' (PyTorch fp32 cross-entropy)"""


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
            # torchtitan splits the local batch into pp micro-batches by default
            # (pipeline_parallel_microbatches unset; inferred, not stated in the table)
            micro = lb // pp
            cfg = TrainConfig(
                micro_batch=micro, seq_len=int(row["seq_len"]), fsdp="full", dp=dp, tp=tp,
                pp=pp, cp=cp, sp=tp > 1, recompute=rec,  # type: ignore[arg-type]
                precision="fp8-mixed" if row["precision"] == "fp8" else "bf16-mixed",
                fused=row["compile"] == "True", dropout=False,
                global_batch=lb * dp,
                virtual_stages=2 if row["schedule"] == "interleaved" else 1,
                memory_behaviour=behaviour_for(
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
    fits: bool
    need_gb: float
    capacity_gb: float


def _fit(run_id: str, split: str, m: Any, d: Device, cfg: TrainConfig) -> FitRow:
    r = train_memory(m, d, cfg)
    return FitRow(run_id, split, r.fits, r.total_bytes / 1e9, r.capacity_bytes / 1e9)


def run_behaviour(run: Any) -> MemoryBehaviour:
    """The run's framework profile when it names one (training_runs.TrainingRun.framework,
    where present), else its family's stack (FAMILY_BEHAVIOUR), else 'default'."""
    fw = getattr(run, "framework", "")
    if fw in BEHAVIOURS:
        return behaviour_for(fw)
    return FAMILY_BEHAVIOUR.get(run.family, behaviour_for(None))


def dev_runs() -> list[FitRow]:
    """training_runs.RUNS: all ran. The project's development set is calibration; rows the
    file marks as validation (TrainingRun.split, where present) stay validation."""
    rows = []
    for run in RUNS:
        if run.device.startswith("TPU"):
            continue  # no PyTorch caching allocator; XLA plans memory statically
        cfg = TrainConfig(**{**run.train, "memory_behaviour": run_behaviour(run)})
        rows.append(_fit(run.run_id, getattr(run, "split", "calibration"), run.model,
                         run_device(run.device), cfg))
    return rows


def llmfoundry_h100_runs() -> list[FitRow]:
    """llm-foundry's H100 80GB BF16 table (amp_bf16, FSDP FULL_SHARD): all ran (validation).
    Same modelling as training_runs._llmfoundry: MPT from its yaml, flash attention, low-
    precision LayerNorm (fused), no dropout."""
    rows = []
    d = get_device("h100")
    with open(DATA / "llmfoundry_h100_bf16_runs.csv") as f:
        for row in csv.DictReader(f):
            seq, gpus = int(row["seq_len"]), int(row["gpus"])
            m = mpt(row["model"].removeprefix("mpt-"), seq)
            cfg = TrainConfig(
                micro_batch=int(row["micro_batch"]), seq_len=seq, dp=gpus, fsdp="full",
                global_batch=int(row["micro_batch"]) * gpus * int(row["grad_accum"]),
                recompute="full" if row["activation_checkpointing"] == "True" else "none",
                attention="flash", fused=True, dropout=False,
                memory_behaviour=behaviour_for("llm-foundry"))
            rid = (f"llmfoundry-h100-{row['model']}-s{seq}-g{gpus}-mb{row['micro_batch']}")
            rows.append(_fit(rid, "validation", m, d, cfg))
    return rows


def documented_fits() -> list[FitRow]:
    """Configurations documented to have run (must fit), outside the training-run tables."""
    rows = []
    # Llama 3 70B SFT, 32 x H100 80GB, FP8, TP4 PP4 VP10 DP2, mbs 1, gbs 32, seq 4096, recompute
    # core_attn: 'Passed' in NVIDIA-NeMo/Megatron-Bridge PR #3107 (2026-04; VP5 OOMed in 30-60 %
    # of runs, so that one is left out: borderline, neither verdict is documented)
    rows.append(_fit("mbridge-pr3107-llama3-70b-sft-h100-vp10", "validation",
                     get_model("llama-3-70b"), get_device("h100"),
                     TrainConfig(micro_batch=1, seq_len=4096, tp=4, pp=4, dp=2, sp=True,
                                 virtual_stages=10, recompute="selective",
                                 precision="fp8-mixed", global_batch=32, zero=1, fused=True,
                                 dropout=False, memory_behaviour=behaviour_for("megatron"))))
    return rows


def documented_ooms() -> list[FitRow]:
    """Configurations documented to run out of memory (must not fit)."""
    rows = []
    # Llama-2-7B full fine-tune, AdamW mixed precision, on one 24 GB card: 16 bytes/param
    # = 108 GB of states (Rajbhandari et al. 2020 §3.1; DeepSpeed ZeRO-Offload tutorial)
    rows.append(_fit("llama2-7b-full-ft-rtx4090", "validation", get_model("llama-2-7b"),
                     get_device("rtx-4090"), TrainConfig(micro_batch=1, seq_len=2048)))
    # GPT-2 1.5B, batch 32 x 1024, plain data parallel on a 32 GB V100: "cannot train"
    # (Rajbhandari et al. 2020 §3.1-3.2: 24 GB states + 60 GB activations)
    rows.append(_fit("zero-gpt2-1.5b-v100-32gb", "validation", get_model("gpt2-xl"),
                     get_device("v100-sxm2-32gb"),
                     TrainConfig(micro_batch=32, seq_len=1024, precision="fp16-mixed",
                                 attention="naive")))
    # Llama 3.3 70B SFT with NeMo Automodel (FSDP2 dp 4 x PP 8 = 32 H100 80GB), packed
    # sequences of 1024, pp_microbatch_size 4: 'CUDA out of memory' on every rank in the first
    # backward, 73.15 GiB allocated (NVIDIA-NeMo/Automodel PR #2673, 2026-06). Inferred: no
    # activation checkpointing (the PR puts ~52 GB in activations); 8 micro-batches per step.
    rows.append(_fit("automodel-pr2673-llama3.3-70b-sft-h100-pp8-mb4", "validation",
                     get_model("llama-3-70b"), get_device("h100"),
                     TrainConfig(micro_batch=4, seq_len=1024, pp=8, dp=4, fsdp="full",
                                 global_batch=4 * 4 * 8, dropout=False,
                                 memory_behaviour=behaviour_for("fsdp"))))
    return rows


def calibrate_overhead() -> float:
    """The allocator's reserved overhead that minimises the median |error| on the calibration
    peaks (grid 0.00-0.30 by 0.01); the code's RESERVED_OVERHEAD is set from this, once."""
    def med(x: float) -> float:
        return statistics.median(abs(r.error) for r in peak_rows(x) if r.split == "calibration")
    return min((i / 100 for i in range(31)), key=med)


def summary(peaks: list[PeakRow], dev: list[FitRow], val: list[FitRow],
            ooms: list[FitRow]) -> dict[str, Any]:
    def stats(rows: list[PeakRow]) -> dict[str, Any]:
        errs = [abs(r.error) for r in rows]
        return {"rows": len(rows), "median_abs_error": statistics.median(errs) if errs else None,
                "max_abs_error": max(errs) if errs else None,
                "within_tolerance": sum(e <= PEAK_TOLERANCE for e in errs)}
    return {
        "peak_tolerance": PEAK_TOLERANCE,
        "peaks_calibration": stats([r for r in peaks if r.split == "calibration"]),
        "peaks_validation": stats([r for r in peaks if r.split == "validation"]),
        "ran_calibration": {"runs": len(dev), "declared_oom": sum(not r.fits for r in dev)},
        "ran_validation": {"runs": len(val), "declared_oom": sum(not r.fits for r in val),
                           "bar": MAX_VALIDATION_MISSES},
        "documented_oom": {"cases": len(ooms), "declared_oom": sum(not r.fits for r in ooms)},
    }


def main(argv: list[str]) -> int:
    peaks, ran, ooms = peak_rows(), dev_runs(), documented_ooms()
    seen = {r.run_id for r in ran}
    ran += [r for r in llmfoundry_h100_runs() + documented_fits() if r.run_id not in seen]
    dev = [r for r in ran if r.split == "calibration"]
    val = [r for r in ran if r.split == "validation"]
    s = summary(peaks, dev, val, ooms)
    s["reserved_overhead_calibrated"] = calibrate_overhead()
    if "--json" in argv:
        print(json.dumps({"summary": s, "peaks": [r.__dict__ | {"error": r.error}
                                                  for r in peaks],
                          "ran": [r.__dict__ for r in dev + val], "oom": [r.__dict__
                                                                          for r in ooms]}))
        return 0
    print("Measured peaks (torchtitan, peak reserved GiB; predicted = allocator-visible)")
    print(f"{'case':22} {'split':12} {'measured':>9} {'predicted':>9} {'error':>7}  moment")
    for r in peaks:
        print(f"{r.case_id:22} {r.split:12} {r.measured_gib:9.1f} {r.predicted_gib:9.1f} "
              f"{r.error:+7.1%}  {r.note}")
    print("\nRuns that ran, declared out of memory:")
    for r in dev + val:
        if not r.fits:
            print(f"  {r.run_id} ({r.split}): {r.need_gb:.1f} GB > {r.capacity_gb:.1f} GB")
    print("\nDocumented OOMs:")
    for r in ooms:
        print(f"  {r.run_id}: {'declared OOM' if not r.fits else 'MISSED (declared fit)'} "
              f"({r.need_gb:.1f} GB of {r.capacity_gb:.1f} GB)")
    print("\n" + json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

