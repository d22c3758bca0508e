"""Framework profiles: what a training stack really does (fused kernels, loss fusion, attention
kernel, gradient dtype, sharding, communication overlap), one sourced TOML file each under
catalog/frameworks/. `gpuplan train --framework NAME` applies one; DEFAULT_FRAMEWORK when none
is given."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Literal

from gpuplan.errors import InputError, UnknownNameError
from gpuplan.specs.memory_behaviour import INFER, behaviour_for
from gpuplan.specs.workload import TrainConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ATTENTION_KERNELS = ("fa1", "fa2", "fa3", "cudnn", "sdpa")
"""The fused attention implementations a profile or a job can name; their ceilings per device:
estimate/efficiency_attention.py."""

DEFAULT_FRAMEWORK = "auto"
"""Used when no profile is named: the stack is inferred from the layout (`auto_framework`),
because the layout says which stacks can run it: FSDP, with or without TP/PP/CP -> fsdp
(PyTorch FSDP; torchtitan composes it with them); other tensor, pipeline, sequence, context
or expert parallelism -> megatron (Megatron-LM/Megatron-Core/NeMo are the stacks that run
them); a ZeRO stage alone (--zero 1-3) -> deepspeed; plain data parallel -> hf (eager
PyTorch DDP). The kernels the user states (`--fused`) are kept; the memory behaviour
of a named stack is applied only when the user names it."""


@dataclass(frozen=True)
class Framework:
    name: str
    description: str
    source: str
    date: str
    fused: bool
    """fused norm/activation/dropout kernels"""
    fused_loss: bool
    """fused (or chunked) cross-entropy: no full fp32 logits copy"""
    attention_kernel: str
    """fa1, fa2, fa3, cudnn or sdpa (estimate/efficiency_attention.py)"""
    grad_dtype: Literal["auto", "fp32"]
    tp_comm_overlap: float
    param_gather_overlap: bool
    allocator: str
    notes: str = ""
    zero3_prefetch_params: float | None = None
    """ZeRO-3: parameters gathered ahead of use (DeepSpeed stage3_prefetch_bucket_size); None =
    a whole block ahead (FSDP prefetch)"""
    tp_comm_overlap_sp: float = 0.0
    """share of TP collectives hidden behind GEMMs when sequence parallelism is on (Megatron-Core
    --tp-comm-overlap: Transformer Engine userbuffers, which requires --sequence-parallel)"""
    grad_reduce_overlap: bool = True
    """the data-parallel gradient reduction bucketed and overlapped with the backward (torch
    DDP and FSDP by default; Megatron-Core --overlap-grad-reduce, off in Megatron-LM's own
    arguments)"""
    tp_backward_overlap: bool = False
    """backward input-gradient TP collectives overlapped with the weight-gradient GEMMs
    (Megatron-LM --async-tensor-model-parallel-allreduce, on by default)"""
    fused_optimizer: bool = True
    """the optimizer step is one fused kernel (apex/TE/DeepSpeed FusedAdam, torch fused=True)
    rather than one pass per arithmetic op (torch foreach / for-loop, Composer)"""
    fp8_grad_dtype: Literal["auto", "fp32"] | None = None
    """the gradient dtype of the stack's FP8 recipes where it differs from grad_dtype (Megatron:
    its H100 FP8 example passes --grad-reduce-in-bf16); None = grad_dtype"""
    grad_reduce_dtype: Literal["grad", "fp32"] = "grad"
    """dtype of the data-parallel gradient reduction when the job leaves it 'auto': the
    gradients' own, or fp32 (FSDP MixedPrecision reduce_dtype=float32)"""
    data_parallel: Literal["replicated", "zero1", "fsdp"] = "replicated"
    """how the stack shards data-parallel state when the job names no --zero/--fsdp: replicated
    (torch DDP), zero1 (a distributed optimizer: optimizer states and the gradient reduction
    sharded, Megatron-Core's), fsdp (full sharding of weights, gradients and states)"""
    end_to_end_class: Literal["pytorch", "megatron", "megatron-lm"] = "pytorch"
    """which fitted end-to-end factor the stack's steps realise
    (estimate.efficiency.END_TO_END_BY_STACK, through estimate.efficiency.stack_class, which
    also looks at the device)"""
    chosen_by: str = ""
    """how the profile was chosen when the user named none (auto_framework); '' = named"""
    named_as: str = ""
    """the alias the user named the profile by (FRAMEWORK_ALIASES); '' = its own name"""
    overlap_stated: str = ""
    """the overlaps the user stated (--overlap, OVERLAPS) in place of the profile's; '' = the
    profile's own"""
    attention_kernel_stated: bool = False
    """the attention kernel is the user's (--attention-kernel), not the profile's"""

    def with_overlap(self, stated: str | None) -> Framework:
        """This profile with the communication overlaps a launch script states (`--overlap`):
        'grad' (Megatron --overlap-grad-reduce, DDP bucketed reduction), 'param'
        (--overlap-param-gather), 'tp' (--tp-comm-overlap: TE userbuffers, with sequence
        parallelism), comma-separated; 'none' for none of them; None or '' = the profile's."""
        if stated is None or not stated.strip():
            return self
        items = parse_overlaps(stated)
        return replace(self, grad_reduce_overlap="grad" in items,
                       param_gather_overlap="param" in items,
                       tp_comm_overlap_sp=1.0 if "tp" in items else 0.0,
                       overlap_stated=",".join(sorted(items)) or "none")

    def with_attention_kernel(self, stated: str | None) -> Framework:
        """This profile with the attention kernel the job states (`--attention-kernel`: an
        older or newer kernel than the profile's, e.g. FlashAttention-1 or FlashAttention-3);
        None or '' = the profile's."""
        if stated is None or not stated.strip():
            return self
        kernel = stated.strip().lower()
        if kernel not in ATTENTION_KERNELS:
            raise InputError("--attention-kernel", stated,
                             f"one of {', '.join(ATTENTION_KERNELS)}")
        return replace(self, attention_kernel=kernel, attention_kernel_stated=True)

    def apply(self, cfg: TrainConfig, named: bool = True) -> TrainConfig:
        """The job with this profile's kernels: fused when the stack fuses (unless the job
        states its own: TrainConfig.fused True or False),
        fp32 gradients when the stack keeps them (Megatron main_grad); when the user named the
        stack (`named`), also its memory behaviour (loss buffers, FSDP units, allocator);
        otherwise the one the layout implies (memory_behaviour.INFER)."""
        stack_grad = self.fp8_grad_dtype if (cfg.precision == "fp8-mixed" and
                                             self.fp8_grad_dtype is not None) else self.grad_dtype
        grad = "fp32" if stack_grad == "fp32" and cfg.grad_dtype != "compute" \
            else cfg.grad_dtype
        mem = behaviour_for(self.name) if named else (cfg.memory_behaviour or INFER)
        reduce = self.grad_reduce_dtype if cfg.grad_reduce_dtype == "auto" else \
            cfg.grad_reduce_dtype
        fused = self.fused if cfg.fused is None else cfg.fused
        return replace(cfg, fused=fused, grad_dtype=grad, memory_behaviour=mem,
                       grad_reduce_dtype=reduce)

    def with_default_sharding(self, cfg: TrainConfig) -> TrainConfig:
        """`cfg` sharded as this stack shards data parallelism by default (data_parallel); for
        a job that states neither --zero nor --fsdp."""
        if self.data_parallel == "zero1":
            return replace(cfg, zero=1, fsdp="none")
        if self.data_parallel == "fsdp":
            return replace(cfg, zero=0, fsdp="full")
        return cfg

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "description": self.description, "fused": self.fused,
                "fused_loss": self.fused_loss, "attention_kernel": self.attention_kernel,
                "attention_kernel_chosen": "stated" if self.attention_kernel_stated
                else "the profile's",
                "grad_dtype": self.grad_dtype, "fp8_grad_dtype": self.fp8_grad_dtype,
                "grad_reduce_dtype": self.grad_reduce_dtype,
                "tp_comm_overlap": self.tp_comm_overlap,
                "tp_comm_overlap_sp": self.tp_comm_overlap_sp,
                "fused_optimizer": self.fused_optimizer,
                "tp_backward_overlap": self.tp_backward_overlap,
                "param_gather_overlap": self.param_gather_overlap,
                "grad_reduce_overlap": self.grad_reduce_overlap,
                "zero3_prefetch_params": self.zero3_prefetch_params,
                "allocator": self.allocator, "notes": self.notes,
                "end_to_end_class": self.end_to_end_class, "data_parallel": self.data_parallel,
                "overlap": (f"stated: {self.overlap_stated}" if self.overlap_stated
                            else "the profile's"),
                "source": f"{self.source} ({self.date})",
                "chosen": self.chosen_by or ("named by the user" + (
                    f" as {self.named_as!r}" if self.named_as else ""))}


