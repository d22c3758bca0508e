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
from typing import Any, Literal, Protocol

import numpy as np

from gpuplan.estimate import lora
from gpuplan.estimate.memory_peak import (
    LossBuffers,
    fsdp_buffers,
    gathered_tp_inputs,
    loss_buffers,
    ops_loss_saved,
    per_op_sac_saved,
    transient_moment,
)
from gpuplan.estimate.partition import Stage, sharded_share, stages
from gpuplan.estimate.sac import OP_LEVEL_KINDS, recomputed_mm_shares
from gpuplan.ops.blocks import FP32
from gpuplan.ops.impl import Impl, train_impl
from gpuplan.ops.op import OpList
from gpuplan.ops.transformer import (
    BLOCK_ATTN,
    BLOCK_ATTN_WINDOW,
    BLOCK_MLP,
    BLOCK_MOE,
    build_training,
    local_sizes,
)
from gpuplan.specs.device import Device
from gpuplan.specs.memory_behaviour import MEMORY_BAND, MEMORY_BAND_SOURCE, MemoryBehaviour
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import (
    CUDA_CONTEXT_BYTES,
    FRAGMENTATION,
    Optimizer,
    Precision,
    Recompute,
    TrainConfig,
)
from gpuplan.units import DTYPE_BYTES

__all__ = ["CUDA_CONTEXT_BYTES", "FRAGMENTATION", "Layout", "MemoryProfile", "MemoryResult",
           "Optimizer", "Precision", "Recompute", "TrainConfig", "in_flight",
           "lora_ops", "lora_states", "memory_profile", "model_state_bytes", "stage_facts",
           "stage_memory", "stage_total", "train_memory", "with_adapters"]


class TracedModel(Protocol):
    """What the memory planner needs from gpuplan.trace (the torch-side Trace object)."""

    param_count: int
    param_tensors: int
    saved_activation_bytes: int
    ops: OpList


NCCL_BYTES = int(0.25 * 2**30)
"""NCCL communicator buffers per process when any parallelism > 1 (assumption)"""
DDP_BUCKET_BYTES = 25 * 2**20
"""torch DistributedDataParallel bucket_cap_mb default (25 MiB); two in flight"""
OFFLOAD_BUCKET_ELEMENTS = 500_000_000
"""DeepSpeed ZeRO reduce_bucket_size default (5e8 elements): with ZeRO-Offload the gradients
pass through this GPU bucket on their way to the CPU"""


# ---- bytes per parameter -------------------------------------------------------------------

def state_bytes_per_param(cfg: TrainConfig) -> dict[str, float]:
    """Unsharded bytes per parameter of weights, gradients and optimizer states.

    Mixed precision keeps 16-bit weights for compute and an fp32 master copy counted with the
    optimizer: AdamW = 2 + 2 + (4 master + 4 + 4 moments) = 16 bytes (ZeRO §3.1, K = 12).
    8-bit Adam keeps two 1-byte moments (+ an fp32 absmax per 2048-block; Dettmers et al.
    2022); SGD one fp32 momentum; Adafactor factored second moments (counted per matrix);
    bf16 moments (adamw-bf16-moments) 2 + 2, a bf16 master copy too (adamw-bf16-states) 2 + 4
    (specs.workload.Optimizer). Pure bf16 (precision bf16) has no master copy, and the states
    torch.optim makes like the parameters (AdamW's moments, SGD's momentum) are bf16: AdamW =
    2 + 2 + 4 = 8 bytes."""
    mixed = cfg.precision != "fp32"
    pure = cfg.precision == "bf16"
    w = 2.0 if mixed else 4.0
    g = 4.0 if (cfg.grad_dtype == "fp32" or not mixed) else 2.0
    master = 0.0 if (not mixed or pure) else 2.0 if cfg.optimizer == "adamw-bf16-states" \
        else 4.0
    moments = {"adamw": 8.0, "adam": 8.0, "sgd": 4.0, "adam8bit": 2.0 + 8.0 / 2048,
               "adafactor": 0.0, "adamw-bf16-moments": 4.0,
               "adamw-bf16-states": 4.0}[cfg.optimizer]
    if pure and cfg.optimizer in ("adamw", "adam", "sgd"):
        moments /= 2  # bf16 like the parameters
    return {"weights": w, "gradients": g, "optimizer": master + moments}


