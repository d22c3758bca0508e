"""Memory per GPU for training and inference, as a breakdown that sums exactly to the total.

Training: weights, gradients and optimizer states (bytes per parameter by precision and
optimizer, ZeRO/FSDP sharding over the data-parallel group; Rajbhandari et al. 2020 §5),
activations = the bytes autograd keeps for backward, from the op model (all layers of the
fullest pipeline stage x micro-batches in flight; Narayanan et al. 2021, Korthikanti et al.
2022 §4.2.3), and "other" item by item: backward working set, logits and loss buffers,
communication buffers, CUDA context and allocator fragmentation.

Inference memory is in `estimate.inference` (same MemoryResult).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from gpuplan.errors import InputError
from gpuplan.estimate import lora
from gpuplan.estimate.partition import Stage, stages
from gpuplan.ops.blocks import DTYPE_BYTES, FP32
from gpuplan.ops.op import OpList
from gpuplan.ops.transformer import (
    BLOCK_ATTN,
    BLOCK_ATTN_WINDOW,
    BLOCK_MLP,
    BLOCK_MOE,
    Impl,
    build_training,
    local_sizes,
)
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec


class TracedModel(Protocol):
    """What the memory planner needs from gpuplan.trace (the torch-side Trace object)."""

    param_count: int
    param_tensors: int
    saved_activation_bytes: int
    ops: OpList


Precision = Literal["fp32", "fp16-mixed", "bf16-mixed", "fp8-mixed"]
Optimizer = Literal["adamw", "adam", "sgd", "adam8bit", "adafactor"]
Recompute = Literal["none", "selective", "full"]

GiB = 2**30
CUDA_CONTEXT_BYTES = int(0.5 * GiB)
"""CUDA context + cuBLAS/cuDNN workspaces of a PyTorch process (typically 0.3-0.8 GiB; an
assumption: `gpuplan bench` measures it)"""
NCCL_BYTES = int(0.25 * GiB)
"""NCCL communicator buffers per process when any parallelism > 1 (assumption)"""
DDP_BUCKET_BYTES = 25 * 2**20
"""torch DistributedDataParallel bucket_cap_mb default (25 MiB); two in flight"""
OFFLOAD_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO reduce_bucket_size default (5e8 elements): with ZeRO-Offload the gradients
pass through this GPU bucket on their way to the CPU"""
FRAGMENTATION = 0.10
"""share of dynamic memory (activations + buffers) lost to allocator fragmentation
(assumption; the ZeRO paper §3.2 reports > 30% in extreme cases)"""


