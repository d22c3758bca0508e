"""Training step time, MFU and communication for a model, batch and parallel layout.

Every term is visible:
- compute: the operator roofline of one micro-batch on the slowest pipeline stage (per-GPU
  shards under TP/SP/CP/EP, recompute as extra forward work), FlashAttention and eager
  (unfused) element-wise kernels unless the job says otherwise (`fused`, `attention`);
- pipeline: 1F1B takes (m + p - 1) stage-steps for m micro-batches (bubble (p-1)/(m+p-1));
  interleaving with v virtual stages shrinks the bubble to (p-1)/(v m) of the work
  (Narayanan et al. 2021 §2.2);
- tensor parallel: one all-reduce (or all-gather + reduce-scatter with SP) of the activations
  per attention and MLP block, forward and backward, on the critical path (Shoeybi et al.
  2019 §3); expert parallel: all-to-all dispatch and combine per MoE layer, exposed;
- context parallel: K/V all-gathered and their gradients reduce-scattered per layer,
  overlapped with the attention core;
- data parallel: gradients all-reduced (ZeRO-1/2: reduce-scattered, parameters all-gathered
  after the step; ZeRO-3: parameters gathered in forward and backward and gradients
  reduce-scattered every micro-batch), bucketed and overlapped with the backward pass of the
  last micro-batch (ZeRO-3: with each micro-batch's compute); exposed = what does not fit;
- optimizer: a memory-bound pass over the local parameter shard.
MFU counts model FLOPs (no recomputation; attention in full, PaLM App. B); HFU all executed
FLOPs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.estimate.comm import collective_time
from gpuplan.estimate.efficiency import Efficiency, training_efficiency
from gpuplan.estimate.flops import flops_summary
from gpuplan.estimate.memory import (
    MemoryResult,
    TrainConfig,
    lora_ops,
    lora_states,
    state_bytes_per_param,
    train_memory,
)
from gpuplan.estimate.partition import Stage, stages
from gpuplan.estimate.roofline import roofline
from gpuplan.estimate.sac import OP_LEVEL_KINDS, recomputed_mm_shares, rerun_share
from gpuplan.estimate.step import (  # importable from here as before the split
    HOST_BYTES_PER_S_PER_GPU as HOST_BYTES_PER_S_PER_GPU,
)
from gpuplan.estimate.step import (
    OPTIMIZER_BYTES_PER_PARAM as OPTIMIZER_BYTES_PER_PARAM,
)
from gpuplan.estimate.step import (
    bubble_fraction,
    contention_weight,
    cp_comm,
    dp_comm,
    optimizer_time,
    overlap_slowdown,
    pipeline_time,
    pp_comm,
    stage_comm,
    stage_compute,
    tp_exposed_calls,
    tp_hidden_per_layer,
    zero3_prefetch_share,
)
from gpuplan.estimate.step import offload_step_time as offload_step_time
from gpuplan.ops.impl import Impl, train_impl
from gpuplan.ops.op import Op, OpList
from gpuplan.ops.passes import fuse_elementwise
from gpuplan.ops.transformer import build_training, local_sizes
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import check_layout
from gpuplan.units import DTYPE_BYTES


@dataclass
class StepResult:
    """One training step; times in seconds. `fits` is the memory verdict; the step is timed
    either way (a layout that does not fit still gets its speed)."""

    fits: bool
    memory: MemoryResult
    gpus: int
    global_batch: int
    micro_batches: int
    tokens_per_step: int
    step_time_s: float | None = None
    breakdown: dict[str, float] = field(default_factory=dict)
    comm_time_s: float = 0.0
    comm_exposed_s: float = 0.0
    bubble_fraction: float = 0.0
    model_flops_per_step: float = 0.0
    hardware_flops_per_step: float = 0.0
    peak_flops_per_s: float = 0.0
    dominant: str = ""
    assumptions: dict[str, Any] = field(default_factory=dict)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    """each collective of the step (one call each): bytes, group, time, algbw, busbw"""

    @property
    def tokens_per_s(self) -> float | None:
        return self.tokens_per_step / self.step_time_s if self.step_time_s else None

    @property
    def model_flops_per_s_per_gpu(self) -> float | None:
        if not self.step_time_s:
            return None
        return self.model_flops_per_step / self.gpus / self.step_time_s

    @property
    def mfu(self) -> float | None:
        f = self.model_flops_per_s_per_gpu
        return f / self.peak_flops_per_s if f is not None else None

    @property
    def hfu(self) -> float | None:
        if not self.step_time_s:
            return None
        return self.hardware_flops_per_step / self.gpus / self.step_time_s / self.peak_flops_per_s

    def to_json(self) -> dict[str, Any]:
        return {
            "fits": self.fits, "memory_verdict": self.memory.verdict, "gpus": self.gpus,
            "global_batch": self.global_batch, "micro_batches": self.micro_batches,
            "tokens_per_step": self.tokens_per_step,
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
            "model_flops_per_s_per_gpu": self.model_flops_per_s_per_gpu, "mfu": self.mfu,
            "hfu": self.hfu, "comm_time_s": self.comm_time_s,
            "comm_exposed_s": self.comm_exposed_s, "bubble_fraction": self.bubble_fraction,
            "breakdown_s": self.breakdown, "dominant": self.dominant,
            "model_flops_per_step": self.model_flops_per_step,
            "hardware_flops_per_step": self.hardware_flops_per_step,
            "peak_flops_per_s": self.peak_flops_per_s,
            "memory": self.memory.to_json(), "assumptions": self.assumptions,
            "collectives": self.collectives,
        }


def training_ops(m: ModelSpec, cfg: TrainConfig, impl: Impl,
                 built: OpList | None = None) -> OpList:
    """One micro-batch's ops (`built`: build_training's list for this job, if at hand); with
    fused kernels the element-wise chains are fused as the frameworks do (bias+GeLU,
    bias+dropout+add, add+norm)."""
    ops = built if built is not None else build_training(m, cfg.micro_batch, cfg.seq_len, impl)
    ops = lora_ops(ops, m, cfg)  # LoRA/QLoRA: frozen weights, adapters (estimate/lora.py)
    return fuse_elementwise(ops)[0] if cfg.fused else ops


@dataclass(frozen=True)
class BlockProfile:
    """Seconds per micro-batch of one layer of each block kind (and embedding, head), the
    forward share of compute, and the attention core per layer (what CP overlaps)."""

    block_t: dict[str, float]
    fwd_share: float
    attn_core: float
    hw_flops: float
    """executed matmul FLOPs of one micro-batch on one GPU"""
    block_fwd: dict[str, float]
    """the forward part of block_t (what full recomputation runs again)"""
    total_s: float
    fwd_s: float
    layer_fwd_s: float
    attn_fwd_s: float
    layer_fwd_flops: float
    block_tail: dict[str, float] = field(default_factory=dict)
    """the part of block_fwd that early-stopped recomputation does not rerun (Op.recompute_tail)"""
    layer_tail_s: float = 0.0
    layer_tail_flops: float = 0.0


def block_profile(m: ModelSpec, ops: OpList, device: Device, eff: Efficiency,
                  cache: dict[tuple[object, ...], Any] | None = None,
                  rerun: Callable[[Op], float] | None = None) -> BlockProfile:
    """`rerun`: the share of each forward per-layer op that runs again in backward (selective
    recomputation that is not a whole layer, estimate.sac), added as backward work."""
    rl = roofline(ops, device, eff, cache)
    block_t: dict[str, float] = {}
    block_fwd: dict[str, float] = {}
    block_tail: dict[str, float] = {}
    block_again: dict[str, float] = {}
    fwd = layer_fwd = attn = attn_fwd = layer_fwd_flops = tail = tail_flops = 0.0
    again_s = again_flops = 0.0
    for row in rl.rows:
        o = row.op
        key = str(o.layer if o.per_layer else ("embedding" if o.component == "embedding"
                                               else "head"))
        per = row.time_s / o.count if o.per_layer else row.time_s
        block_t[key] = block_t.get(key, 0.0) + per
        if o.kind == "attention":
            attn += row.time_s
        if o.phase != "forward":
            continue
        fwd += row.time_s
        attn_fwd += row.time_s if o.kind == "attention" else 0.0
        if o.per_layer:
            block_fwd[key] = block_fwd.get(key, 0.0) + per
            layer_fwd += row.time_s
            mm_flops = o.total_flops if o.kind in ("matmul", "attention", "conv") else 0
            layer_fwd_flops += mm_flops
            if o.recompute_tail:
                block_tail[key] = block_tail.get(key, 0.0) + per
                tail += row.time_s
                tail_flops += mm_flops
            share = rerun(o) if rerun is not None else 0.0
            if share:
                block_again[key] = block_again.get(key, 0.0) + share * per
                again_s += share * row.time_s
                again_flops += share * mm_flops
    p = BlockProfile(block_t, fwd / rl.total_time_s, attn / m.num_layers,
                     ops.flops(matmul_only=True), block_fwd, rl.total_time_s, fwd, layer_fwd,
                     attn_fwd, layer_fwd_flops, block_tail, tail, tail_flops)
    return with_rerun(m, p, block_again, again_s, again_flops, 0.0) if block_again else p


def with_rerun(m: ModelSpec, p: BlockProfile, block_again: dict[str, float], again_s: float,
               again_flops: float, attn_again_s: float) -> BlockProfile:
    """`p` with forward work run again in backward: `block_again` seconds per layer of each
    block, `again_s` in all (of which `attn_again_s` attention cores), `again_flops`."""
    block_t = {k: v + block_again.get(k, 0.0) for k, v in p.block_t.items()}
    total = p.total_s + again_s
    return BlockProfile(block_t, p.fwd_s / total, (p.attn_core * m.num_layers + attn_again_s)
                        / m.num_layers, p.hw_flops + again_flops, p.block_fwd, total,
                        p.fwd_s, p.layer_fwd_s, p.attn_fwd_s, p.layer_fwd_flops, p.block_tail,
                        p.layer_tail_s, p.layer_tail_flops)


def with_full_recompute(m: ModelSpec, p: BlockProfile, early_stop: bool = False) -> BlockProfile:
    """Full recomputation (Chen et al. 2016; Korthikanti et al. 2022 §5) runs each layer's
    forward once more in its backward: the profile without recomputation plus each layer's
    forward (less its tail under early stop, Impl.recompute_early_stop), counted as backward
    work. What `build_training` emits for recompute="full" (it keeps only layer inputs; their
    bytes are the memory model's business)."""
    tail = p.block_tail if early_stop else {}
    again = {k: p.block_fwd.get(k, 0.0) - tail.get(k, 0.0) for k in p.block_t}
    rerun_s = p.layer_fwd_s - (p.layer_tail_s if early_stop else 0.0)
    rerun_flops = p.layer_fwd_flops - (p.layer_tail_flops if early_stop else 0.0)
    return with_rerun(m, p, again, rerun_s, rerun_flops, p.attn_fwd_s)


def timing_profile(m: ModelSpec, cfg: TrainConfig, impl: Impl, device: Device, eff: Efficiency,
                   cache: dict[tuple[object, ...], Any] | None = None,
                   built: OpList | None = None) -> BlockProfile:
    """The block profile of one micro-batch of `cfg` (`built`: build_training's list for
    this job, or for its no-recompute twin when full recomputation is derived). Full
    recomputation is derived from the no-recompute profile when no dropout is active; with
    dropout the recomputed forward replays the saved masks and is built op by op."""
    if cfg.recompute == "selective" and cfg.behaviour.selective in OP_LEVEL_KINDS:
        # op-level checkpointing reruns what estimate.sac says, not the attention-core
        # recompute that build_training adds to an eager attention under "selective"
        plain = replace(impl, recompute="none")
        ops = training_ops(m, replace(cfg, recompute="none"), plain,
                           built if impl.attention == "flash" else None)
        shares = recomputed_mm_shares(m, ops, cfg.behaviour.selective)
        return block_profile(m, ops, device, eff, cache, lambda o: rerun_share(shares, o))
    if cfg.recompute != "full" or not full_recompute_derivable(m, cfg):
        return block_profile(m, training_ops(m, cfg, impl, built), device, eff, cache)
    none = replace(cfg, recompute="none")
    return with_full_recompute(m, block_profile(
        m, training_ops(m, none, replace(impl, recompute="none"), built), device, eff, cache),
        impl.recompute_early_stop)


def full_recompute_derivable(m: ModelSpec, cfg: TrainConfig) -> bool:
    """Without dropout in the layers, full recomputation adds exactly each layer's forward."""
    return not (cfg.dropout and (m.hidden_dropout > 0 or m.attention_dropout > 0))


Coll = Callable[[str, str, float, int, int], float]


@dataclass(frozen=True)
class GroupComm:
    """Per-call times of the collectives that depend on the (tp, cp, ep, micro-batch) group."""

    tp_ar: float
    """exposed seconds of one TP collective"""
    tp_hidden: float
    """seconds of one TP collective hidden behind GEMMs (overlap)"""
    a2a: float
    cp_layer: float
    act_bytes: float


def group_comm(m: ModelSpec, cfg: TrainConfig, impl: Impl, gpn: int, coll: Coll,
               tp_overlap: float = 0.0) -> GroupComm:
    """`tp_overlap`: share of each TP collective hidden behind GEMMs (Efficiency)."""
    loc = local_sizes(m, impl, cfg.seq_len)
    e = DTYPE_BYTES[cfg.compute_dtype]
    t_tok = cfg.micro_batch * loc.seq
    act_bytes = t_tok * m.hidden_size * e
    tp_full = (coll("tensor parallel, per block", "all_reduce", act_bytes, cfg.tp,
                    min(cfg.tp, gpn)) if cfg.tp > 1 else 0.0)
    ep_local = max(1, min(cfg.ep, gpn // max(1, cfg.expert_tp)))  # EP ranks stride etp
    # each rank dispatches the tokens it holds: with sequence parallelism its 1/tp shard of the
    # sequence (the [s/tp, b, h] layout of Korthikanti et al. 2022 §4.2.2 that Megatron-Core's
    # MoE layer receives and its token dispatcher permutes), else the whole sequence
    a2a = (coll("expert parallel dispatch/combine", "all_to_all",
                t_tok * loc.rep * m.experts_per_token * m.hidden_size * e, cfg.ep, ep_local)
           if m.is_moe and cfg.ep > 1 else 0.0)
    cp_layer = 0.0
    if cfg.cp > 1:
        kv = t_tok * cfg.cp * 2 * loc.kv_heads * m.head_size * e
        cp_local = max(1, min(cfg.cp, gpn // max(1, cfg.tp)))
        cp_layer = (coll("context parallel K/V, per layer", "all_gather", kv, cfg.cp, cp_local)
                    + coll("context parallel dK/dV, per layer", "reduce_scatter", kv, cfg.cp,
                           cp_local))
    return GroupComm(tp_full * (1 - tp_overlap), tp_full * tp_overlap, a2a, cp_layer, act_bytes)


def pp_local(tp: int, dp: int, cp: int, gpn: int) -> int:
    """GPUs of one pipeline hop's pair in a node: neighbours share a node unless tp x dp x cp
    already fills it."""
    return 1 if tp * dp * cp >= gpn else 2


def dp_local(tp: int, cp: int, gpn: int) -> int:
    """Data-parallel ranks in one node."""
    return max(1, gpn // (tp * cp)) if tp * cp < gpn else 1


def reduce_bytes_per_param(cfg: TrainConfig) -> dict[str, float]:
    """state_bytes_per_param as the data-parallel collectives move them: gradients reduced in
    fp32 (grad_reduce_dtype) travel at 4 bytes per parameter whatever dtype backward wrote
    them in (PyTorch FSDP MixedPrecision(reduce_dtype=torch.float32) upcasts before the
    reduce-scatter; Composer's FSDP mixed_precision 'DEFAULT' sets it: mosaicml/composer
    v0.16.4 composer/trainer/mosaic_fsdp_utils.py get_mixed_precision)."""
    bpp = state_bytes_per_param(cfg)
    if cfg.grad_reduce_dtype == "fp32":
        return {**bpp, "gradients": max(bpp["gradients"], DTYPE_BYTES["fp32"])}
    return bpp


def dp_collectives(z: int, dp: int, cp: int, tp: int, shard_group: int, bpp: dict[str, float],
                   st_params: float, gpn: int, coll: Coll) -> tuple[float, ...]:
    """(all-reduce, reduce-scatter, all-gather, ZeRO-3 reduce-scatter, ZeRO-3 all-gather) of
    the stage's gradients/weights over the data-parallel group, for ZeRO stage z."""
    grad_b, w_b = st_params * bpp["gradients"], st_params * bpp["weights"]
    group, local = dp * cp, dp_local(tp, cp, gpn)
    if group <= 1:
        return 0.0, 0.0, 0.0, 0.0, 0.0
    if z == 0:
        return coll("data parallel gradients", "all_reduce", grad_b, group, local), 0, 0, 0, 0
    if z < 3:
        return (0.0, coll("data parallel gradients", "reduce_scatter", grad_b, group, local),
                coll("updated parameters", "all_gather", w_b, group, local), 0.0, 0.0)
    sg = shard_group
    ag = coll("ZeRO-3 parameters, per micro-batch and pass", "all_gather", w_b, sg,
              min(local, sg))
    rs = coll("ZeRO-3 gradients, per micro-batch", "reduce_scatter", grad_b, sg, min(local, sg))
    return 0.0, 0.0, 0.0, rs, ag


def contended_hidden(cfg: TrainConfig, cluster: Cluster, cp: float, pp: float, dp: float,
                     tp: float) -> float:
    """Hidden (overlapped) communication seconds, each weighted by how hard its link loads
    the GPU (estimate.step.contention_weight): CP, PP and DP groups that span nodes less.
    A term whose exposed part exceeds its total (PP fill and drain with fewer micro-batches
    than stages) hides nothing."""
    gpn = cluster.gpus_per_node
    cp, pp, dp = max(0.0, cp), max(0.0, pp), max(0.0, dp)
    dp_group = cfg.shard_group if cfg.zero_stage == 3 else cfg.dp * cfg.cp
    return float(cp * contention_weight(cfg.cp, max(1, gpn // cfg.tp), cluster)
                 + pp * contention_weight(2, pp_local(cfg.tp, cfg.dp, cfg.cp, gpn), cluster)
                 + dp * contention_weight(dp_group, dp_local(cfg.tp, cfg.cp, gpn), cluster)
                 + tp)


def hybrid_replica_sync(cfg: TrainConfig, params: float, coll: Coll) -> float:
    """HSDP (FSDP hybrid shard): the gradient shards all-reduced across the dp / shard_group
    replicas after the reduce-scatter inside each group, exposed (PyTorch FSDP
    ShardingStrategy.HYBRID_SHARD); 0 for other layouts."""
    if not (cfg.zero_stage == 3 and cfg.fsdp == "hybrid" and cfg.dp > cfg.shard_group):
        return 0.0
    return coll("hybrid-shard replica gradients", "all_reduce", params *
                reduce_bytes_per_param(cfg)["gradients"] / cfg.shard_group,
                cfg.dp // cfg.shard_group, 1)


def stage_optimizer_time(cfg: TrainConfig, st: Stage, trainable: float | None,
                         cluster: Cluster, eff: Efficiency) -> float:
    """The optimizer step of one GPU of stage `st`: its parameter shard, the routed experts
    sharded over their own group (`trainable`: LoRA's adapter parameters, which replace the
    stage's)."""
    return float(optimizer_time(st.params if trainable is None else trainable,
                                cfg.shard_group if cfg.zero_stage >= 1 else 1,
                                cfg.optimizer, cfg.offload_optimizer,
                                state_bytes_per_param(cfg), cluster, eff,
                                st.expert_params if trainable is None else 0.0,
                                cfg.tp / (cfg.ep * cfg.expert_tp), cfg.zero_stage >= 1,
                                cfg.precision))


def step_time(m: ModelSpec, cluster: Cluster, cfg: TrainConfig,
              efficiency: Efficiency | None = None, overlap: bool = True) -> StepResult:
    """Time one optimizer step of `cfg` on `cluster` (see the module docstring): the sum of
    the terms in `estimate.step`."""
    check_layout(cfg, cluster.gpus, m)
    device, gpn = cluster.device, cluster.gpus_per_node
    gb = cfg.global_batch or cfg.micro_batch * cfg.dp
    cfg = replace(cfg, global_batch=gb)
    n_micro = gb // (cfg.micro_batch * cfg.dp)
    mem = train_memory(m, device, cfg)
    eff = efficiency or training_efficiency(device)
    dtype = "fp8" if cfg.precision == "fp8-mixed" else cfg.compute_dtype
    res = StepResult(fits=mem.fits, memory=mem, gpus=cluster.gpus, global_batch=gb,
                     micro_batches=n_micro, tokens_per_step=gb * cfg.seq_len,
                     peak_flops_per_s=device.matmul_peak(dtype if dtype != "fp8" else "bf16"))
    model_fwd = flops_summary(m, cfg.micro_batch, cfg.seq_len)["forward_flops"]
    res.model_flops_per_step = 3 * model_fwd * gb / cfg.micro_batch
    impl = train_impl(cfg, device.kind)
    prof = timing_profile(m, cfg, impl, device, eff)
    calls: list[dict[str, Any]] = []

    def coll(what: str, op: str, nbytes: float, group: int, local: int) -> float:
        ct = collective_time(op, nbytes, group, cluster, local)
        calls.append({"what": what, "op": op, "bytes": nbytes, "group": group,
                      "time_s": ct.time_s, "algbw_bytes_per_s": ct.algbw_bytes_per_s,
                      "busbw_bytes_per_s": ct.busbw_bytes_per_s, "link": ct.link})
        return ct.time_s

    gc = group_comm(m, cfg, impl, gpn, coll, eff.tp_overlap(cfg.sp, cfg.tp))
    ar_layer = tp_exposed_calls(cfg.recompute, eff.tp_backward_overlap, cfg.sp)
    sts = stages(m, cfg.tp, cfg.pp, cfg.ep, cfg.etp)
    compute = [stage_compute(prof.block_t, st.layers, st.sliding_layers, st.dense_layers,
                             st.moe_layers, float(st.has_embedding), float(st.has_head))
               for st in sts]
    comm = [stage_comm(st.layers, st.moe_layers, ar_layer, gc.tp_ar, gc.a2a) for st in sts]
    slowest = max(range(cfg.pp), key=lambda i: compute[i] + comm[i])
    st0, compute_mb = sts[slowest], compute[slowest]
    t_mb = compute_mb + comm[slowest]
    pp, v = cfg.pp, cfg.virtual_stages
    pipeline = float(pipeline_time(n_micro, t_mb, pp, v))
    cp_total, cp_exposed = (float(x) for x in cp_comm(gc.cp_layer, prof.attn_core, st0.layers,
                                                      n_micro, overlap))
    t_p2p = (coll("pipeline activations, per micro-batch", "send_recv", gc.act_bytes, 2,
                  pp_local(cfg.tp, cfg.dp, cfg.cp, gpn)) if pp > 1 else 0.0)
    pp_total, pp_exposed = (float(x) for x in pp_comm(t_p2p, pp, n_micro, v, overlap))
    bpp, sync_params = reduce_bytes_per_param(cfg), st0.params
    if cfg.lora.active:  # only the adapters have gradients and optimizer states
        lw, lg, _, ld = lora_states(m, replace(cfg, zero=0, fsdp="none"), st0)
        bpp, sync_params = {**bpp, "weights": lw, "gradients": lg}, 1.0  # bytes per stage
    ar, rs, ag, rs3, ag3 = dp_collectives(cfg.zero_stage, cfg.dp, cfg.cp, cfg.tp,
                                          cfg.shard_group, bpp, sync_params, gpn, coll)
    fwd_mb = compute_mb * prof.fwd_share
    dp_total, dp_exposed = (float(x) for x in dp_comm(
        cfg.zero_stage, ar, rs, ag, rs3, ag3, fwd_mb, compute_mb * (1 - prof.fwd_share), n_micro,
        overlap, eff.param_gather_overlap, zero3_prefetch_share(eff, st0.params, st0.layers),
        eff.grad_reduce_overlap, pp, v))
    hybrid = hybrid_replica_sync(cfg, st0.params, coll)
    dp_total, dp_exposed = dp_total + hybrid, dp_exposed + hybrid
    t_opt = stage_optimizer_time(cfg, st0, ld["trainable_params"] if cfg.lora.active else None,
                                 cluster, eff)
    ep_total = st0.moe_layers * 4 * gc.a2a * n_micro
    tp_total = (comm[slowest] - st0.moe_layers * 4 * gc.a2a) * n_micro
    tp_hidden = st0.layers * n_micro * tp_hidden_per_layer(
        cfg.recompute, gc.tp_ar, gc.tp_hidden, eff.tp_backward_overlap, cfg.sp)
    slow = float(overlap_slowdown(contended_hidden(
        cfg, cluster, cp_total - cp_exposed, pp_total - pp_exposed, dp_total - dp_exposed,
        tp_hidden), eff.overlap_slowdown))
    res.step_time_s = pipeline + cp_exposed + pp_exposed + dp_exposed + t_opt + slow
    res.bubble_fraction = float(bubble_fraction(n_micro, pp, v))
    res.comm_time_s = tp_total + tp_hidden + ep_total + cp_total + pp_total + dp_total
    res.comm_exposed_s = tp_total + ep_total + cp_exposed + pp_exposed + dp_exposed
    res.breakdown = {
        "compute": compute_mb * n_micro, "pipeline_bubble": pipeline - t_mb * n_micro,
        "tp_comm": tp_total, "ep_comm": ep_total, "cp_comm_exposed": float(cp_exposed),
        "pp_comm_exposed": float(pp_exposed), "dp_comm_exposed": dp_exposed, "optimizer": t_opt,
        "overlap_slowdown": slow,
    }
    res.dominant = max(res.breakdown, key=lambda k: res.breakdown[k])
    # the op list is one GPU's TP/CP shard of every layer for one micro-batch
    res.hardware_flops_per_step = prof.hw_flops * n_micro * cfg.dp * cfg.tp * cfg.cp
    if cfg.lora.active:  # frozen weights: forward + input gradients; adapters: 3 x forward
        adapter = sum(o.total_flops for o in training_ops(m, cfg, impl)
                      if ".lora_" in o.name and o.kind == "matmul")
        res.model_flops_per_step = (2 * model_fwd + 3 * adapter * cfg.tp * cfg.cp) * \
            gb / cfg.micro_batch
    res.collectives = calls
    res.assumptions = _assumptions(cfg, cluster, eff, overlap, dtype)
    if cfg.lora.active:
        res.assumptions["mfu_convention"] = (
            f"{cfg.lora.finetune}: model FLOPs = 2 x forward of the frozen model (forward + "
            "input gradients; no weight gradients) + 3 x the adapters' forward")
    if not mem.fits:
        res.assumptions["memory_verdict"] = (
            f"does not fit: would need {mem.total_bytes / 1e9:.1f} GB of "
            f"{mem.capacity_bytes / 1e9:.1f} GB usable; timed as if it fit")
    return res


def _recompute_note(cfg: TrainConfig) -> str:
    if cfg.recompute == "full" and cfg.behaviour.recompute_early_stop:
        return ("full, the layer's last linear not rerun (PyTorch non-reentrant checkpoint, "
                "early stop)")
    if cfg.recompute == "selective" and cfg.behaviour.selective == "per-op":
        return ("selective per-op (torchtitan op-level AC): every second matmul of a block "
                "and all its element-wise ops rerun in backward, attention kept")
    if cfg.recompute == "selective" and cfg.behaviour.selective == "matmuls":
        return ("selective, matmul outputs kept (JAX save-dots, LLaMA): the element-wise ops "
                "rerun in backward")
    if cfg.recompute == "selective":
        return "selective: the attention core recomputed (Korthikanti et al. 2022 §5)"
    return cfg.recompute


def _interleaved_note(cfg: TrainConfig, eff: Efficiency) -> str:
    """What an interleaved pipeline changes in the data-parallel overlap
    (estimate.step.interleaved_tail)."""
    if cfg.pp > 1 and cfg.virtual_stages > 1 and (eff.grad_reduce_overlap
                                                  or eff.param_gather_overlap):
        return (f", chunk by chunk over the {cfg.virtual_stages} model chunks of each stage "
                "(Megatron-Core's interleaved schedule)")
    return ""


def _tp_backward_note(cfg: TrainConfig, eff: Efficiency) -> str:
    """What the async backward TP overlap hides (estimate.step.tp_exposed_calls)."""
    if cfg.tp == 1 or not eff.tp_backward_overlap:
        return ""
    return (", backward input-gradient collectives beside the weight-gradient GEMMs"
            + (" (the output-gradient all-gathers of sequence parallelism exposed)"
               if cfg.sp else ""))


def _assumptions(cfg: TrainConfig, cluster: Cluster, eff: Efficiency, overlap: bool,
                 dtype: str) -> dict[str, Any]:
    return {
        "efficiency": eff.describe(), "fused_kernels": cfg.fused, "attention": cfg.attention,
        "overlap": ("DP gradient reduction "
                    f"{'overlaps' if eff.grad_reduce_overlap else 'exposed after'} the last "
                    "micro-batch's backward"
                    f"{_interleaved_note(cfg, eff)}; ZeRO-3 "
                    "gathers overlap each micro-batch as far as the prefetch reaches; CP "
                    "overlaps attention; ZeRO-1/2 parameter gather "
                    f"{'overlaps the first forward' if eff.param_gather_overlap else 'exposed'}; "
                    f"TP collectives {eff.tp_overlap(cfg.sp, cfg.tp):.0%} hidden"
                    f"{_tp_backward_note(cfg, eff)}; EP exposed")
                   if overlap else "none: every collective exposed",
        "links": {"scale_up": cluster.scale_up.model_dump(),
                  "scale_out": cluster.scale_out.model_dump()},
        "gpus_per_node": cluster.gpus_per_node, "nodes": cluster.nodes,
        "devices_per_host": cluster.devices_per_host,
        "mfu_convention": "model FLOPs = 3 x forward matmul FLOPs (attention in full, no "
                          "recompute) / (GPUs x step time x dense peak of the compute dtype)",
        "peak_dtype": "bf16" if dtype == "fp8" else dtype,
        "loss": f"{cfg.behaviour.loss} cross-entropy (memory behaviour {cfg.behaviour.name})"
        if cfg.loss == "auto" else f"{cfg.loss} cross-entropy (--loss)",
        "recompute": _recompute_note(cfg),
        **({"documents": f"packed documents of {cfg.document_len} tokens, attention inside "
                         "each"} if cfg.document_len else {}),
        **({"fp8": f"fp8 matmuls, {cfg.fp8_recipe} scaling ("
                   + ("one scale per tensor, one cast-transpose per tensor" if cfg.fp8_recipe
                      == "tensorwise" else "torchao row-wise: each tensor cast once per GEMM "
                      "orientation, backward GEMM outputs rescaled")
                   + "); MFU is taken against the dense bf16 peak (the usual convention for "
                   "fp8 training)"} if dtype == "fp8" else {}),
    }
