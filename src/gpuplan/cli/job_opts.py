"""The options that describe a job, defined once for every command (same flag, same default,
same help), and the one function that turns them into a validated `TrainConfig`.

Defaults come from `specs.workload.TrainConfig`, so `gpuplan memory` and `gpuplan train` (and
the search) describe the same job the same way. `--micro-batch/--batch` and
`--seq-len/--context` are one option each: sequences per GPU step and tokens per sequence, in
training and in inference alike.

The one option whose default differs: `--dp` is 1 in `memory` (a per-GPU view with no GPU
count) and "the rest" in `train` (GPUs / (tp x pp x cp)).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from gpuplan.cli.guards import finite, given
from gpuplan.cli.options import (
    AttentionChoice,
    FinetuneChoice,
    Fp8RecipeChoice,
    FsdpChoice,
    LossChoice,
    OptimizerChoice,
    PrecisionChoice,
    RecomputeChoice,
    SelectiveChoice,
)
from gpuplan.errors import InputError
from gpuplan.specs.finetune import LoraConfig, parse_targets
from gpuplan.specs.framework import Framework
from gpuplan.specs.limits import (
    MAX_BATCH,
    MAX_CONTEXT_GB,
    MAX_DIM,
    MAX_GLOBAL_BATCH,
    MAX_GPUS,
    MAX_SEQ,
    MAX_VIRTUAL_STAGES,
)
from gpuplan.specs.workload import TrainConfig

_D = TrainConfig()
_JOB, _PAR, _KER = "Job", "Parallel layout", "Precision and kernels"

MicroBatchOpt = Annotated[int, typer.Option(
    "--micro-batch", "--batch", "-b", min=1, max=MAX_BATCH, rich_help_panel=_JOB,
    help="sequences per GPU per forward/backward (inference: sequences in the batch)")]
SeqLenOpt = Annotated[int | None, typer.Option(
    "--seq-len", "--context", "-s", min=1, max=MAX_SEQ, rich_help_panel=_JOB,
    help=f"tokens per sequence (inference: tokens held in the KV cache; default {_D.seq_len}, "
         "or the model's positions if fewer)")]
GlobalBatchOpt = Annotated[int | None, typer.Option(
    "--global-batch", min=1, max=MAX_GLOBAL_BATCH, rich_help_panel=_JOB,
    help="sequences per optimizer step (default: micro-batch x dp)")]
OptimizerOpt = Annotated[OptimizerChoice, typer.Option("--optimizer", rich_help_panel=_JOB)]
DocumentLenOpt = Annotated[int | None, typer.Option(
    "--document-len", min=1, max=MAX_SEQ, rich_help_panel=_JOB,
    help="tokens per document when sequences pack documents with attention inside each "
         "(FlashAttention varlen / document mask); default one document per sequence")]
LossOpt = Annotated[LossChoice, typer.Option(
    "--loss", rich_help_panel=_JOB,
    help="cross-entropy: fp32 (upcast logits), fused (flash-attn/Liger/compiled: 16-bit logits "
         "and gradient), fused-inplace, vocab-parallel (Megatron), chunked; auto: as the stack")]
OffloadOpt = Annotated[bool, typer.Option(
    "--offload-optimizer", rich_help_panel=_JOB,
    help="optimizer states and step on the CPU (ZeRO-Offload)")]
TpOpt = Annotated[int, typer.Option("--tp", min=1, max=MAX_GPUS, rich_help_panel=_PAR,
                                    help="tensor parallel GPUs")]
PpOpt = Annotated[int, typer.Option("--pp", min=1, max=MAX_GPUS, rich_help_panel=_PAR,
                                    help="pipeline stages")]
CpOpt = Annotated[int, typer.Option("--cp", min=1, max=MAX_GPUS, rich_help_panel=_PAR,
                                    help="context parallel GPUs")]
EpOpt = Annotated[int, typer.Option("--ep", min=1, max=MAX_GPUS, rich_help_panel=_PAR,
                                    help="expert parallel GPUs")]
EtpOpt = Annotated[int | None, typer.Option(
    "--etp", min=1, max=MAX_GPUS, rich_help_panel=_PAR,
    help="expert tensor parallel GPUs: each routed expert split etp ways (default: --tp, as "
         "Megatron-Core; ep x etp must divide tp x dp x cp)")]
ZeroOpt = Annotated[int, typer.Option("--zero", min=0, max=3, rich_help_panel=_PAR,
                                      help="ZeRO stage over the data-parallel group")]
FsdpOpt = Annotated[FsdpChoice, typer.Option("--fsdp", rich_help_panel=_PAR)]
SpOpt = Annotated[bool, typer.Option("--sequence-parallel", rich_help_panel=_PAR)]
VirtualOpt = Annotated[int, typer.Option(
    "--virtual-stages", min=1, max=MAX_VIRTUAL_STAGES, rich_help_panel=_PAR,
    help="interleaved pipeline chunks per stage")]
RecomputeOpt = Annotated[RecomputeChoice, typer.Option("--recompute", rich_help_panel=_KER)]
SelectiveOpt = Annotated[SelectiveChoice, typer.Option(
    "--selective", rich_help_panel=_KER,
    help="what --recompute selective reruns: attention (Megatron: the attention core), per-op "
         "(torchtitan op-level AC: every second matmul and the element-wise ops), matmuls "
         "(every matmul output kept, the element-wise ops rerun: JAX save-dots, LLaMA); auto: "
         "as the stack")]
AttentionOpt = Annotated[AttentionChoice, typer.Option("--attention", rich_help_panel=_KER)]
FusedOpt = Annotated[bool | None, typer.Option(
    "--fused/--no-fused", rich_help_panel=_KER,
    help="fused norm/activation kernels (Megatron, torch.compile), or eager ones even where "
         "the --framework profile fuses; default: as the stack does (eager without one)")]
PrecisionOpt = Annotated[PrecisionChoice, typer.Option(
    "--precision", rich_help_panel=_KER,
    help="*-mixed: 16-bit (or fp8) compute with fp32 master weights; bf16: pure bf16, no "
         "master copy, gradients and optimizer states in bf16 too")]
Fp8RecipeOpt = Annotated[Fp8RecipeChoice, typer.Option(
    "--fp8-recipe", rich_help_panel=_KER,
    help="with --precision fp8-mixed: tensorwise (one scale per tensor: Transformer Engine, "
         "torchao's default) or rowwise (torchao's row-wise scaling: two casts per tensor, "
         "rescaled backward GEMMs)")]
GradFp32Opt = Annotated[bool, typer.Option(
    "--grad-fp32", rich_help_panel=_KER,
    help="keep/accumulate gradients in fp32 (Megatron main_grad)")]
GradComputeOpt = Annotated[bool, typer.Option(
    "--grad-compute-dtype", rich_help_panel=_KER,
    help="keep gradients in the compute dtype even where the stack keeps fp32 (Megatron-LM "
         "--grad-reduce-in-bf16)")]
NoDropoutOpt = Annotated[bool, typer.Option(
    "--no-dropout", rich_help_panel=_KER, help="ignore the model config's dropout rates")]
TargetOpt = Annotated[str, typer.Option(
    "--target", rich_help_panel=_KER, help="whose kernels: auto (the device's), cpu or cuda")]
CudaContextOpt = Annotated[float | None, typer.Option(
    "--cuda-context-gb", min=0.0, callback=finite(0.0, MAX_CONTEXT_GB), rich_help_panel=_KER,
    help="CUDA context + workspaces, GB (default 0.5 GiB = 0.537 GB)")]
FragmentationOpt = Annotated[float | None, typer.Option(
    "--fragmentation", min=0.0, max=0.9, callback=finite(0.0, 0.9), rich_help_panel=_KER,
    help="allocator fragmentation share (default 0.10 train, 0.05 infer)")]

FinetuneOpt = Annotated[FinetuneChoice, typer.Option(
    "--finetune", rich_help_panel=_JOB,
    help="full fine-tuning, LoRA (16-bit frozen weights) or QLoRA (NF4 frozen weights)")]
LoraRankOpt = Annotated[int, typer.Option("--lora-rank", min=1, max=MAX_DIM,
                                          rich_help_panel=_JOB, help="adapter rank r")]
LoraTargetsOpt = Annotated[str, typer.Option(
    "--lora-targets", rich_help_panel=_JOB,
    help="all-linear, attention, mlp or a comma list of q_proj,k_proj,v_proj,o_proj,gate_proj,"
         "up_proj,down_proj")]
PagedOpt = Annotated[bool | None, typer.Option(
    "--paged-optimizer/--no-paged-optimizer", rich_help_panel=_JOB,
    help="optimizer states in paged (CPU-evictable) memory; default on for qlora")]
_L = LoraConfig()

DEFAULTS: dict[str, Any] = {
    "micro_batch": _D.micro_batch, "seq_len": None, "global_batch": _D.global_batch,
    "optimizer": OptimizerChoice(_D.optimizer), "offload_optimizer": _D.offload_optimizer,
    "loss": LossChoice(_D.loss), "document_len": _D.document_len,
    "fp8_recipe": Fp8RecipeChoice(_D.fp8_recipe),
    "tp": _D.tp, "pp": _D.pp, "cp": _D.cp, "ep": _D.ep, "etp": _D.etp, "zero": _D.zero,
    "fsdp": FsdpChoice(_D.fsdp), "sequence_parallel": _D.sp,
    "virtual_stages": _D.virtual_stages, "recompute": RecomputeChoice(_D.recompute),
    "selective": SelectiveChoice(_D.selective),
    "attention": AttentionChoice(_D.attention), "fused": _D.fused,
    "precision": PrecisionChoice(_D.precision), "grad_fp32": False,
    "grad_compute_dtype": False, "no_dropout": False,
    "target": _D.target, "cuda_context_gb": None, "fragmentation": None,
    "finetune": FinetuneChoice(_L.finetune), "lora_rank": _L.rank,
    "lora_targets": ",".join(_L.targets), "paged_optimizer": _L.paged_optimizer,
}
"""every job option's default, taken from TrainConfig (the commands use these)"""