_DIR = resources.files("gpuplan") / "catalog" / "frameworks"

OVERLAPS: tuple[str, ...] = ("grad", "param", "tp")
"""what --overlap names: the DP gradient reduction, the ZeRO-1/2 parameter gather, the TP
collectives (with sequence parallelism)"""


def parse_overlaps(stated: str) -> frozenset[str]:
    """'grad,param' -> {'grad', 'param'}; 'none' -> {}; anything else: one clear error."""
    items = {x.strip().lower() for x in stated.split(",") if x.strip()}
    if items == {"none"}:
        return frozenset()
    bad = sorted(items - set(OVERLAPS))
    if bad or not items:
        raise InputError("--overlap", stated, "none, or a comma list of " + ", ".join(OVERLAPS))
    return frozenset(items)


DATA_PARALLEL: tuple[str, ...] = ("replicated", "zero1", "fsdp")
"""the values of Framework.data_parallel (a profile file's typo must not pass as replicated)"""


def framework_names() -> list[str]:
    return sorted(p.name[:-5] for p in _DIR.iterdir() if p.name.endswith(".toml"))


def auto_framework(cfg: TrainConfig) -> tuple[str, str]:
    """(profile name, why) for a job whose stack is not named (DEFAULT_FRAMEWORK): what the
    layout implies. FSDP, alone or with TP/PP/CP (torchtitan composes FSDP2 with them; metaseq
    and Meta's LLaMA code pair FSDP with Megatron TP) -> fsdp; other model parallelism
    (TP/PP/SP/CP/EP) -> megatron; a ZeRO stage named as such (--zero 1-3, not --fsdp) ->
    deepspeed, whose name for it that is (ZeRO-3 stated as --fsdp is PyTorch FSDP, above);
    plain data parallel -> hf."""
    if cfg.zero_stage == 3 and cfg.fsdp != "none":
        return "fsdp", "auto: FSDP layout (torchtitan composes FSDP2 with TP, PP and CP)"
    if cfg.tp > 1 or cfg.pp > 1 or cfg.sp or cfg.cp > 1 or cfg.ep > 1:
        return "megatron", "auto: tensor/pipeline/sequence/context/expert parallel layout"
    if cfg.zero_stage > 0:
        return "deepspeed", f"auto: ZeRO-{cfg.zero_stage} data parallel layout"
    return "hf", "auto: plain data parallel layout"


