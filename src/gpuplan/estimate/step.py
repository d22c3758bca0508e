"""The training step model as small pure terms. Each takes Python floats (one job,
`training.step_time`) or numpy arrays (every layout at once, `search`), so the search
evaluates exactly the functions `train` uses. Collective times and per-block compute times are
inputs: they come from `estimate.comm.collective_time` and the operator roofline, and the
efficiency model (`estimate.efficiency`) is plugged in by the caller.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.partition import sharded_share
from gpuplan.ops.transformer import BLOCK_ATTN, BLOCK_ATTN_WINDOW, BLOCK_MLP, BLOCK_MOE
from gpuplan.specs.cluster import Cluster

Array = Any
"""a float or a numpy array of them"""

OPTIMIZER_BYTES_PER_PARAM = {"adamw": 28.0, "adam": 28.0, "sgd": 18.0, "adam8bit": 20.0,
                             "adamw-bf16-moments": 20.0, "adamw-bf16-states": 16.0,
                             "adafactor": 16.0}
"""Bytes an optimizer step reads and writes per local parameter (AdamW, mixed precision: read
fp32 master, 16-bit grad, two fp32 moments; write master, moments and the 16-bit weights);
with bf16 moments 4 + 2 + 4 read, 4 + 4 + 2 written = 20; with a bf16 master too 16."""

PURE_BF16_OPTIMIZER_BYTES_PER_PARAM = {"adamw": 14.0, "adam": 14.0}
"""Pure bf16 (precision bf16): AdamW reads the bf16 weight, gradient and both moments and writes
weight and moments, 8 + 6 bytes; unfused, every pass of UNFUSED_OPTIMIZER_BYTES_PER_PARAM over
bf16 tensors, half the bytes."""

UNFUSED_OPTIMIZER_BYTES_PER_PARAM = {"adamw": 88.0, "adam": 80.0}
"""Bytes per local parameter of an unfused AdamW step, one memory pass per tensor op on fp32
params, grads and moments, as Composer's DecoupledAdamW.adamw runs it (mosaicml/composer
composer/optim/decoupled_weight_decay.py): param.mul_ (8), exp_avg.mul_ (8) and .add_ (12),
exp_avg_sq.mul_ (8) and .addcmul_ (12), sqrt, div, add_ (3 x 8), param.addcdiv_ (16) = 88
(Adam without the decoupled decay: 80; torch.optim.AdamW's foreach path fuses the first-moment
update into one lerp_, 80). Optimizers not listed keep the fused figure."""

HOST_BYTES_PER_S_PER_GPU = 25e9
"""Host memory bandwidth one GPU's CPU optimizer can use (a 2-socket server's ~200-300 GB/s
shared by 8 GPUs; assumption)."""


def stage_compute(block_t: dict[str, float], layers: Array, sliding: Array, dense: Array,
                  moe: Array, embedding: Array, head: Array) -> Array:
    """Seconds of one micro-batch on a pipeline stage: its layers' blocks and, on the first
    and last stage, the embedding and the head (0/1 flags)."""
    t = (sliding * block_t.get(BLOCK_ATTN_WINDOW, 0.0)
         + (layers - sliding) * block_t.get(BLOCK_ATTN, 0.0)
         + dense * block_t.get(BLOCK_MLP, 0.0) + moe * block_t.get(BLOCK_MOE, 0.0))
    return t + embedding * block_t.get("embedding", 0.0) + head * block_t.get("head", 0.0)


def stage_comm(layers: Array, moe: Array, ar_per_layer: float, tp_ar: float,
               a2a: float) -> Array:
    """Exposed TP and EP collectives of one micro-batch on a stage: one TP all-reduce per
    attention and MLP block and pass (Shoeybi et al. 2019 §3), four all-to-alls (dispatch and
    combine, forward and backward) per MoE layer (Lepikhin et al. 2021 §2)."""
    return layers * ar_per_layer * tp_ar + moe * 4 * a2a


def tp_all_reduces_per_layer(recompute: str) -> int:
    """Attention and MLP: one each forward, backward, and recomputed forward."""
    return 2 * (3 if recompute == "full" else 2)


SP_BACKWARD_GATHER = 0.5
"""With sequence parallelism a block's backward starts with an all-gather of the output
gradient (the adjoint of the forward reduce-scatter; Korthikanti et al. 2022 §4.2.2), half an
all-reduce's volume, run synchronously before the row-parallel layer's dgrad GEMM
(Megatron-LM _ReduceScatterToSequenceParallelRegion.backward; Transformer Engine's row-parallel
Linear backward, gather_along_first_dim without async_op). The column-parallel backward then
re-gathers its sequence-sharded input beside the dgrad GEMM and reduce-scatters the input
gradient beside the wgrad GEMM (LinearWithGradAccumulationAndAsyncCommunication): one
all-reduce's volume, hidden."""