def cuda_context_bytes(gb: float | None, device_kind: str) -> int:
    if device_kind == "cpu":
        return 0
    return _D.cuda_context_bytes if gb is None else int(gb * 1e9)


def grad_dtype(o: dict[str, Any]) -> str:
    """--grad-fp32 / --grad-compute-dtype -> TrainConfig.grad_dtype (at most one of them)."""
    if o["grad_fp32"] and o.get("grad_compute_dtype"):
        raise InputError("--grad-compute-dtype", True, "not together with --grad-fp32 (pick "
                         "one gradient dtype)")
    return "fp32" if o["grad_fp32"] else "compute" if o.get("grad_compute_dtype") else "auto"


def train_job(o: dict[str, Any], dp: int, device_kind: str) -> TrainConfig:
    """The CLI's job options (names as in DEFAULTS) -> one validated TrainConfig."""
    if o["target"] not in ("auto", "cpu", "cuda"):
        raise InputError("--target", o["target"], "auto, cpu or cuda")
    return TrainConfig(
        micro_batch=o["micro_batch"], seq_len=o["seq_len"], precision=o["precision"].value,
        optimizer=o["optimizer"].value, zero=o["zero"], fsdp=o["fsdp"].value, dp=dp,
        tp=o["tp"], pp=o["pp"], cp=o["cp"], ep=o["ep"], etp=o.get("etp"),
        sp=o["sequence_parallel"], virtual_stages=o["virtual_stages"], recompute=o["recompute"].value,
        attention=o["attention"].value, grad_dtype=grad_dtype(o),
        offload_optimizer=o["offload_optimizer"], global_batch=o["global_batch"],
        dropout=not o["no_dropout"], fused=o["fused"], target=o["target"],
        cuda_context_bytes=cuda_context_bytes(o["cuda_context_gb"], device_kind),
        fragmentation=_D.fragmentation if o["fragmentation"] is None else o["fragmentation"],
        lora=lora_job(o), loss=o.get("loss", LossChoice.auto).value,
        document_len=o.get("document_len"),
        fp8_recipe=o.get("fp8_recipe", Fp8RecipeChoice.tensorwise).value,
        selective=o.get("selective", SelectiveChoice.auto).value)