def fp8_weight_bytes(b: MemoryBehaviour, weight_bytes: float) -> float:
    """Bytes per FP8-linear weight element on top of its 16-bit weight in FP8 training: the
    FP8 copies alive at the backward peak, less the 16-bit weight where the stack keeps the
    weight in FP8 only. Transformer Engine (linear.py) quantizes the weight with row-wise and,
    for training, column-wise usage (Hopper's FP8 GEMMs take only the TN layout, so the
    column-wise data is a transposed copy; MXFP8 keeps a column-scaled copy) and keeps it
    through backward (cached across micro-batches): 2 bytes. With FP8 primary weights
    (Megatron-Core fp8_param_gather, which NeMo 2's and Megatron-Bridge's FP8 precision recipes
    turn on) the parameter itself is the 1-byte row-wise FP8 tensor and TE's
    post_all_gather_processing creates its transpose: 2 bytes in all, no 16-bit copy, so
    2 - 2 = 0 on top."""
    return b.fp8_weight_copies - (weight_bytes if b.fp8_primary_weights else 0.0)


def adafactor_factored_bytes(m: ModelSpec, params: float) -> float:
    """Adafactor's factored second moment: rows + columns fp32 values per matrix (Shazeer &
    Stern 2018 §3), taken for matrices of the model's typical shape d x intermediate_size."""
    d, side = m.hidden_size, m.intermediate_size
    return params * FP32 * (d + side) / (d * side)


STEP_COUNTER_BYTES = 4
"""torch.optim Adam/AdamW keep a 0-dim fp32 `step` tensor per parameter tensor"""


Array = Any
"""a float (one job) or a numpy array (many layouts at once, in the search)"""


def scalar(x: Array) -> Array:
    """A 0-d numpy result back to a Python float; arrays pass through."""
    return float(x) if np.ndim(x) == 0 else x


@dataclass(frozen=True)
class Layout:
    """What the layout search varies within one (tp, cp, ep, recompute, micro-batch) group:
    scalars for one job (`Layout.of`), numpy arrays for many layouts."""

    z: Array
    """ZeRO stage (FSDP full/hybrid = 3)"""
    shard: Array
    """GPUs that shard the model states"""
    offload: Array
    dp: Array
    pp: Array
    v: Array
    """virtual pipeline stages"""
    n_micro: Array
    """micro-batches per step and data-parallel rank"""

    @classmethod
    def of(cls, cfg: TrainConfig) -> Layout:
        micro = cfg.global_batch // (cfg.micro_batch * cfg.dp) if cfg.global_batch else cfg.pp
        return cls(cfg.zero_stage, cfg.shard_group, cfg.offload_optimizer, cfg.dp, cfg.pp,
                   cfg.virtual_stages, micro)