def tp_hidden_per_layer(recompute: str, tp_ar: float, tp_hidden: float,
                        backward_overlap: bool, sp: bool = False) -> float:
    """Seconds of TP collectives per layer and micro-batch hidden behind GEMMs: each call's
    overlapped share (`tp_hidden`), and with `backward_overlap` the two backward input-gradient
    collectives (attention and MLP) whole, launched asynchronously beside the weight-gradient
    GEMMs (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication,
    --async-tensor-model-parallel-allreduce, default on; with sequence parallelism the input
    re-gather and the gradient reduce-scatter, SP_BACKWARD_GATHER, whose output-gradient
    all-gathers add their own overlapped share)."""
    calls = tp_all_reduces_per_layer(recompute)
    bwd = 2 if backward_overlap else 0
    gathers = 2 * SP_BACKWARD_GATHER if backward_overlap and sp else 0.0
    return (calls - bwd + gathers) * tp_hidden + bwd * (tp_ar + tp_hidden)


def tp_exposed_calls(recompute: str, backward_overlap: bool, sp: bool = False) -> float:
    """TP collectives per layer on the critical path, in all-reduce volumes
    (tp_hidden_per_layer); with `backward_overlap` and sequence parallelism the two blocks'
    output-gradient all-gathers stay exposed (SP_BACKWARD_GATHER)."""
    if not backward_overlap:
        return float(tp_all_reduces_per_layer(recompute))
    return tp_all_reduces_per_layer(recompute) - 2 + (2 * SP_BACKWARD_GATHER if sp else 0.0)


def pipeline_time(n_micro: Array, t_mb: Array, pp: Array, v: Array) -> Array:
    """1F1B takes (m + p - 1) stage-steps for m micro-batches; interleaving with v virtual
    stages shrinks the fill/drain to (p - 1)/v of a stage-step (Narayanan et al. 2021 §2.2)."""
    return n_micro * t_mb + np.where(pp > 1, (pp - 1) * t_mb / v, 0.0)


def bubble_fraction(n_micro: Array, pp: Array, v: Array) -> Array:
    return np.where(pp > 1, (pp - 1) / v / (n_micro + (pp - 1) / v), 0.0)


def cp_comm(per_layer: Array, attn_core: Array, layers: Array, n_micro: Array,
            overlap: bool) -> tuple[Array, Array]:
    """(total, exposed): K/V all-gathered and dK/dV reduce-scattered per layer, overlapped with
    the attention core (ring attention; Liu et al. 2023)."""
    total = per_layer * layers * n_micro
    exposed = np.maximum(0.0, per_layer - attn_core) * layers * n_micro if overlap else total
    return total, exposed


def pp_comm(t_p2p: Array, pp: Array, n_micro: Array, v: Array,
            overlap: bool) -> tuple[Array, Array]:
    """(total, exposed): activations forward and gradients backward between stages; in steady
    state they overlap compute, fill and drain expose them."""
    total = 2 * t_p2p * n_micro * (pp - 1) / pp * v
    return total, (2 * (pp - 1) * t_p2p if overlap else total)