def lora_job(o: dict[str, Any]) -> LoraConfig:
    """--finetune, --lora-rank, --lora-targets, --paged-optimizer -> the job's LoraConfig."""
    return LoraConfig(finetune=o["finetune"].value, rank=o["lora_rank"],
                      targets=parse_targets(o["lora_targets"]),
                      paged_optimizer=o["paged_optimizer"])


def train_only_given(o: dict[str, Any]) -> dict[str, object]:
    """The training-only options as TrainConfig field values (for refusing them in inference)."""
    return {"global_batch": o["global_batch"], "precision": o["precision"].value,
            "optimizer": o["optimizer"].value, "zero": o["zero"], "fsdp": o["fsdp"].value,
            "dp": o.get("dp", 1), "pp": o["pp"], "cp": o["cp"], "ep": o["ep"],
            "etp": o.get("etp"), "sp": o["sequence_parallel"],
            "virtual_stages": o["virtual_stages"], "recompute": o["recompute"].value,
            "attention": o["attention"].value,
            "grad_dtype": grad_dtype(o),
            "offload_optimizer": o["offload_optimizer"], "dropout": not o["no_dropout"],
            "fused": o["fused"], "target": o["target"],
            "loss": o.get("loss", LossChoice.auto).value, "document_len": o.get("document_len"),
            "fp8_recipe": o.get("fp8_recipe", Fp8RecipeChoice.tensorwise).value,
            "selective": o.get("selective", SelectiveChoice.auto).value}


def stack_job(ctx: typer.Context, fw: Framework, job: TrainConfig) -> tuple[TrainConfig, str]:
    """The job as stack `fw` runs it (Framework.apply) and, when the user named the stack but
    neither --zero nor --fsdp, sharded as that stack shards data parallelism by default
    (Framework.data_parallel: Megatron's distributed optimizer, torchtitan's and llm-foundry's
    FSDP); the second value says so ('' when the job's own sharding stands)."""
    named = not fw.chosen_by
    note = ""
    if named and fw.data_parallel != "replicated" and not given(ctx, "zero", "fsdp"):
        job = fw.with_default_sharding(job)
        how = ("ZeRO-1 (a distributed optimizer)" if fw.data_parallel == "zero1"
               else "FSDP full sharding (ZeRO-3)")
        note = (f"{how}: how {fw.name} shards data parallelism by default (no --zero or "
                "--fsdp given)")
    return fw.apply(job, named=named), note