def model_state_bytes(m: ModelSpec | None, cfg: TrainConfig, params: Array,
                      matrix_params: Array, tensors: Array,
                      lay: Layout | None = None, expert_params: Array = 0.0,
                      expert_shard_ratio: Array = 1.0) -> tuple[Array, Array, Array]:
    """(weights, gradients, optimizer) bytes on one GPU holding `params` parameters.

    ZeRO (Rajbhandari et al. 2020 §5.1-5.3): stage 1 shards the optimizer states, stage 2
    also the gradients, stage 3 also the weights, over the shard group (the data-parallel
    GPUs; FSDP hybrid: the GPUs of one sharding group). ZeRO-Offload (Ren et al. 2021 §4.1):
    optimizer states and step on the CPU; with ZeRO-2/3 the gradients follow them there,
    bucket by bucket (counted in other: gradient_buckets). The routed experts among `params`
    (`expert_params`) are replicated only over the expert data-parallel group, the shard
    group x `expert_shard_ratio` (tp / (ep x etp)), and are sharded over it (Megatron-Core's
    distributed optimizer and torchtitan's FSDP shard experts over expert_data_parallel /
    dp_shard_mod_ep)."""
    lay = lay or Layout.of(cfg)
    bpp = state_bytes_per_param(cfg)
    weights = params * bpp["weights"]
    if cfg.precision == "fp8-mixed":  # FP8 copies of the FP8 linears' weights
        weights = weights + matrix_params * fp8_weight_bytes(cfg.behaviour, bpp["weights"])
    grads = params * bpp["gradients"]
    opt = params * bpp["optimizer"]
    if cfg.optimizer == "adafactor" and m is not None:
        opt = opt + adafactor_factored_bytes(m, params)
    if cfg.optimizer in ("adam", "adamw"):
        opt = opt + tensors * STEP_COUNTER_BYTES
    z, off = lay.z, lay.offload
    opt = np.where(off, 0.0, opt)
    grads = np.where(np.logical_and(off, z >= 2), 0.0, grads)
    def sharded(total: Array, on: Array) -> Array:
        return sharded_share(total, params, expert_params, lay.shard, expert_shard_ratio, on)

    return (scalar(sharded(weights, z >= 3)), scalar(sharded(grads, z >= 2)),
            scalar(sharded(opt, z >= 1)))


# ---- results -------------------------------------------------------------------------------

Verdict = Literal["fits", "tight", "does_not_fit"]


def not_out_of_memory(total: Array, capacity: Array, band: float) -> Array:
    """Not declared out of memory (verdict fits or tight): the low end of the predicted
    peak's range, total/(1+band), within capacity. Scalars or arrays (the layout search)."""
    return total / (1 + band) <= capacity


def memory_verdict(total: float, capacity: float, band: float) -> Verdict:
    """The fit verdict of a predicted peak whose relative error is within ±band: the real
    peak lies in [total/(1+band), total/(1-band)]. fits: all of that range is within
    capacity; does_not_fit: none of it; tight: capacity falls inside it."""
    if total / (1 - band) <= capacity:
        return "fits"
    if not not_out_of_memory(total, capacity, band):
        return "does_not_fit"
    return "tight"


def verdict_note(total: float, capacity: float, band: float) -> str:
    """One line for the table and JSON, naming the numbers behind the verdict."""
    v = memory_verdict(total, capacity, band)
    nums = f"predicted {total / 1e9:.1f} of {capacity / 1e9:.1f} GB"
    if v == "tight":
        return f"may not fit: {nums}, within the model's ±{band:.0%}"
    if v == "does_not_fit":
        return f"does not fit: {nums}" + (f", beyond the model's ±{band:.0%}" if band else "")
    return f"fits: {nums}" + (f" with the model's ±{band:.0%}" if band else "")

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
    band: float = 0.0
    """the model's stated relative error on a peak (training: MEMORY_BAND); 0 = exact"""

    @property
    def total_bytes(self) -> int:
        return sum(self.per_gpu.values())

    @property
    def verdict(self) -> Verdict:
        return memory_verdict(self.total_bytes, self.capacity_bytes, self.band)

    @property
    def fits(self) -> bool:
        """Not declared out of memory: it fits, or it is within the model's error band of
        capacity (verdict 'tight'); `total_bytes <= capacity_bytes` is `margin_bytes >= 0`."""
        return self.verdict != "does_not_fit"

    @property
    def fits_with_margin(self) -> bool:
        """Fits beyond doubt: verdict 'fits' and the safety margin left free."""
        return self.verdict == "fits" and \
            self.total_bytes <= self.capacity_bytes * (1 - self.margin)

    @property
    def margin_bytes(self) -> int:
        return self.capacity_bytes - self.total_bytes

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "mode": self.mode, "device": self.device, "per_gpu": dict(self.per_gpu),
            "other_items": dict(self.other_items), "total_bytes": self.total_bytes,
            "capacity_bytes": self.capacity_bytes, "fits": self.fits,
            "memory_verdict": self.verdict, "memory_band": self.band,
            "verdict_note": verdict_note(self.total_bytes, self.capacity_bytes, self.band),
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