def resolve_framework(name: str | None, cfg: TrainConfig) -> Framework:
    """The named profile, or (None or 'auto') the one `cfg`'s layout implies."""
    if name is None or name.strip().lower() == "auto":
        picked, why = auto_framework(cfg)
        return replace(get_framework(picked), chosen_by=why)
    return get_framework(name)


FRAMEWORK_ALIASES: dict[str, str] = {
    "torchtitan": "fsdp", "fsdp2": "fsdp", "fully_shard": "fsdp",
    "megatron-core": "megatron", "mcore": "megatron",
    "megatron-deepspeed": "megatron-lm", "nemo1": "megatron",
    "nemo2": "nemo", "megatron-bridge": "nemo",
    "llmfoundry": "llm-foundry", "composer": "llm-foundry", "mosaicml": "llm-foundry",
    "huggingface": "hf", "transformers": "hf", "trainer": "hf", "accelerate": "hf",
    "zero": "deepspeed",
    "scaling": "aa-scaling", "aleph-alpha": "aa-scaling",
}
"""Other names users give the stacks the profiles describe (case-insensitive): torchtitan is
FSDP2, NeMo 1 runs Megatron's kernels and overlap, Megatron-DeepSpeed runs Megatron's kernels
with DeepSpeed's engine reducing gradients after the backward (megatron-lm), Megatron-Bridge is
NeMo 2, Composer is llm-foundry's trainer, Scaling is Aleph Alpha's codebase (aa-scaling)."""


def canonical_framework(name: str) -> str:
    """A profile name or alias (any case, surrounding spaces) -> the profile's name."""
    key = name.strip().lower()
    return FRAMEWORK_ALIASES.get(key, key)


def get_framework(name: str | None) -> Framework:
    """The named profile (or an alias of it, FRAMEWORK_ALIASES); None or 'auto': the profile of
    a plain data-parallel job (use resolve_framework to infer it from a layout)."""
    if name is not None and name.strip().lower() == "auto":
        name = None
    if name is None:
        return resolve_framework(None, TrainConfig())
    names = framework_names()
    if not name.strip():
        raise InputError("--framework", name, "auto or one of: " + ", ".join(names))
    canon = canonical_framework(name)
    if canon not in names:
        raise UnknownNameError("--framework", name, ["auto", *names, *FRAMEWORK_ALIASES])
    raw = _profile_fields(canon)
    try:
        fw = Framework(**raw)
    except TypeError as e:
        raise InputError(f"framework file {canon}.toml", str(e), "the Framework fields") from None
    if fw.data_parallel not in DATA_PARALLEL:
        raise InputError(f"framework file {canon}.toml data_parallel", fw.data_parallel,
                         ", ".join(DATA_PARALLEL))
    return fw if canon == name else replace(fw, named_as=name)


def _profile_fields(name: str) -> dict[str, Any]:
    """A profile file's fields; `extends = "other"` takes the other profile's fields first (one
    level: NeMo 2 runs Megatron-Core's kernels and overlap, with its own gradient dtype)."""
    raw: dict[str, Any] = tomllib.loads((_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if base not in framework_names() or base == name:
        raise InputError(f"framework file {name}.toml extends", base, "another profile's name")
    parent = tomllib.loads((_DIR / f"{base}.toml").read_text(encoding="utf-8"))
    parent.pop("extends", None)
    return {**parent, **raw}
