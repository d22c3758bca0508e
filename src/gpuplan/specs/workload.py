"""The job: what is trained or served, how it is split over GPUs, its precision and kernels.

One validated description per kind of job (`TrainConfig`, `InferConfig`); every cross-field
rule lives here: a job checks itself when it is made (and when `dataclasses.replace` makes a
changed copy), `check_split` checks it against a model, `check_layout` against a GPU count.
Estimators take these objects; `ops.impl.train_impl` is the one conversion from a training job
to kernel settings, used by memory, step time and the layout search alike.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from dataclasses import field as dc_field
from typing import Literal, get_args

from gpuplan.errors import InputError
from gpuplan.specs.finetune import LoraConfig
from gpuplan.specs.memory_behaviour import (
    INFER,
    RESERVED_OVERHEAD,
    LossKind,
    MemoryBehaviour,
    SelectiveKind,
    behaviour_for,
    inferred_behaviour,
)
from gpuplan.specs.model import ModelSpec

Precision = Literal["fp32", "fp16-mixed", "bf16-mixed", "fp8-mixed", "bf16"]
"""bf16: pure bf16, the model's parameters themselves in bf16 and no fp32 master copy (a model
loaded in torch.bfloat16 and trained without autocast, e.g. the Hugging Face Trainer without
--bf16): gradients and the optimizer's states, which torch.optim allocates like the parameters,
in bf16 too (Zamirai et al. 2020, arXiv:2010.06192, §2 on bf16 without master weights)"""
Optimizer = Literal["adamw", "adam", "sgd", "adam8bit", "adafactor", "adamw-bf16-moments",
                    "adamw-bf16-states"]
"""adamw-bf16-moments: fp32 master weights, bf16 first and second moments (Megatron-Core
--use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16; DeepSeek-V3
report, arXiv:2412.19437 §3.3.2); adamw-bf16-states: the master copy and both moments in bf16
(apex DistributedFusedAdam(dtype=torch.bfloat16), NeMo's distributed_fused_adam `dtype: bf16`)"""
Recompute = Literal["none", "selective", "full"]
Fsdp = Literal["none", "full", "hybrid"]
Attention = Literal["flash", "naive"]
TargetChoice = Literal["auto", "cpu", "cuda"]
Fp8Recipe = Literal["tensorwise", "rowwise"]
"""How FP8 training scales its tensors. tensorwise: one scale per tensor (Transformer Engine's
delayed or current scaling, torchao's default), so a tensor's FP8 transpose reuses its scale;
rowwise: torchao's axis-wise recipe, one scale per row along the GEMM's reduction axis, so each
tensor is quantized once per GEMM orientation (torchao float8 config.py, ROWWISE)"""

GiB = 2**30
CUDA_CONTEXT_BYTES = int(0.5 * GiB)
"""CUDA context + cuBLAS/cuDNN workspaces of a PyTorch process (typically 0.3-0.8 GiB; an
assumption: `gpuplan bench` measures it)"""
FRAGMENTATION = RESERVED_OVERHEAD
"""share of dynamic memory (activations + buffers) the caching allocator reserves on top of
what is allocated in training (specs.memory_behaviour.RESERVED_OVERHEAD: named, calibrated)"""
INFER_FRAGMENTATION = 0.05
"""the same for inference, whose dynamic memory is mostly one preallocated KV pool"""

_CHOICES: dict[str, tuple[str, ...]] = {
    "precision": get_args(Precision), "optimizer": get_args(Optimizer),
    "recompute": get_args(Recompute), "fsdp": get_args(Fsdp), "attention": get_args(Attention),
    "target": get_args(TargetChoice), "grad_dtype": ("auto", "fp32", "compute"),
    "grad_reduce_dtype": ("auto", "grad", "fp32"), "loss": ("auto", *get_args(LossKind)),
    "fp8_recipe": get_args(Fp8Recipe), "selective": ("auto", *get_args(SelectiveKind)),
}


@dataclass(frozen=True)
class TrainConfig:
    """One training job (the per-GPU view comes from the parallel degrees)."""

    micro_batch: int = 1
    seq_len: int = 4096
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    zero: int = 0
    """ZeRO stage 0-3 over the data-parallel group (FSDP full shard = 3)"""
    fsdp: Fsdp = "none"
    shard_size: int | None = None
    """hybrid shard: GPUs per sharding group (default: GPUs per node, 8)"""
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    etp: int | None = None
    """expert tensor parallel: the routed experts' matrices split etp ways (Megatron-Core
    --expert-tensor-parallel-size; None = tp, its default). MoE parallel folding (Liu et al.
    2025, arXiv:2504.14960 §3): the expert layers take their own layout, etp x ep x edp over
    the same tp x dp x cp GPUs, so ep x etp must divide tp x dp x cp; with etp < tp each rank
    routes its own sequence-parallel token shard"""
    sp: bool = False
    virtual_stages: int = 1
    recompute: Recompute = "none"
    attention: Attention = "flash"
    grad_dtype: Literal["auto", "fp32", "compute"] = "auto"
    """auto: as the training stack keeps them (the compute dtype, 16-bit for mixed precision,
    unless its profile keeps fp32); fp32: accumulated in fp32 (Megatron-LM main_grad);
    compute: in the compute dtype even where the stack's default is fp32 (Megatron-LM
    --grad-reduce-in-bf16, NeMo distributed_fused_adam grad_sync_dtype: bf16)"""
    grad_reduce_dtype: Literal["auto", "grad", "fp32"] = "auto"
    """dtype the data-parallel gradient reduction moves: grad = the gradients' own dtype;
    fp32 = upcast and reduced in fp32 (PyTorch FSDP MixedPrecision(reduce_dtype=float32), as
    Composer's FSDP 'DEFAULT' mixed precision sets it); auto = as the training stack does
    (specs.framework), else the gradients' dtype. Communication only: no memory effect"""
    offload_optimizer: bool = False
    global_batch: int | None = None
    dropout: bool = True
    """apply the model config's dropout rates (0 for most LLM configs)"""
    cuda_context_bytes: int = CUDA_CONTEXT_BYTES
    fragmentation: float = FRAGMENTATION
    fused: bool | None = None
    """fused norm/activation kernels (Megatron, torch.compile); False = eager PyTorch / HF,
    also where the stack's profile fuses (a Megatron-style code base run without its fused
    kernels); None = as the stack does (Framework.fused; eager when no stack is applied)"""
    target: TargetChoice = "auto"
    """whose kernels to model (dropout masks, attention path): auto = the device's kind"""
    training_kv_cache: bool = True
    """Hugging Face models build a KV cache in training too (use_cache=True); False for
    frameworks without it (Megatron, nanoGPT, torchtitan)"""
    lora: LoraConfig = dc_field(default_factory=LoraConfig)
    """full fine-tuning (default) or LoRA/QLoRA adapters (specs/finetune.py, estimate/lora.py)"""
    memory_behaviour: MemoryBehaviour | None = None
    """the training stack's loss, FSDP and pipeline memory habits (None: 'default')"""
    document_len: int | None = None
    """tokens per document when each sequence packs several documents and attention stays
    within each (FlashAttention varlen with cu_seqlens, a document mask): the attention core
    then attends over the documents, not the whole sequence; None = one document per sequence"""
    fp8_recipe: Fp8Recipe = "tensorwise"
    """FP8 scaling recipe when precision is fp8-mixed (Fp8Recipe); ignored otherwise"""
    loss: str = "auto"
    """how the cross-entropy loss is computed, overriding the stack's (MemoryBehaviour.loss):
    fp32 (logits upcast, PyTorch cross_entropy on .float()), fused (one kernel keeps 16-bit
    logits and gradient: flash-attn/Liger cross-entropy, a torch.compile'd loss), fused-inplace,
    vocab-parallel (Megatron), chunked; auto = as the stack does"""
    selective: str = "auto"
    """what --recompute selective reruns, overriding the stack's (MemoryBehaviour.selective):
    attention (Megatron-Core: the attention core, Korthikanti et al. 2022 §5), per-op
    (torchtitan's op-level checkpointing, estimate.sac: every second matmul and every
    element-wise op) or matmuls (every matmul output kept, the element-wise ops rerun);
    auto = as the stack does"""

    @property
    def behaviour(self) -> MemoryBehaviour:
        """The stack's memory behaviour; INFER (no framework named) resolved by the layout."""
        b = self.memory_behaviour or behaviour_for(None)
        b = inferred_behaviour(self.tp, self.cp, self.ep) if b is INFER else b
        b = b if self.loss == "auto" else replace(b, loss=self.loss)  # type: ignore[arg-type]
        return b if self.selective == "auto" else replace(
            b, selective=self.selective)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        for f in ("micro_batch", "seq_len", "dp", "tp", "pp", "cp", "ep", "virtual_stages"):
            check_positive(f, getattr(self, f))
        for f, valid in _CHOICES.items():
            if getattr(self, f) not in valid:
                raise InputError(f, getattr(self, f), f"one of {', '.join(valid)}")
        if self.zero not in (0, 1, 2, 3):
            raise InputError("zero", self.zero, "0, 1, 2 or 3")
        if self.global_batch is not None and self.global_batch % (self.micro_batch * self.dp):
            raise InputError("global_batch", self.global_batch,
                             f"a multiple of micro_batch x dp = {self.micro_batch * self.dp}")
        if not 0 <= self.fragmentation < 1:
            raise InputError("fragmentation", self.fragmentation, "a fraction in [0, 1)")
        if self.cuda_context_bytes < 0:
            raise InputError("cuda_context_bytes", self.cuda_context_bytes, "bytes >= 0")
        if self.shard_size is not None:
            check_positive("shard_size", self.shard_size)
        if self.fp8_recipe != "tensorwise" and self.precision != "fp8-mixed":
            raise InputError("fp8_recipe", self.fp8_recipe,
                             "tensorwise (the default) unless precision is fp8-mixed")
        if self.document_len is not None:
            check_positive("document_len", self.document_len)
            if self.document_len > self.seq_len:
                raise InputError("document_len", self.document_len,
                                 f"at most seq_len = {self.seq_len} tokens")

    @property
    def grad_accum(self) -> int:
        if self.global_batch is None:
            return 1
        return max(1, self.global_batch // (self.micro_batch * self.dp))

    @property
    def compute_dtype(self) -> str:
        """Activation and matmul input dtype (fp8-mixed: bf16 activations, fp8 matmuls)."""
        return {"fp32": "fp32", "fp16-mixed": "fp16", "bf16-mixed": "bf16",
                "fp8-mixed": "bf16", "bf16": "bf16"}[self.precision]

    @property
    def shard_group(self) -> int:
        """GPUs that shard model states: dp x cp for ZeRO/FSDP full, the shard group for
        hybrid (context-parallel ranks hold the same parameters and join the reduction)."""
        group = self.dp * self.cp
        if self.fsdp == "hybrid":
            return min(group, self.shard_size or 8)
        return group

    @property
    def expert_tp(self) -> int:
        """the routed experts' tensor-parallel degree (etp; tp when unset)"""
        return self.tp if self.etp is None else self.etp

    @property
    def expert_shard_group(self) -> int:
        """GPUs that shard the routed experts' states: the expert data-parallel group,
        tp x dp x cp / (ep x etp) of the shard group's tp x dp x cp (Megatron-Core's
        expert_data_parallel_size; experts are replicated only over it)"""
        return max(1, self.shard_group * self.tp // (self.ep * self.expert_tp))

    @property
    def zero_stage(self) -> int:
        return 3 if self.fsdp in ("full", "hybrid") else self.zero

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp * self.cp


@dataclass(frozen=True)
class InferConfig:
    """One inference (serving) job's memory-relevant part."""

    batch: int = 1
    context: int = 4096
    """tokens per sequence held in the KV cache (prompt + generated)"""
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    prefill_chunk: int | None = None
    """tokens processed in one prefill step (default: min(batch x context, 8192))"""
    block_size: int | None = None
    """paged KV cache block size in tokens (vLLM default 16); None = exact"""
    margin: float = 0.10
    """safety margin kept free when computing max_batch / max_context"""
    cuda_context_bytes: int = CUDA_CONTEXT_BYTES
    fragmentation: float = INFER_FRAGMENTATION


TRAIN_ONLY = ("global_batch", "precision", "optimizer", "zero", "fsdp", "dp", "pp", "cp", "ep",
              "sp", "virtual_stages", "recompute", "attention", "grad_dtype",
              "grad_reduce_dtype", "offload_optimizer", "dropout", "fused", "target", "loss",
              "document_len", "fp8_recipe", "selective")
"""TrainConfig fields that an inference job has no use for"""

_OPTION = {"sp": "--sequence-parallel", "grad_dtype": "--grad-fp32", "dropout": "--no-dropout"}


def refuse_train_only(given: dict[str, object]) -> None:
    """Inference refuses training-only options: `given` maps TrainConfig field names to what
    the user set; any that differs from the training default is an error."""
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    for name in TRAIN_ONLY:
        if name in given and given[name] != defaults[name]:
            option = "--grad-compute-dtype" if given[name] == "compute" else \
                _OPTION.get(name, "--" + name.replace("_", "-"))
            raise InputError(option, given[name], "nothing with --mode infer (a training-only "
                             "option)")


def check_positive(field: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InputError(field, value, "a whole number >= 1")


def check_split(m: ModelSpec, tp: int, cp: int, ep: int, seq_len: int) -> None:
    """Tensor, context and expert parallel degrees that the model's shapes allow."""
    for field, value in (("tp", tp), ("cp", cp), ("ep", ep)):
        check_positive(field, value)
    if m.num_heads % tp:
        raise InputError("tp", tp, f"a divisor of the model's {m.num_heads} attention heads")
    if m.kv_heads % tp and tp % m.kv_heads:
        raise InputError("tp", tp, f"a divisor or a multiple of the model's {m.kv_heads} K/V heads")
    if m.is_moe and m.num_experts % ep:
        raise InputError("ep", ep, f"a divisor of the model's {m.num_experts} experts")
    if not m.is_moe and ep != 1:
        raise InputError("ep", ep, "1 for a dense model (expert parallelism needs experts)")
    if seq_len % cp:
        raise InputError("cp", cp, f"a divisor of the sequence length ({seq_len})")


def check_layout(cfg: TrainConfig, gpus: int, m: ModelSpec) -> None:
    """The parallel degrees against the GPU count and the model's layers and experts."""
    used = cfg.gpus
    if used != gpus:
        raise InputError("gpus", gpus, f"dp x tp x pp x cp = {cfg.dp}x{cfg.tp}x{cfg.pp}x{cfg.cp}"
                         f" = {used} (set --dp/--tp/--pp/--cp to multiply to --gpus)")
    if cfg.etp is None and cfg.ep > 1 and (cfg.dp * cfg.cp) % cfg.ep:
        raise InputError("ep", cfg.ep, f"a divisor of dp x cp = {cfg.dp * cfg.cp} (or set etp"
                         " below tp: ep x etp must divide tp x dp x cp)")
    if cfg.etp is not None:
        check_positive("etp", cfg.etp)
        if not m.is_moe and cfg.etp != 1:
            raise InputError("etp", cfg.etp, "1 or unset for a dense model (it has no experts)")
        group = cfg.tp * cfg.dp * cfg.cp
        if group % (cfg.ep * cfg.etp):
            raise InputError("etp", cfg.etp, f"a value with ep x etp = {cfg.ep} x etp dividing"
                             f" tp x dp x cp = {group}")
    if cfg.pp > m.num_layers:
        raise InputError("pp", cfg.pp, f"at most the number of layers ({m.num_layers})")
    check_split(m, cfg.tp, cfg.cp, cfg.ep, cfg.seq_len)
