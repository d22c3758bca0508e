"""Training step time, MFU and communication for a model, batch and parallel layout.

Every term is visible:
- compute: the operator roofline of one micro-batch on the slowest pipeline stage (per-GPU
  shards under TP/SP/CP/EP, recompute as extra forward work), fused kernels and FlashAttention
  unless told otherwise;
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

from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.errors import InputError
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
from gpuplan.estimate.partition import stages
from gpuplan.estimate.roofline import roofline
from gpuplan.ops.blocks import DTYPE_BYTES
from gpuplan.ops.op import OpList
from gpuplan.ops.passes import fuse_elementwise
from gpuplan.ops.transformer import (
    BLOCK_ATTN,
    BLOCK_ATTN_WINDOW,
    BLOCK_MLP,
    BLOCK_MOE,
    Impl,
    build_training,
    local_sizes,
)
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec

OPTIMIZER_BYTES_PER_PARAM = {"adamw": 28.0, "adam": 28.0, "sgd": 18.0, "adam8bit": 20.0,
                             "adafactor": 16.0}
"""Bytes an optimizer step reads and writes per local parameter (AdamW, mixed precision: read
fp32 master, 16-bit grad, two fp32 moments; write master, moments and the 16-bit weights)."""


HOST_BYTES_PER_S_PER_GPU = 25e9
"""Host memory bandwidth one GPU's CPU optimizer can use (a 2-socket server's ~200-300 GB/s
shared by 8 GPUs; assumption)."""


def offload_step_time(local_params: float, bpp: dict[str, float], cluster: Cluster) -> float:
    """ZeRO-Offload (Ren et al. 2021): gradients to the host and updated weights back over
    PCIe, the Adam step on the CPU (fp32 master and moments: 28 bytes moved per parameter)."""
    dev = cluster.device
    pcie = dev.pcie.bw_bytes_per_s * 0.8 if dev.pcie else 16e9
    transfer = local_params * (bpp["gradients"] + bpp["weights"]) / pcie
    return transfer + local_params * 28.0 / HOST_BYTES_PER_S_PER_GPU


@dataclass
class StepResult:
    """One training step; times in seconds. `fits` False means not timed (None fields)."""

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
            "fits": self.fits, "gpus": self.gpus, "global_batch": self.global_batch,
            "micro_batches": self.micro_batches, "tokens_per_step": self.tokens_per_step,
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


def check_layout(cfg: TrainConfig, gpus: int, m: ModelSpec) -> None:
    used = cfg.dp * cfg.tp * cfg.pp * cfg.cp
    if used != gpus:
        raise InputError("gpus", gpus, f"dp x tp x pp x cp = {cfg.dp}x{cfg.tp}x{cfg.pp}x{cfg.cp}"
                         f" = {used} (set --dp/--tp/--pp/--cp to multiply to --gpus)")
    if cfg.ep > 1 and (cfg.dp * cfg.cp) % cfg.ep:
        raise InputError("ep", cfg.ep, f"a divisor of dp x cp = {cfg.dp * cfg.cp}")
    if cfg.pp > m.num_layers:
        raise InputError("pp", cfg.pp, f"at most the number of layers ({m.num_layers})")


def _impl(cfg: TrainConfig, fused: bool) -> Impl:
    return Impl(attention=cfg.attention, target="cuda", fused=fused, dtype=cfg.compute_dtype,
                matmul_dtype="fp8" if cfg.precision == "fp8-mixed" else None, tp=cfg.tp,
                sp=cfg.sp, cp=cfg.cp, ep=cfg.ep, recompute=cfg.recompute, dropout=cfg.dropout,
                training_kv_cache=False)


def training_ops(m: ModelSpec, cfg: TrainConfig, impl: Impl) -> OpList:
    """One micro-batch's ops; with fused kernels the element-wise chains are fused as the
    frameworks do (bias+GeLU, bias+dropout+add, add+norm)."""
    ops = lora_ops(build_training(m, cfg.micro_batch, cfg.seq_len, impl), m, cfg)
    return fuse_elementwise(ops)[0] if cfg.fused else ops


def step_time(m: ModelSpec, cluster: Cluster, cfg: TrainConfig,
              efficiency: Efficiency | None = None, overlap: bool = True) -> StepResult:
    """Time one optimizer step of `cfg` on `cluster` (see the module docstring)."""
    gpus = cluster.gpus
    check_layout(cfg, gpus, m)
    device = cluster.device
    gb = cfg.global_batch or cfg.micro_batch * cfg.dp
    if gb % (cfg.micro_batch * cfg.dp):
        raise InputError("global_batch", gb, f"a multiple of micro_batch x dp = "
                                             f"{cfg.micro_batch * cfg.dp}")
    cfg = replace(cfg, global_batch=gb)
    n_micro = gb // (cfg.micro_batch * cfg.dp)
    mem = train_memory(m, device, cfg)
    tokens = gb * cfg.seq_len
    eff = efficiency or training_efficiency(device)
    dtype = "fp8" if cfg.precision == "fp8-mixed" else cfg.compute_dtype
    peak = device.matmul_peak(dtype if dtype != "fp8" else "bf16")
    res = StepResult(fits=mem.fits, memory=mem, gpus=gpus, global_batch=gb,
                     micro_batches=n_micro, tokens_per_step=tokens, peak_flops_per_s=peak)
    model_fwd = flops_summary(m, cfg.micro_batch, cfg.seq_len)["forward_flops"]
    res.model_flops_per_step = 3 * model_fwd * gb / cfg.micro_batch
    if not mem.fits:
        res.assumptions = {"note": "does not fit in memory: not timed"}
        return res

    fused = cfg.fused
    impl = _impl(cfg, fused)
    ops = training_ops(m, cfg, impl)
    rl = roofline(ops, device, eff)
    # seconds per micro-batch of one layer of each block kind, and of the once-only parts
    block_t: dict[str, float] = {}
    for row in rl.rows:
        o = row.op
        key = o.layer if o.per_layer else ("embedding" if o.component == "embedding" else "head")
        per = row.time_s / o.count if o.per_layer else row.time_s
        block_t[str(key)] = block_t.get(str(key), 0.0) + per
    fwd_share = sum(r.time_s for r in rl.rows if r.op.phase == "forward") / rl.total_time_s

    calls: list[dict[str, Any]] = []

    def coll(what: str, op: str, nbytes: float, group: int, local: int) -> float:
        ct = collective_time(op, nbytes, group, cluster, local)
        calls.append({"what": what, "op": op, "bytes": nbytes, "group": group,
                      "time_s": ct.time_s, "algbw_bytes_per_s": ct.algbw_bytes_per_s,
                      "busbw_bytes_per_s": ct.busbw_bytes_per_s, "link": ct.link})
        return ct.time_s

    loc = local_sizes(m, impl, cfg.seq_len)
    e = DTYPE_BYTES[cfg.compute_dtype]
    t_tok = cfg.micro_batch * loc.seq
    act_bytes = t_tok * m.hidden_size * e
    tp_local = min(cfg.tp, cluster.gpus_per_node)
    tp_ar = (coll("tensor parallel, per block", "all_reduce", act_bytes, cfg.tp, tp_local)
             if cfg.tp > 1 else 0.0)
    # attention and MLP blocks: one all-reduce each forward, backward (and recomputed forward)
    ar_per_layer = 2 * (3 if cfg.recompute == "full" else 2)
    ep_local = max(1, min(cfg.ep, cluster.gpus_per_node // max(1, cfg.tp)))
    a2a = (coll("expert parallel dispatch/combine", "all_to_all",
                t_tok * m.experts_per_token * m.hidden_size * e, cfg.ep, ep_local)
           if m.is_moe and cfg.ep > 1 else 0.0)

    stage_times = []
    stage_comm = []
    for st in stages(m, cfg.tp, cfg.pp, cfg.ep):
        n_win = st.sliding_layers
        t = (n_win * block_t.get(BLOCK_ATTN_WINDOW, 0.0)
             + (st.layers - n_win) * block_t.get(BLOCK_ATTN, 0.0)
             + st.dense_layers * block_t.get(BLOCK_MLP, 0.0)
             + st.moe_layers * block_t.get(BLOCK_MOE, 0.0))
        t += block_t.get("embedding", 0.0) if st.has_embedding else 0.0
        t += block_t.get("head", 0.0) if st.has_head else 0.0
        comm = st.layers * ar_per_layer * tp_ar if cfg.tp > 1 else 0.0
        comm += st.moe_layers * 4 * a2a
        stage_times.append(t)
        stage_comm.append(comm)
    slowest = max(range(cfg.pp), key=lambda i: stage_times[i] + stage_comm[i])
    t_mb = stage_times[slowest] + stage_comm[slowest]
    compute_mb = stage_times[slowest]

    # pipeline schedule
    p, v = cfg.pp, cfg.virtual_stages
    if p > 1:
        pipeline = n_micro * t_mb + (p - 1) * t_mb / v
        bubble = (p - 1) / v / (n_micro + (p - 1) / v)
    else:
        pipeline = n_micro * t_mb
        bubble = 0.0

    # context parallel: K/V all-gather + gradient reduce-scatter per layer, overlapped
    cp_exposed = cp_total = 0.0
    if cfg.cp > 1:
        kv = t_tok * cfg.cp * 2 * loc.kv_heads * m.head_size * e
        cp_local = max(1, min(cfg.cp, cluster.gpus_per_node // max(1, cfg.tp)))
        per_layer = (coll("context parallel K/V, per layer", "all_gather", kv, cfg.cp, cp_local)
                     + coll("context parallel dK/dV, per layer", "reduce_scatter", kv, cfg.cp,
                            cp_local))
        attn_core = sum(r.time_s for r in rl.rows if r.op.kind == "attention") / m.num_layers
        layers = stages(m, cfg.tp, cfg.pp, cfg.ep)[slowest].layers
        cp_total = per_layer * layers * n_micro
        cp_exposed = max(0.0, per_layer - attn_core) * layers * n_micro if overlap else cp_total

    # pipeline point-to-point: activations forward, gradients backward; fill/drain exposed
    pp_total = pp_exposed = 0.0
    if p > 1:
        pp_local = 1 if cfg.tp * cfg.dp * cfg.cp >= cluster.gpus_per_node else 2
        t_p2p = coll("pipeline activations, per micro-batch", "send_recv", act_bytes, 2, pp_local)
        pp_total = 2 * t_p2p * n_micro * (p - 1) / p * v
        pp_exposed = 2 * (p - 1) * t_p2p if overlap else pp_total

    # data parallel
    st0 = stages(m, cfg.tp, cfg.pp, cfg.ep)[slowest]
    bpp = state_bytes_per_param(cfg)
    grad_bytes = st0.params * bpp["gradients"]
    w_bytes = st0.params * bpp["weights"]
    opt_params = st0.params
    if cfg.lora.active:  # LoRA/QLoRA: only the adapters have gradients and optimizer states
        lw, _, _, ld = lora_states(m, replace(cfg, zero=0, fsdp="none"), st0)
        opt_params = ld["trainable_params"]
        grad_bytes = opt_params * cfg.lora.adapter_bytes
        w_bytes = lw
    dp_group = cfg.dp * cfg.cp
    dp_local = max(1, cluster.gpus_per_node // (cfg.tp * cfg.cp)) if cfg.tp * cfg.cp < \
        cluster.gpus_per_node else 1
    z = cfg.zero_stage
    dp_total = dp_exposed = 0.0
    bwd_mb = compute_mb * (1 - fwd_share)
    fwd_mb = compute_mb * fwd_share
    if dp_group > 1:
        if z == 0:
            dp_total = coll("data parallel gradients", "all_reduce", grad_bytes, dp_group, dp_local)
            dp_exposed = max(0.0, dp_total - bwd_mb) if overlap else dp_total
        elif z in (1, 2):
            rs = coll("data parallel gradients", "reduce_scatter", grad_bytes, dp_group, dp_local)
            ag = coll("updated parameters", "all_gather", w_bytes, dp_group, dp_local)
            dp_total = rs + ag
            dp_exposed = (max(0.0, rs - bwd_mb) + ag) if overlap else dp_total
        else:
            ag = coll("ZeRO-3 parameters, per micro-batch and pass", "all_gather", w_bytes,
                      cfg.shard_group, min(dp_local, cfg.shard_group))
            rs = coll("ZeRO-3 gradients, per micro-batch", "reduce_scatter", grad_bytes,
                      cfg.shard_group, min(dp_local, cfg.shard_group))
            per_mb = 2 * ag + rs
            dp_total = per_mb * n_micro
            exposed_mb = max(0.0, ag - fwd_mb) + max(0.0, ag + rs - bwd_mb)
            dp_exposed = exposed_mb * n_micro if overlap else dp_total
            if cfg.fsdp == "hybrid" and cfg.dp > cfg.shard_group:
                ar = coll("hybrid-shard replica gradients", "all_reduce",
                          grad_bytes / cfg.shard_group, cfg.dp // cfg.shard_group, 1)
                dp_total += ar
                dp_exposed += ar

    # optimizer step over the local shard (memory-bound)
    shard = cfg.shard_group if z >= 1 else 1
    opt_bytes = opt_params / shard * OPTIMIZER_BYTES_PER_PARAM[cfg.optimizer]
    t_opt = (offload_step_time(opt_params / shard, bpp, cluster) if cfg.offload_optimizer
             else opt_bytes / (device.mem_bw_bytes_per_s * eff.memory(opt_bytes)))

    tp_total = (stage_comm[slowest] - st0.moe_layers * 4 * a2a) * n_micro
    ep_total = st0.moe_layers * 4 * a2a * n_micro
    step = pipeline + cp_exposed + pp_exposed + dp_exposed + t_opt
    res.step_time_s = step
    res.bubble_fraction = bubble
    res.comm_time_s = tp_total + ep_total + cp_total + pp_total + dp_total
    res.comm_exposed_s = tp_total + ep_total + cp_exposed + pp_exposed + dp_exposed
    res.breakdown = {
        "compute": compute_mb * n_micro, "pipeline_bubble": pipeline - t_mb * n_micro,
        "tp_comm": tp_total, "ep_comm": ep_total, "cp_comm_exposed": cp_exposed,
        "pp_comm_exposed": pp_exposed, "dp_comm_exposed": dp_exposed, "optimizer": t_opt,
    }
    res.dominant = max(res.breakdown, key=lambda k: res.breakdown[k])
    # the op list is one GPU's TP/CP shard of every layer for one micro-batch
    res.hardware_flops_per_step = ops.flops(matmul_only=True) * n_micro * cfg.dp * cfg.tp * cfg.cp
    if cfg.lora.active:  # frozen weights: forward + input gradients, adapters: 3 x forward
        adapter = sum(o.total_flops for o in ops if ".lora_" in o.name and o.kind == "matmul")
        res.model_flops_per_step = (2 * model_fwd + 3 * adapter * cfg.tp * cfg.cp) * \
            gb / cfg.micro_batch
    res.collectives = calls
    res.assumptions = {
        "efficiency": eff.describe(), "fused_kernels": fused, "attention": cfg.attention,
        "overlap": ("DP gradient reduction overlaps the last micro-batch's backward; ZeRO-3 "
                    "gathers overlap each micro-batch; CP overlaps attention; TP and EP "
                    "collectives are exposed") if overlap else "none: every collective exposed",
        "links": {"scale_up": cluster.scale_up.model_dump(),
                  "scale_out": cluster.scale_out.model_dump()},
        "gpus_per_node": cluster.gpus_per_node, "nodes": cluster.nodes,
        "mfu_convention": "model FLOPs = 3 x forward matmul FLOPs (attention in full, no "
                          "recompute) / (GPUs x step time x dense peak of the compute dtype)",
        "peak_dtype": dtype,
    }
    if cfg.lora.active:
        res.assumptions["mfu_convention"] = (
            f"{cfg.lora.finetune}: model FLOPs = 2 x forward of the frozen model (forward + "
            "input gradients; no weight gradients) + 3 x the adapters' forward")
    return res
