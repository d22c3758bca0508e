"""How a model is run (kernels, precision, target) and how it is split over GPUs: the
per-GPU sizes under tensor, sequence, context and expert parallelism."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuplan.errors import InputError
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import TrainConfig, check_positive, check_split
from gpuplan.units import DTYPE_BYTES

__all__ = ["Impl", "Local", "check_positive", "local_sizes", "train_impl"]

AttentionImpl = Literal["flash", "naive"]
Target = Literal["cuda", "cpu"]


@dataclass(frozen=True)
class Impl:
    """How the model is run: kernels, precision, target device class."""

    attention: AttentionImpl = "flash"
    """flash: fused attention, O(s) extra memory; naive: scores and softmax in memory, O(s²)"""
    target: Target = "cuda"
    """cuda: 1-byte dropout masks, flash kernels; cpu: masks in the activation dtype and the
    math attention path whenever attention dropout is on (as PyTorch does on the CPU)"""
    fused: bool = False
    """norms/activations/RoPE fused into single kernels"""
    dtype: str = "bf16"
    """activation and matmul dtype"""
    matmul_dtype: str | None = None
    """matmul compute dtype if different (fp8 for fp8-mixed training or W8A8 inference)"""
    weight_dtype: str | None = None
    """stored weight dtype for inference (int4/int8/fp8 weight-only quantization)"""
    kv_dtype: str | None = None
    """KV-cache dtype (default: dtype)"""
    grad_dtype: str | None = None
    """weight-gradient dtype (default: dtype)"""
    dropout: bool = True
    """apply the spec's dropout rates when training"""
    weight_group_size: int = 128
    """quantization group size: one fp16 scale per group of int4/int8 weights"""
    tp: int = 1
    """tensor parallel degree: heads, MLP and vocabulary split over tp GPUs (Shoeybi et al. 2019)"""
    sp: bool = False
    """sequence parallelism with TP: norms, dropout and residuals split over tp too (Korthikanti
    et al. 2022 §4.2.2)"""
    cp: int = 1
    """context parallel degree: each GPU holds seq_len/cp tokens, attends to all (ring attention)"""
    ep: int = 1
    """expert parallel degree: each GPU holds num_experts/ep experts"""
    etp: int | None = None
    """expert tensor parallel degree: each routed expert's matrices split etp ways (None = tp;
    TrainConfig.etp)"""
    recompute: Literal["none", "selective", "full"] = "none"
    """activation recomputation: selective = attention core (Korthikanti et al. 2022 §5);
    full = every layer keeps only its input and reruns its forward in backward"""
    training_kv_cache: bool = True
    """Hugging Face models build a KV cache even in training (use_cache=True) and attend to its
    copies of K and V; with a fused QKV projection (GPT-2, Phi-3) that keeps both the fused
    output and the copies alive. False for frameworks without it (Megatron, nanoGPT, torchtitan)"""

    fp8_quantized_inputs: bool = False
    """FP8 training keeps FP8 copies of the layers' linear inputs (Transformer Engine), not the
    16-bit inputs (torchao's Float8Linear saves the high-precision input)"""
    fp8_weights_cached: bool = False
    """FP8 training makes each linear's FP8 weight (and its transpose) once per optimizer step
    and reuses it in every micro-batch, so no per-micro-batch weight cast (Megatron-Core passes
    is_first_microbatch to Transformer Engine's linears, which then cache the FP8 weight; with
    FP8 primary weights, --fp8-param-gather, the parameter is FP8 already). False: the weight
    is cast in every forward (torchao Float8Linear; TE called without is_first_microbatch)"""
    document_len: int | None = None
    """packed documents with attention inside each (TrainConfig.document_len): a query attends
    over its document's earlier tokens, not the whole sequence's"""
    fp8_blocks_only: bool = False
    """FP8 training runs only the transformer layers' linears in FP8; the LM head stays in the
    16-bit dtype (Megatron-Core's output_layer is not a Transformer Engine module;
    MemoryBehaviour.fp8_blocks_only)"""
    recompute_early_stop: bool = False
    """full recomputation through PyTorch's non-reentrant checkpoint, which stops recomputing
    once every tensor saved for backward is back: the layer's last linear and what follows are
    not rerun (torch.utils.checkpoint early stop; Op.recompute_tail). False: the whole layer
    forward is rerun (Megatron's CheckpointFunction, reentrant checkpoints)"""
    fp8_norm_casts: bool = False
    """FP8 training quantizes the pre-norm QKV and first MLP linear inputs inside the norm kernel
    (Transformer Engine LayerNormLinear / Megatron-Core TELayerNormColumnParallelLinear: the norm
    takes the linear's input quantizer), so those linears have no separate input cast"""

    fp8_rowwise: bool = False
    """FP8 training with torchao's row-wise recipe (TrainConfig.fp8_recipe): each linear's
    input, weight and output gradient quantized once per GEMM orientation, and the backward
    GEMMs' outputs rescaled after them (blocks.fp8_rowwise_extra)"""

    def __post_init__(self) -> None:
        for name in ("dtype", "matmul_dtype", "weight_dtype", "kv_dtype", "grad_dtype"):
            value = getattr(self, name)
            if value is not None and value not in DTYPE_BYTES:
                raise InputError(name, value, f"one of {', '.join(DTYPE_BYTES)}")

    def weight_bytes(self) -> float:
        w = self.weight_dtype or self.dtype
        b = DTYPE_BYTES[w]
        if w in ("int4", "int8", "fp4"):
            b += 2 / self.weight_group_size  # fp16 scale per group (GPTQ/AWQ style)
        return b