def saved_per_block(ops: OpList) -> dict[str, float]:
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


def in_flight(lay: Layout, stage: int) -> Array:
    """Micro-batches' worth of activations a stage holds at its peak (the forward just before
    its first backward in the steady state). 1F1B: stage i warms up with p - i - 1 forwards
    and runs one more, min(p - i, m) (Narayanan et al. 2021 §2.2). Interleaved (v model
    chunks of 1/v stage each): Megatron-Core schedules.py get_pp_rank_microbatches warms up
    2(p - i - 1) + (v - 1)·g chunks (g = microbatch_group_size_per_vp_stage, default p), so
    it holds min(2(p - i - 1) + (v - 1)p + 1, m·v)/v stages' worth; PyTorch's
    ScheduleInterleaved1F1B warms up the same count. On stage 0 that is p(1 + (p - 1)/(p·v)),
    Korthikanti et al. 2022 §4.2.3. Gradient accumulation without a pipeline: one at a time."""
    pp, v = lay.pp, lay.v
    micro = np.maximum(lay.n_micro, 1)
    one_f_one_b = np.minimum(pp - stage, micro)
    chunks = np.minimum(2 * (pp - stage - 1) + (v - 1) * pp + 1, micro * v)
    held = np.where(v > 1, chunks / np.maximum(v, 1), one_f_one_b)
    return scalar(np.where(pp > 1, held, 1.0))


@dataclass(frozen=True)
class MemoryProfile:
    """What one micro-batch of a (tp, cp, ep, recompute, micro-batch) group saves."""

    per_block: dict[str, float]
    """saved bytes of one layer of each block kind (and embedding, head)"""
    full_block: dict[str, float]
    """the same without recomputation (a recomputed layer's backward holds it)"""
    seq_local: int
    vocab_local: int
    e: float
    """bytes per element of the compute dtype"""
    peak_head: float = 0.0
    """transient peak of a stage holding the head (`transient_peak`)"""
    peak_body: float = 0.0
    """transient peak of any other stage"""
    layer_params: float = 0.0
    """parameters of the largest layer on one GPU (what ZeRO-3 gathers at a time)"""
    head_extra: float = 0.0
    """saved bytes the training stack's loss keeps beyond the op model's fp32 cross-entropy
    (estimate.memory_peak.loss_buffers; may be negative)"""
    loss: LossBuffers | None = None


def checkpointed(m: ModelSpec, cfg: TrainConfig, impl: Impl,
                 per_block: dict[str, float]) -> dict[str, float]:
    """Saved bytes under full recomputation, from those without it: each layer keeps only its
    input, one hidden-state tensor of the local tokens (Chen et al. 2016; Korthikanti et al.
    2022 §5), counted on its attention block; embedding and head keep theirs. (Equal to what
    `build_training` emits for recompute="full": tests check it for every preset.)"""
    loc = local_sizes(m, impl, cfg.seq_len)
    ck = cfg.micro_batch * loc.seq * loc.rep * m.hidden_size * DTYPE_BYTES[cfg.compute_dtype]
    return {k: (ck if k in (BLOCK_ATTN, BLOCK_ATTN_WINDOW) else 0.0) if k.startswith("layer")
            else v for k, v in per_block.items()}