@dataclass(frozen=True)
class TrainConfig:
    """One training configuration (per-GPU view comes from the parallel degrees)."""

    micro_batch: int
    seq_len: int
    precision: Precision = "bf16-mixed"
    optimizer: Optimizer = "adamw"
    zero: int = 0
    """ZeRO stage 0-3 over the data-parallel group (FSDP full shard = 3)"""
    fsdp: Literal["none", "full", "hybrid"] = "none"
    shard_size: int | None = None
    """hybrid shard: GPUs per sharding group (default: GPUs per node, 8)"""
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    sp: bool = False
    virtual_stages: int = 1
    recompute: Recompute = "none"
    attention: Literal["flash", "naive"] = "flash"
    grad_dtype: Literal["auto", "fp32"] = "auto"
    """auto: gradients in the compute dtype (16-bit for mixed precision); fp32: accumulated in
    fp32 (Megatron-LM main_grad)"""
    offload_optimizer: bool = False
    global_batch: int | None = None
    dropout: bool = True
    cuda_context_bytes: int = CUDA_CONTEXT_BYTES
    fragmentation: float = FRAGMENTATION
    fused: bool = False
    """fused norm/activation kernels (Megatron, torch.compile); False = eager PyTorch / HF"""
    target: Literal["auto", "cpu", "cuda"] = "auto"
    """whose kernels to model (dropout masks, attention path): auto = the device's kind"""
    lora: lora.LoraConfig = field(default_factory=lora.LoraConfig)
    """full fine-tuning (default) or LoRA/QLoRA adapters (estimate/lora.py)"""

    @property
    def grad_accum(self) -> int:
        if self.global_batch is None:
            return 1
        return max(1, self.global_batch // (self.micro_batch * self.dp))

    @property
    def compute_dtype(self) -> str:
        return {"fp32": "fp32", "fp16-mixed": "fp16", "bf16-mixed": "bf16",
                "fp8-mixed": "bf16"}[self.precision]

    @property
    def shard_group(self) -> int:
        """GPUs that shard model states: dp x cp for ZeRO/FSDP full, the shard group for
        hybrid."""
        # context-parallel ranks hold the same parameters and join the gradient reduction
        group = self.dp * self.cp
        if self.fsdp == "hybrid":
            return min(group, self.shard_size or 8)
        return group

    @property
    def zero_stage(self) -> int:
        return 3 if self.fsdp in ("full", "hybrid") else self.zero


def validate(cfg: TrainConfig) -> None:
    for f in ("micro_batch", "seq_len", "dp", "tp", "pp", "cp", "ep", "virtual_stages"):
        v = getattr(cfg, f)
        if not isinstance(v, int) or v < 1:
            raise InputError(f, v, "a whole number >= 1")
    if cfg.zero not in (0, 1, 2, 3):
        raise InputError("zero", cfg.zero, "0, 1, 2 or 3")
    if cfg.global_batch is not None and cfg.global_batch % (cfg.micro_batch * cfg.dp):
        raise InputError("global_batch", cfg.global_batch,
                         f"a multiple of micro_batch x dp = {cfg.micro_batch * cfg.dp}")
    if not 0 <= cfg.fragmentation < 1:
        raise InputError("fragmentation", cfg.fragmentation, "a fraction in [0, 1)")
    lora.validate(cfg.lora)


# ---- bytes per parameter -------------------------------------------------------------------

def state_bytes_per_param(cfg: TrainConfig) -> dict[str, float]:
    """Unsharded bytes per parameter of weights, gradients and optimizer states.

    Mixed precision keeps 16-bit weights for compute and an fp32 master copy counted with the
    optimizer: AdamW = 2 + 2 + (4 master + 4 + 4 moments) = 16 bytes (ZeRO §3.1, K = 12).
    8-bit Adam keeps two 1-byte moments (+ an fp32 absmax per 2048-block; Dettmers et al.
    2022); SGD one fp32 momentum; Adafactor factored second moments (counted per matrix)."""
    mixed = cfg.precision != "fp32"
    w = 2.0 if mixed else 4.0
    g = 4.0 if (cfg.grad_dtype == "fp32" or not mixed) else 2.0
    master = 4.0 if mixed else 0.0
    moments = {"adamw": 8.0, "adam": 8.0, "sgd": 4.0, "adam8bit": 2.0 + 8.0 / 2048,
               "adafactor": 0.0}[cfg.optimizer]
    return {"weights": w, "gradients": g, "optimizer": master + moments}


def adafactor_factored_bytes(m: ModelSpec, params: float) -> float:
    """Adafactor's factored second moment: rows + columns fp32 values per matrix (Shazeer &
    Stern 2018 §3), taken for matrices of the model's typical shape d x intermediate_size."""
    d, side = m.hidden_size, m.intermediate_size
    return params * FP32 * (d + side) / (d * side)


STEP_COUNTER_BYTES = 4
"""torch.optim Adam/AdamW keep a 0-dim fp32 `step` tensor per parameter tensor"""


def model_state_bytes(m: ModelSpec | None, cfg: TrainConfig, params: float,
                      matrix_params: float, tensors: float) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes on one GPU holding `params` parameters.

    ZeRO (Rajbhandari et al. 2020 §5.1-5.3): stage 1 shards the optimizer states, stage 2
    also the gradients, stage 3 also the weights, over the shard group (the data-parallel
    GPUs; FSDP hybrid: the GPUs of one sharding group)."""
    bpp = state_bytes_per_param(cfg)
    shard, z = cfg.shard_group, cfg.zero_stage
    weights = params * bpp["weights"]
    if cfg.precision == "fp8-mixed":  # fp8 copies of the matmul weights (Transformer Engine)
        weights += matrix_params
    grads = params * bpp["gradients"]
    opt = params * bpp["optimizer"]
    if cfg.optimizer == "adafactor" and m is not None:
        opt += adafactor_factored_bytes(m, params)
    if cfg.optimizer in ("adam", "adamw"):
        opt += tensors * STEP_COUNTER_BYTES
    if cfg.offload_optimizer:  # ZeRO-Offload (Ren et al. 2021 §4.1): optimizer states and
        opt = 0.0  # step on the CPU; with ZeRO-2/3 the gradients follow them there, bucket by
        if cfg.zero_stage >= 2:  # bucket (counted in other: gradient_buckets)
            grads = 0.0
    return (weights / (shard if z >= 3 else 1), grads / (shard if z >= 2 else 1),
            opt / (shard if z >= 1 else 1))


# ---- results -------------------------------------------------------------------------------

@dataclass
class MemoryResult:
    """Per-GPU memory; `per_gpu` sums exactly to `total_bytes`."""

    mode: str
    per_gpu: dict[str, int]
    other_items: dict[str, int]
    capacity_bytes: int
    device: str
    assumptions: dict[str, object]
    details: dict[str, object] = field(default_factory=dict)
    max_batch: int | None = None
    max_context: int | None = None
    margin: float = 0.0
    """share of capacity to keep free for a comfortable fit (inference: serving engines
    reserve it; vLLM's gpu_memory_utilization defaults to 0.9)"""

    @property
    def total_bytes(self) -> int:
        return sum(self.per_gpu.values())

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    @property
    def fits_with_margin(self) -> bool:
        return self.total_bytes <= self.capacity_bytes * (1 - self.margin)

    @property
    def margin_bytes(self) -> int:
        return self.capacity_bytes - self.total_bytes

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "mode": self.mode, "device": self.device, "per_gpu": dict(self.per_gpu),
            "other_items": dict(self.other_items), "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes, "fits": self.fits,
            "fits_with_margin": self.fits_with_margin, "safety_margin": self.margin,
            "margin_bytes": self.margin_bytes,
            "utilization": self.total_bytes / self.capacity_bytes,
            "assumptions": self.assumptions, **self.details,
        }
        if self.mode == "infer":
            out["max_batch"] = self.max_batch
            out["max_context"] = self.max_context
        return out


# ---- training -----------------------------------------------------------------------------

def _impl(cfg: TrainConfig, device: Device) -> Impl:
    target = cfg.target if cfg.target != "auto" else ("cpu" if device.kind == "cpu" else "cuda")
    return Impl(attention=cfg.attention, target=target,
                dtype=cfg.compute_dtype, matmul_dtype="fp8" if cfg.precision == "fp8-mixed"
                else None, tp=cfg.tp, sp=cfg.sp, cp=cfg.cp, ep=cfg.ep, recompute=cfg.recompute,
                dropout=cfg.dropout, fused=cfg.fused)


def _saved_per_block(ops: OpList) -> dict[str, float]:
    """Saved bytes of one layer of each block kind, and of the once-only parts."""
    out: dict[str, float] = {}
    for o in ops.phase("forward"):
        key = o.layer if o.per_layer else ("embedding" if o.component == "embedding"
                                           else "head")
        per = o.saved_bytes if o.per_layer else o.total_saved_bytes
        out[str(key)] = out.get(str(key), 0.0) + per
    return out


def stage_activation_bytes(m: ModelSpec, st: Stage, per_block: dict[str, float]) -> float:
    """Saved bytes of one micro-batch on a stage: its layers' blocks plus embedding/head."""
    n_window = st.sliding_layers
    total = (n_window * per_block.get(BLOCK_ATTN_WINDOW, 0.0)
             + (st.layers - n_window) * per_block.get(BLOCK_ATTN, 0.0)
             + st.dense_layers * per_block.get(BLOCK_MLP, 0.0)
             + st.moe_layers * per_block.get(BLOCK_MOE, 0.0))
    if st.has_embedding:
        total += per_block.get("embedding", 0.0)
    if st.has_head:
        total += per_block.get("head", 0.0)
    return total


def in_flight(cfg: TrainConfig, stage: int) -> float:
    """Micro-batches whose activations a stage holds at its peak. 1F1B: stage i holds
    min(pp - i, m); the interleaved schedule multiplies by 1 + (p - 1)/(p·v) (Korthikanti
    et al. 2022 §4.2.3). Gradient accumulation without a pipeline: one at a time."""
    if cfg.pp == 1:
        return 1.0
    micro = cfg.global_batch // (cfg.micro_batch * cfg.dp) if cfg.global_batch else cfg.pp
    held = float(min(cfg.pp - stage, max(micro, 1)))
    if cfg.virtual_stages > 1:
        held *= 1 + (cfg.pp - 1) / (cfg.pp * cfg.virtual_stages)
    return held


def train_memory(m: ModelSpec, device: Device, cfg: TrainConfig) -> MemoryResult:
    """Peak memory per GPU of the fullest pipeline stage."""
    validate(cfg)
    impl = _impl(cfg, device)
    ops = lora_ops(build_training(m, cfg.micro_batch, cfg.seq_len, impl), m, cfg)
    per_block = _saved_per_block(ops)
    full = (lora_ops(build_training(m, cfg.micro_batch, cfg.seq_len,
                                    replace(impl, recompute="none")), m, cfg)
            if cfg.recompute == "full" else ops)
    full_block = _saved_per_block(full)
    per_param = state_bytes_per_param(cfg)
    z = cfg.zero_stage
    loc = local_sizes(m, impl, cfg.seq_len)
    e = DTYPE_BYTES[cfg.compute_dtype]
    rows = []
    for st in stages(m, cfg.tp, cfg.pp, cfg.ep):
        tensors = m.param_tensors() * st.params / m.params()
        weights, grads, opt = (lora_states(m, cfg, st)[:3] if cfg.lora.active else
                               model_state_bytes(m, cfg, st.params, st.matrix_params, tensors))
        acts = stage_activation_bytes(m, st, per_block) * in_flight(cfg, st.index)
        other = _train_other(m, cfg, st, full_block, loc.seq, loc.vocab, e, acts, z)
        rows.append((st, weights, grads, opt, acts, other))
    # the fullest stage sets the per-GPU requirement
    st, weights, grads, opt, acts, other = max(
        rows, key=lambda r: r[1] + r[2] + r[3] + r[4] + sum(r[5].values()))
    other_items = {k: int(v) for k, v in other.items()}  # rounded once, item by item, so
    per_gpu = {"weights": int(weights), "gradients": int(grads), "optimizer": int(opt),
               "activations": int(acts), "other": sum(other_items.values())}  # sums exactly
    details: dict[str, object] = {
        "stage": st.index, "stage_layers": st.layers, "params_per_gpu": int(st.params),
        "bytes_per_param": per_param, "activation_micro_batches": in_flight(cfg, st.index),
        "saved_activation_bytes_per_micro_batch": int(stage_activation_bytes(m, st, per_block)),
        "stages": [{"stage": r[0].index, "layers": r[0].layers,
                    "total_bytes": sum(int(x) for x in (*r[1:5], *r[5].values()))}
                   for r in rows],
        "grad_accum": cfg.grad_accum,
        "note": "gradient accumulation does not change per-step memory: micro-batches run one "
                "after another and gradients accumulate in place",
    }
    if cfg.lora.active:
        details["finetune"] = {k: int(v) if k != "quantized_params" else v
                               for k, v in lora_states(m, cfg, st)[3].items()}
    assumptions = _train_assumptions(cfg, device)
    return MemoryResult("train", per_gpu, other_items,
                        device.capacity_bytes, device.name, assumptions, details)


# ---- LoRA / QLoRA (estimate/lora.py) ------------------------------------------------------

def lora_ops(ops: OpList, m: ModelSpec, cfg: TrainConfig) -> OpList:
    """The op list with frozen base weights and adapters when fine-tuning with LoRA/QLoRA."""
    return lora.apply(ops, m, cfg.lora, DTYPE_BYTES[cfg.compute_dtype]) if cfg.lora.active \
        else ops


def lora_states(m: ModelSpec, cfg: TrainConfig,
                st: Stage) -> tuple[float, float, float, dict[str, float]]:
    """Frozen weights, adapters, their gradients and optimizer states on one GPU of `st`:
    optimizer moments as in full training without a master copy (adapters are trained in
    their own dtype)."""
    moments = state_bytes_per_param(replace(cfg, precision="fp32"))["optimizer"]
    step = STEP_COUNTER_BYTES if cfg.optimizer in ("adam", "adamw") else 0.0
    return lora.state_bytes(m, cfg.lora, st, cfg.tp, DTYPE_BYTES[cfg.compute_dtype], moments,
                            step, cfg.zero_stage, cfg.shard_group)


def _train_other(m: ModelSpec, cfg: TrainConfig, st: Stage, full_block: dict[str, float],
                 seq_local: int, vocab_local: int, e: float, acts: float,
                 z: int) -> dict[str, float]:
    t = cfg.micro_batch * seq_local
    items: dict[str, float] = {}
    # Transient peak on top of the saved activations: the loss backward holds fp32 logits and
    # their gradient (last stage); later, one layer's backward holds its recomputed
    # activations (full recompute) and the gradients flowing through it (about two of its
    # widest tensors). They are never live together: the larger one counts.
    layer_full = max((v for k, v in full_block.items() if k.startswith("layer")), default=0.0)
    widest = max(m.intermediate_size * (2 if m.mlp == "gated" else 1) // cfg.tp,
                 m.hidden_size)
    layer_backward = 2 * t * widest * e + (layer_full if cfg.recompute == "full" else 0.0)
    loss = t * vocab_local * (FP32 + e) if st.has_head else 0.0
    items["transient_peak"] = max(layer_backward, loss)
    if z >= 3:  # FSDP/ZeRO-3: the layer in use and the next one prefetched, gathered in
        # the compute dtype, plus one layer's unsharded gradients before reduce-scatter
        layer_params = (m.attention_params() + max(m.mlp_params(), m.moe_params() if m.is_moe
                                                   else 0)) / cfg.tp
        bpp = state_bytes_per_param(cfg)
        items["gathered_parameters"] = layer_params * (2 * bpp["weights"] + bpp["gradients"])
    elif cfg.offload_optimizer and z == 2:
        items["gradient_buckets"] = min(OFFLOAD_BUCKET_ELEMENTS, st.params) * \
            state_bytes_per_param(cfg)["gradients"]
    elif cfg.dp > 1:
        items["gradient_buckets"] = 2 * DDP_BUCKET_BYTES
    if max(cfg.dp, cfg.tp, cfg.pp, cfg.cp, cfg.ep) > 1:
        items["nccl_buffers"] = NCCL_BYTES
    items["cuda_context"] = float(cfg.cuda_context_bytes)
    items["fragmentation"] = cfg.fragmentation * (acts + items["transient_peak"])
    return items


def capacity_note(device: Device) -> str:
    if device.usable_memory_bytes is not None:
        return ("usable memory as software sees it (PyTorch total_memory or nvidia-smi total), "
                "not the vendor's GB figure")
    return "the vendor's memory figure (GB = 1e9 bytes); no usable figure in the catalog"


def _train_assumptions(cfg: TrainConfig, device: Device) -> dict[str, object]:
    bpp = state_bytes_per_param(cfg)
    return {
        "precision": cfg.precision, "optimizer": cfg.optimizer,
        "bytes_per_param": bpp, "bytes_per_param_total": sum(bpp.values()),
        "gradients_dtype": "fp32" if bpp["gradients"] == 4 else "16-bit",
        "zero_stage": cfg.zero_stage, "shard_group": cfg.shard_group,
        "parallel": {"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp, "ep": cfg.ep,
                     "sp": cfg.sp, "virtual_stages": cfg.virtual_stages},
        "recompute": cfg.recompute, "attention": cfg.attention, "fused_kernels": cfg.fused,
        "kernels": _impl(cfg, device).target,
        "dropout_mask_bytes": 1 if _impl(cfg, device).target == "cuda" else "activation dtype",
        "cuda_context_bytes": cfg.cuda_context_bytes, "fragmentation": cfg.fragmentation,
        "optimizer_offloaded_to_cpu": cfg.offload_optimizer,
        "capacity": capacity_note(device),
        **(_lora_assumptions(cfg.lora) if cfg.lora.active else {"finetune": "full"}),
    }


def _lora_assumptions(lc: lora.LoraConfig) -> dict[str, object]:
    out: dict[str, object] = {
        "finetune": lc.finetune, "lora_rank": lc.rank, "lora_targets": list(lc.projections()),
        "adapter_bytes_per_param": lc.adapter_bytes, "lora_dropout": lc.dropout,
        "paged_optimizer": lc.paged,
        "frozen_weights": "16-bit" if lc.finetune == "lora" else
        f"NF4 {lc.quant_bits:g} bits/param (QLoRA §2, blocksize 64"
        f"{', double quantization' if lc.double_quant else ''}); embeddings, head, norms 16-bit",
    }
    if lc.paged:
        out["paged_optimizer_note"] = ("optimizer states in unified memory, evicted to the CPU "
                                       "under pressure: not counted in the GPU peak")
    return out


def train_memory_from_trace(trace: TracedModel, device: Device, cfg: TrainConfig) -> MemoryResult:
    """Memory of a traced torch module (gpuplan.trace with train=True) trained with `cfg`.

    Model states follow the same bytes-per-parameter table; activations are the bytes the
    trace saw autograd keep (at the traced batch, dtype and kernels); other = CUDA context,
    the module's largest op output twice (backward working set) and fragmentation. No model
    parallelism (the trace is of the whole module); ZeRO/FSDP sharding applies."""
    validate(cfg)
    weights, grads, opt = model_state_bytes(None, cfg, trace.param_count, trace.param_count,
                                            trace.param_tensors)
    acts = float(trace.saved_activation_bytes)
    widest = max((o.bytes_written for o in trace.ops.phase("forward")), default=0.0)
    other = {"transient_peak": 2 * widest,
             "cuda_context": float(cfg.cuda_context_bytes if device.kind != "cpu" else 0)}
    other["fragmentation"] = cfg.fragmentation * (acts + other["transient_peak"])
    other_items = {k: int(v) for k, v in other.items()}
    per_gpu = {"weights": int(weights), "gradients": int(grads), "optimizer": int(opt),
               "activations": int(acts), "other": sum(other_items.values())}
    return MemoryResult("train", per_gpu, other_items,
                        device.capacity_bytes, device.name, _train_assumptions(cfg, device),
                        {"params_per_gpu": trace.param_count, "source": "traced module"})


# ---- inference ----------------------------------------------------------------------------