def dp_comm(z: Array, ar: Array, rs: Array, ag: Array, rs3: Array, ag3: Array, fwd: Array,
            bwd: Array, n_micro: Array, overlap: bool, gather_overlap: bool = False,
            prefetch: Array = 1.0, reduce_overlap: bool = True, pp: Array = 1,
            v: Array = 1) -> tuple[Array, Array]:
    """(total, exposed) data-parallel communication. ZeRO-0: gradients all-reduced; ZeRO-1/2:
    reduce-scattered, parameters all-gathered after the step; ZeRO-3: parameters gathered in
    forward and backward and gradients reduce-scattered every micro-batch (Rajbhandari et al.
    2020 §5). Bucketed and overlapped with the last micro-batch's backward (ZeRO-3: with each
    micro-batch's compute); exposed = what does not fit. Pass zeros when dp x cp = 1.
    Framework overlaps (Efficiency): `gather_overlap` hides the ZeRO-1/2 parameter gather
    behind the next forward (Megatron-Core --overlap-param-gather); `prefetch` is the share of
    a ZeRO-3 gather that can run ahead of use (DeepSpeed stage3_prefetch_bucket_size / layer
    parameters; 1 = a whole block ahead, FSDP); `reduce_overlap` False leaves the ZeRO-0/1/2
    gradient reduction after the backward (Megatron-LM without --overlap-grad-reduce: its
    DDP reduces the whole gradient buffer in finalize_model_grads, after the last
    micro-batch). With an interleaved pipeline (`v` model chunks per stage, `pp` > 1) the
    ZeRO-0/1/2 collectives go chunk by chunk (interleaved_tail)."""
    total = np.select([z == 0, z < 3], [ar, rs + ag], (2 * ag3 + rs3) * n_micro)
    if not overlap:
        return total, total
    z3 = ((1 - prefetch) * 2 * ag3 + np.maximum(0.0, prefetch * ag3 - fwd)
          + np.maximum(0.0, prefetch * ag3 + rs3 - bwd)) * n_micro
    chunked = (np.asarray(v) > 1) & (np.asarray(pp) > 1)
    group = np.minimum(pp, n_micro)

    def reduced(x: Array) -> Array:
        if not reduce_overlap:
            return x
        return np.where(chunked, interleaved_tail(x, v, group * bwd / v), np.maximum(0.0, x - bwd))

    ag12 = (np.where(chunked, np.maximum(0.0, interleaved_tail(ag, v, group * fwd / v) - fwd / v),
                     np.maximum(0.0, ag - fwd)) if gather_overlap else ag)
    exposed = np.select([z == 0, z < 3], [reduced(ar), reduced(rs) + ag12], z3)
    return total, exposed


def interleaved_tail(total: Array, v: Array, spacing: Array) -> Array:
    """Exposed seconds of `total` seconds of data-parallel collectives that Megatron-Core's
    interleaved schedule splits over its `v` model chunks: each chunk's gradient reduction
    starts once that chunk's last backward is done (its parameter gather, mirrored, as the
    previous chunk's first forward starts), chunk after chunk `spacing` apart (the pp
    micro-batches of one chunk: the schedule's group per virtual stage), one communicator
    serving them in turn. The queue's tail past the last chunk is the larger of the last
    chunk's own share and the backlog, max(total / v, total - (v - 1) x spacing)
    (NVIDIA/Megatron-LM megatron/core/pipeline_parallel/schedules.py @d98e8a6,
    forward_backward_pipelining_with_interleaving: grad_sync_func per chunk after
    is_last_microbatch_for_model_chunk, param_sync_func for the next chunk; installed by
    megatron/training/training.py with --overlap-grad-reduce / --overlap-param-gather, both
    aligned across stages by default)."""
    return np.maximum(np.asarray(total) / v, total - (np.asarray(v) - 1) * spacing)


def overlap_slowdown(hidden_s: Array, slowdown: float) -> Array:
    """Extra seconds of compute that runs alongside hidden communication: NCCL kernels hold
    SMs (one thread block per channel) and HBM bandwidth while they run, so overlapped
    compute slows by `slowdown` for as long as the hidden collectives run (Lee et al. 2025,
    arXiv:2507.03114: 18.9% average compute slowdown under overlap on A100/H100)."""
    return slowdown * hidden_s