def memory_profile(m: ModelSpec, cfg: TrainConfig, impl: Impl,
                   saved: dict[str, float] | None = None) -> MemoryProfile:
    """`saved`: the saved bytes per block without recomputation (saved_per_block of
    build_training's list), if the caller has them; built here otherwise."""
    full = cfg.recompute == "full"
    if saved is None:
        saved = saved_per_block(lora_ops(build_training(
            m, cfg.micro_batch, cfg.seq_len, replace(impl, recompute="none") if full else impl),
            m, cfg))
    loc = local_sizes(m, impl, cfg.seq_len)
    b = cfg.behaviour
    e = DTYPE_BYTES[cfg.compute_dtype]
    if cfg.sp:
        saved = gathered_tp_inputs(saved, (BLOCK_ATTN, BLOCK_ATTN_WINDOW, BLOCK_MLP),
                                   cfg.micro_batch * loc.seq, m.hidden_size, e, cfg.tp, b)
    per_block = checkpointed(m, cfg, impl, saved) if full else saved
    if cfg.recompute == "selective" and b.selective in OP_LEVEL_KINDS:
        per_block = per_op_sac(m, cfg, impl, per_block)
    loss = loss_buffers(cfg.micro_batch * loc.seq, loc.vocab, e, b, cfg.tp)
    # the stack's loss instead of the op model's (PyTorch's fp32 cross-entropy)
    head_extra = 0.0
    if b.loss != "fp32":
        head_extra = loss.saved - ops_loss_saved(build_training(m, cfg.micro_batch,
                                                                cfg.seq_len, impl))
    elif b.keeps_logits:
        head_extra = cfg.micro_batch * loc.seq * loc.vocab * e
    prof = MemoryProfile(per_block, saved, loc.seq, loc.vocab, e, head_extra=head_extra,
                         loss=loss)
    layer_params = (m.attention_params() + max(m.mlp_params(), m.moe_params() if m.is_moe
                                               else 0)) / cfg.tp
    return replace(prof, peak_head=transient_peak(m, cfg, prof, True),
                   peak_body=transient_peak(m, cfg, prof, False), layer_params=layer_params)


def per_op_sac(m: ModelSpec, cfg: TrainConfig, impl: Impl,
               per_block: dict[str, float]) -> dict[str, float]:
    """Per-layer saved bytes under op-level selective checkpointing (estimate.sac,
    estimate.memory_peak)."""
    ops = build_training(m, cfg.micro_batch, cfg.seq_len, impl)
    loc = local_sizes(m, impl, cfg.seq_len)
    x = cfg.micro_batch * loc.seq * loc.rep * m.hidden_size * DTYPE_BYTES[cfg.compute_dtype]
    shares = recomputed_mm_shares(m, ops, cfg.behaviour.selective)
    out = dict(per_block)
    for block in (BLOCK_ATTN, BLOCK_ATTN_WINDOW, BLOCK_MLP, BLOCK_MOE):
        if block in per_block:
            out[block] = per_op_sac_saved(ops, block, block in (BLOCK_ATTN, BLOCK_ATTN_WINDOW),
                                          x, shares)
    return out


def transient_peak(m: ModelSpec, cfg: TrainConfig, prof: MemoryProfile, has_head: bool) -> float:
    """Transient peak on top of the saved activations (estimate.memory_peak): the loss
    backward (last stage; what it allocates depends on the stack's loss kind) or one layer's
    backward, which holds its recomputed activations (full recompute) and the gradients
    flowing through it (about two of its widest tensors). They are never live together: the
    larger one counts."""
    t = cfg.micro_batch * prof.seq_local
    layer_full = max((v for k, v in prof.full_block.items() if k.startswith("layer")),
                     default=0.0)
    widest = max(m.intermediate_size * (2 if m.mlp == "gated" else 1) // cfg.tp,
                 m.hidden_size)
    layer_backward = 2 * t * widest * prof.e + (layer_full if cfg.recompute == "full" else 0.0)
    return transient_moment(layer_backward, prof.loss if has_head else None)[0]


@dataclass(frozen=True)
class StageFacts:
    """What the memory terms need of one pipeline stage: scalars, or arrays with one entry
    per layout (the search)."""

    index: Array
    params: Array
    matrix_params: Array
    """parameters of the matrices FP8 training casts (all matmul weights, or the layers' only:
    MemoryBehaviour.fp8_blocks_only)"""
    saved_bytes: Array
    """saved activation bytes of one micro-batch"""
    peak: Array
    """transient peak bytes (`transient_peak`)"""
    layer_params: Array
    """parameters of one layer on this GPU (what ZeRO-3 gathers at a time)"""
    model_parallel: Array
    """tp, cp or ep > 1 (NCCL communicators exist)"""
    expert_params: Array = 0.0
    """of `params`, the routed experts' (Stage.expert_params)"""
    expert_shard_ratio: Array = 1.0
    """the experts' shard group over the dense one: tp / (ep x etp) (TrainConfig.expert_shard_group)"""