@dataclass(frozen=True)
class Local:
    """Per-GPU sizes of one layer under tensor, sequence, context and expert parallelism."""

    heads: int
    kv_heads: int
    ff: int
    expert_ff: int
    """routed expert width on this GPU (expert_size / etp)"""
    shared_expert_ff: int
    """shared experts' width on this GPU (split tp ways like a dense MLP)"""
    experts: int
    vocab: int
    seq: int
    """tokens per sequence on this GPU (seq_len / cp)"""
    rep: float
    """fraction of the tokens whose replicated work (norms, dropout, residual) this GPU does"""
    expert_rep: float = 1.0
    """fraction of the tokens the routed experts of this GPU's expert-tensor group see: all of
    them when etp = tp (gathered across TP), etp / tp of them when etp < tp, with or without
    sequence parallelism: no stack runs each TP rank's experts on all tokens. Megatron-Core
    requires sequence parallelism for MoE with TP (transformer_config.py, "When using expert
    parallelism and tensor parallelism, sequence parallelism must be used"); DeepSpeed-MoE
    drops the TP-duplicated tokens before dispatch and gathers them after (deepspeed/moe/
    mappings.py, drop_tokens / gather_tokens)"""


def local_sizes(m: ModelSpec, impl: Impl, seq_len: int) -> Local:
    check_split(m, impl.tp, impl.cp, impl.ep, seq_len)
    tp, cp, ep = impl.tp, impl.cp, impl.ep
    etp = tp if impl.etp is None else impl.etp
    rep = 1.0 / tp if impl.sp else 1.0
    return Local(
        heads=m.num_heads // tp, kv_heads=max(1, m.kv_heads // tp),
        ff=-(-m.intermediate_size // tp), expert_ff=-(-m.expert_size // etp),
        shared_expert_ff=-(-m.expert_size // tp),
        experts=max(1, m.num_experts // ep), vocab=-(-m.vocab_size // tp),
        seq=seq_len // cp, rep=rep, expert_rep=min(1.0, etp / tp))


def train_impl(cfg: TrainConfig, device_kind: str) -> Impl:
    """The one conversion from a training job to kernel settings (memory, step time and the
    layout search all call it). target "auto" takes the device's kind: a CPU runs PyTorch's
    CPU kernels, everything else CUDA-style ones."""
    target: Target = ("cpu" if device_kind == "cpu" else "cuda") if cfg.target == "auto" \
        else cfg.target
    return Impl(attention=cfg.attention, target=target, fused=bool(cfg.fused),
                dtype=cfg.compute_dtype,
                matmul_dtype="fp8" if cfg.precision == "fp8-mixed" else None, tp=cfg.tp,
                sp=cfg.sp, cp=cfg.cp, ep=cfg.ep, etp=cfg.etp, recompute=cfg.recompute, dropout=cfg.dropout,
                training_kv_cache=cfg.training_kv_cache
                if cfg.behaviour.training_kv_cache is None
                else cfg.behaviour.training_kv_cache,
                fp8_quantized_inputs=cfg.precision == "fp8-mixed"
                and cfg.behaviour.fp8_saves_quantized_inputs,
                fp8_weights_cached=cfg.precision == "fp8-mixed"
                and cfg.behaviour.fp8_weights_cached,
                fp8_norm_casts=cfg.precision == "fp8-mixed" and cfg.behaviour.fp8_norm_casts,
                recompute_early_stop=cfg.behaviour.recompute_early_stop,
                document_len=cfg.document_len,
                fp8_blocks_only=cfg.precision == "fp8-mixed" and cfg.behaviour.fp8_blocks_only,
                fp8_rowwise=cfg.precision == "fp8-mixed" and cfg.fp8_recipe == "rowwise")