def contention_weight(group: Array, local: Array, cluster: Cluster) -> Array:
    """Share of the measured overlap slowdown (overlap_slowdown) a hidden collective causes:
    NCCL's load on the GPU scales with the bytes per second it moves, so a group inside one
    node (the scale-up rate Lee et al. measured at) weighs 1 and the network stage of a group
    spanning nodes weighs scale_out/scale_up. A group with `local` > 1 GPUs per node runs
    hierarchically (estimate.comm.collective_time): its intra-node stage, (g-1)/g of the bytes
    at the scale-up rate, weighs 1; the inter-node stage, (k-1)/k of 1/g of the bytes at the
    network rate, weighs the ratio; the weight is their time-weighted mean."""
    up = cluster.scale_up.achievable_bytes_per_s
    out = cluster.scale_out.achievable_bytes_per_s
    ratio = min(1.0, cluster.scale_out.bw_bytes_per_s / cluster.scale_up.bw_bytes_per_s)
    group = np.asarray(group, dtype=float)
    g = np.maximum(1.0, np.minimum(np.asarray(local, dtype=float), group))
    nodes = np.ceil(group / g)
    t_up = (g - 1) / g / up
    t_out = (nodes - 1) / nodes / g / out
    share_up = t_up / np.maximum(t_up + t_out, 1e-30)
    spanning = share_up + (1 - share_up) * ratio
    w = np.where(nodes <= 1, 1.0, spanning)
    return float(w) if w.ndim == 0 else w


def offload_step_time(local_params: Array, bpp: dict[str, float], cluster: Cluster) -> Array:
    """ZeRO-Offload (Ren et al. 2021): gradients to the host and updated weights back over
    PCIe, the Adam step on the CPU (fp32 master and moments: 28 bytes moved per parameter)."""
    dev = cluster.device
    pcie = dev.pcie.bw_bytes_per_s * 0.8 if dev.pcie else 16e9
    transfer = local_params * (bpp["gradients"] + bpp["weights"]) / pcie
    return transfer + local_params * 28.0 / HOST_BYTES_PER_S_PER_GPU


def memory_efficiency(eff: Efficiency, nbytes: Array) -> Array:
    """eff.memory(nbytes) for a float or, element by element, an array."""
    if np.ndim(nbytes) == 0:
        return eff.memory(float(nbytes))
    uniq, inv = np.unique(nbytes, return_inverse=True)
    return np.array([eff.memory(float(u)) for u in uniq])[inv]


def zero3_prefetch_share(eff: Efficiency, params: Array, layers: Array) -> Array:
    """Share of a ZeRO-3 layer gather that can overlap compute: min(1, prefetched parameters /
    parameters per layer); 1 when the framework prefetches whole blocks (eff field None)."""
    if not eff.zero3_prefetch_params:
        return 1.0
    per_layer = np.maximum(np.asarray(params, dtype=float) / np.maximum(layers, 1), 1.0)
    return np.minimum(1.0, eff.zero3_prefetch_params / per_layer)


def optimizer_time(params: Array, shard: Array, optimizer: str, offload: Array,
                   bpp: dict[str, float], cluster: Cluster, eff: Efficiency,
                   expert_params: Array = 0.0, expert_shard_ratio: Array = 1.0,
                   sharded: Array = True, precision: str = "bf16-mixed") -> Array:
    """A memory-bound pass over the local parameter shard (one pass when the framework's
    optimizer is fused, one per arithmetic op when not), or the offloaded CPU step. Routed
    experts are sharded over their own group (partition.sharded_share)."""
    local = sharded_share(params, params, expert_params, shard, expert_shard_ratio, sharded)
    per_param = OPTIMIZER_BYTES_PER_PARAM[optimizer]
    if not eff.fused_optimizer:
        per_param = UNFUSED_OPTIMIZER_BYTES_PER_PARAM.get(optimizer, per_param)
    if precision == "bf16" and optimizer in PURE_BF16_OPTIMIZER_BYTES_PER_PARAM:
        # the same passes over bf16 tensors: the fused step's pure-bf16 share of its bytes
        per_param *= (PURE_BF16_OPTIMIZER_BYTES_PER_PARAM[optimizer]
                      / OPTIMIZER_BYTES_PER_PARAM[optimizer])
    opt_bytes = local * per_param
    on_gpu = opt_bytes / (cluster.device.mem_bw_bytes_per_s * memory_efficiency(eff, opt_bytes))
    if np.ndim(offload) == 0:
        return offload_step_time(local, bpp, cluster) if offload else on_gpu
    return np.where(offload, offload_step_time(local, bpp, cluster), on_gpu)