def stage_facts(m: ModelSpec, cfg: TrainConfig, st: Stage, prof: MemoryProfile) -> StageFacts:
    fp8_params = st.layer_matrix_params if cfg.behaviour.fp8_blocks_only else st.matrix_params
    return StageFacts(st.index, st.params, fp8_params,
                      stage_activation_bytes(m, st, prof.per_block)
                      + (prof.head_extra if st.has_head else 0.0),
                      prof.peak_head if st.has_head else prof.peak_body, prof.layer_params,
                      max(cfg.tp, cfg.cp, cfg.ep) > 1, st.expert_params,
                      cfg.tp / (cfg.ep * cfg.expert_tp))


def other_items(cfg: TrainConfig, lay: Layout, sf: StageFacts, acts: Array) -> dict[str, Array]:
    """Buffers beside weights, states and saved activations (scalars or arrays)."""
    bpp = state_bytes_per_param(cfg)
    z = lay.z
    # FSDP/ZeRO-3 (estimate.memory_peak.fsdp_buffers): the units in flight gathered in the
    # compute dtype plus one unit's unsharded gradients; under PP without resharding, the
    # whole stage unsharded
    b = cfg.behaviour
    gathered = fsdp_buffers(sf.layer_params, sf.params, bpp["weights"], bpp["gradients"], 1,
                            b)["gathered_parameters"]
    whole = np.logical_and(np.logical_and(z >= 3, lay.pp > 1), not b.fsdp_reshard_with_pp)
    unsharded = sf.params * (bpp["weights"] + bpp["gradients"])
    buckets = np.where(np.logical_and(lay.offload, z == 2),
                       np.minimum(OFFLOAD_BUCKET_ELEMENTS, sf.params) * bpp["gradients"],
                       np.where(np.logical_and(lay.dp > 1, b.ddp_bucket_copies),
                                2.0 * DDP_BUCKET_BYTES, 0.0))
    parallel = np.logical_or(np.maximum(lay.dp, lay.pp) > 1, sf.model_parallel)
    return {"transient_peak": sf.peak,
            "gathered_parameters": np.where(np.logical_and(z >= 3, ~whole), gathered, 0.0),
            "unsharded_stage_parameters": np.where(whole, unsharded, 0.0),
            "gradient_buckets": np.where(z >= 3, 0.0, buckets),
            "nccl_buffers": np.where(parallel, float(NCCL_BYTES), 0.0),
            "cuda_context": float(cfg.cuda_context_bytes),
            "fragmentation": cfg.fragmentation * (acts + sf.peak)}


def stage_memory(m: ModelSpec, cfg: TrainConfig, lay: Layout,
                 sf: StageFacts) -> tuple[dict[str, Array], dict[str, Array]]:
    """Per-GPU bytes of one pipeline stage, each item rounded down to whole bytes:
    (weights, gradients, optimizer, activations), and the items of "other"."""
    tensors = m.param_tensors() * sf.params / m.params()
    weights, grads, opt = model_state_bytes(m, cfg, sf.params, sf.matrix_params, tensors, lay,
                                            sf.expert_params, sf.expert_shard_ratio)
    acts = sf.saved_bytes * in_flight(lay, sf.index)
    other = other_items(cfg, lay, sf, acts)
    main = {"weights": weights, "gradients": grads, "optimizer": opt, "activations": acts}
    return ({k: scalar(np.floor(v)) for k, v in main.items()},
            {k: scalar(np.floor(v)) for k, v in other.items()})


def stage_total(parts: tuple[dict[str, Array], dict[str, Array]]) -> Array:
    main, other = parts
    return sum(main.values()) + sum(other.values())


def train_memory(m: ModelSpec, device: Device, cfg: TrainConfig) -> MemoryResult:
    """Peak memory per GPU of the fullest pipeline stage."""
    impl = train_impl(cfg, device.kind)
    prof = memory_profile(m, cfg, impl)
    lay = Layout.of(cfg)
    rows = [(st, with_adapters(m, cfg, st, stage_memory(m, cfg, lay, stage_facts(m, cfg, st,
                                                                               prof))))
            for st in stages(m, cfg.tp, cfg.pp, cfg.ep, cfg.etp)]
    st, (main, other) = max(rows, key=lambda r: stage_total(r[1]))  # the fullest stage
    other_items_ = {k: int(v) for k, v in other.items()
                    if v or k not in ("gathered_parameters", "unsharded_stage_parameters",
                                      "gradient_buckets", "nccl_buffers")}
    per_gpu = {k: int(v) for k, v in main.items()}
    per_gpu["other"] = sum(other_items_.values())  # sums exactly
    details: dict[str, object] = {
        "stage": st.index, "stage_layers": st.layers, "params_per_gpu": int(st.params),
        "bytes_per_param": state_bytes_per_param(cfg),
        "activation_micro_batches": in_flight(lay, st.index),
        "saved_activation_bytes_per_micro_batch": int(stage_activation_bytes(m, st,
                                                                             prof.per_block)
                                                      + (prof.head_extra if st.has_head
                                                         else 0.0)),
        "stages": [{"stage": r[0].index, "layers": r[0].layers, "total_bytes": int(stage_total(
            r[1]))} for r in rows],
        "grad_accum": cfg.grad_accum,
        "note": "gradient accumulation does not change per-step memory: micro-batches run one "
                "after another and gradients accumulate in place",
    }
    if cfg.lora.active:
        details["finetune"] = {k: int(v) if k != "quantized_params" else v
                               for k, v in lora_states(m, cfg, st)[3].items()}
    assumptions = _train_assumptions(cfg, device)
    assumptions["memory_behaviour"] = cfg.behaviour.to_json()
    if prof.loss is not None:
        assumptions["loss"] = prof.loss.basis
        details["peak_moment"] = ("start of backward (loss backward)" if st.has_head and
                                  prof.loss.transient >= other["transient_peak"] else
                                  "backward of one layer")
    return MemoryResult("train", per_gpu, other_items_, device.capacity_bytes, device.name,
                        assumptions, details, band=MEMORY_BAND)


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
    moments = state_bytes_per_param(replace(cfg, precision="fp32", fp8_recipe="tensorwise"))[
        "optimizer"]
    step = STEP_COUNTER_BYTES if cfg.optimizer in ("adam", "adamw") else 0.0
    return lora.state_bytes(m, cfg.lora, st, cfg.tp, DTYPE_BYTES[cfg.compute_dtype], moments,
                            step, cfg.zero_stage, cfg.shard_group)


def with_adapters(m: ModelSpec, cfg: TrainConfig, st: Stage,
                  parts: tuple[dict[str, Array], dict[str, Array]]
                  ) -> tuple[dict[str, Array], dict[str, Array]]:
    """A stage's memory with LoRA/QLoRA model states in place of full training's."""
    if not cfg.lora.active:
        return parts
    main, other = parts
    w, g, o, _ = lora_states(m, cfg, st)
    return {**main, "weights": float(np.floor(w)), "gradients": float(np.floor(g)),
            "optimizer": float(np.floor(o))}, other


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
                     "etp": cfg.expert_tp,
                     "sp": cfg.sp, "virtual_stages": cfg.virtual_stages},
        "recompute": cfg.recompute, "attention": cfg.attention, "fused_kernels": bool(cfg.fused),
        "kernels": train_impl(cfg, device.kind).target,
        "dropout_mask_bytes": 1 if train_impl(cfg, device.kind).target == "cuda"
        else "activation dtype", "dropout": cfg.dropout,
        "training_kv_cache": cfg.training_kv_cache,
        "cuda_context_bytes": cfg.cuda_context_bytes, "fragmentation": cfg.fragmentation,
        "memory_band": f"±{MEMORY_BAND:.0%}: {MEMORY_BAND_SOURCE}",
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
                        {"params_per_gpu": trace.param_count, "source": "traced module"},
                        band=MEMORY_BAND)


# ---- inference ----------------------------------------------------------------------------
