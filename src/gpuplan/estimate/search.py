"""Search every valid parallel layout for a GPU count and rank those that fit.

A layout is (tp, cp, ep, recompute, micro-batch) x (pp, ZeRO stage, virtual stages), dp being
the rest. The expensive part, the operator roofline of one micro-batch, depends only on the
first five; it is built once per such group. Everything else (pipeline schedule, memory per
stage, data-parallel and pipeline communication, optimizer) is evaluated with numpy over all
(pp, ZeRO, v) of the group at once, with the same formulas as `training.step_time`. The top
layouts are then re-timed with `step_time` itself, so what is printed comes from the
reference model.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuplan.estimate.comm import collective_time
from gpuplan.estimate.efficiency import Efficiency, training_efficiency
from gpuplan.estimate.memory import (
    CUDA_CONTEXT_BYTES,
    DDP_BUCKET_BYTES,
    NCCL_BYTES,
    OFFLOAD_BUCKET_ELEMENTS,
    Recompute,
    TrainConfig,
    _saved_per_block,
    stage_activation_bytes,
    state_bytes_per_param,
)
from gpuplan.estimate.memory_peak import FP32_LOSS_BACKWARD_BYTES
from gpuplan.estimate.partition import Stage, stages
from gpuplan.estimate.roofline import roofline
from gpuplan.estimate.training import (
    OPTIMIZER_BYTES_PER_PARAM,
    StepResult,
    _impl,
    offload_step_time,
    step_time,
    training_ops,
)
from gpuplan.ops.blocks import DTYPE_BYTES
from gpuplan.ops.transformer import (
    BLOCK_ATTN,
    BLOCK_ATTN_WINDOW,
    BLOCK_MLP,
    BLOCK_MOE,
    build_training,
    local_sizes,
)
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec

MICRO_BATCHES = (1, 2, 4, 8, 16, 32)
RECOMPUTES: tuple[Recompute, ...] = ("none", "selective", "full")


@dataclass
class SearchResult:
    evaluated: int
    fitting: int
    seconds: float
    ranked: list[tuple[TrainConfig, StepResult]]
    objective: str
    fast_estimates: list[tuple[float, float]]
    """vectorised (step time, memory bytes) of each ranked layout (checked in tests against
    step_time and train_memory)"""

    @property
    def layouts_per_s(self) -> float:
        return self.evaluated / self.seconds if self.seconds else float("inf")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _group_profile(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, eff: Efficiency,
                   saved_cache: dict[tuple[int, ...], dict[str, Any]],
                   time_cache: dict[tuple[object, ...], Any]) -> dict[str, Any]:
    """Per-micro-batch compute of one layer of each block kind, and what it saves.

    Full recomputation is derived from the no-recompute profile of the same group (it adds
    each layer's forward once more in backward and keeps only the layer inputs), which is
    exactly what the builder emits; it halves the op lists a search builds."""
    impl = _impl(cfg, cfg.fused)
    cache_key = (cfg.tp, cfg.cp, cfg.ep, cfg.micro_batch)
    loc = local_sizes(m, impl, cfg.seq_len)
    e = DTYPE_BYTES[cfg.compute_dtype]
    base = saved_cache.get(cache_key) if cfg.recompute == "full" else None
    block_t: dict[str, float]
    if base is not None:
        block_t = {k: v + base["block_fwd"].get(k, 0.0) for k, v in base["block_t"].items()}
        total = base["total"] + base["layer_fwd_total"]
        fwd_share = base["fwd_total"] / total
        attn_all = base["attn_all"] + base["attn_fwd"]
        checkpoint = cfg.micro_batch * loc.seq * loc.rep * m.hidden_size * e
        saved = {k: (checkpoint if k in (BLOCK_ATTN, BLOCK_ATTN_WINDOW) else 0.0)
                 if k.startswith("layer") else v for k, v in base["saved"].items()}
        full = base["saved"]
        hw_flops = base["hw_flops"] + base["layer_fwd_flops"]
    else:
        ops = training_ops(m, cfg, impl)
        rl = roofline(ops, cluster.device, eff, time_cache)
        block_t = {}
        block_fwd: dict[str, float] = {}
        layer_fwd_total = fwd_total = attn_all = attn_fwd = layer_fwd_flops = 0.0
        for row in rl.rows:
            o = row.op
            key = str(o.layer if o.per_layer else ("embedding" if o.component == "embedding"
                                                   else "head"))
            per = row.time_s / o.count if o.per_layer else row.time_s
            block_t[key] = block_t.get(key, 0.0) + per
            if o.phase == "forward":
                fwd_total += row.time_s
                if o.per_layer:
                    block_fwd[key] = block_fwd.get(key, 0.0) + per
                    layer_fwd_total += row.time_s
                    if o.kind in ("matmul", "attention", "conv"):
                        layer_fwd_flops += o.total_flops
                if o.kind == "attention":
                    attn_fwd += row.time_s
            if o.kind == "attention":
                attn_all += row.time_s
        total = rl.total_time_s
        fwd_share = fwd_total / total
        saved = _saved_per_block(ops)
        hw_flops = ops.flops(matmul_only=True)
        if cfg.recompute == "none":
            saved_cache[cache_key] = {
                "block_t": block_t, "block_fwd": block_fwd, "total": total,
                "fwd_total": fwd_total, "layer_fwd_total": layer_fwd_total,
                "attn_all": attn_all, "attn_fwd": attn_fwd, "saved": saved,
                "hw_flops": hw_flops, "layer_fwd_flops": layer_fwd_flops}
            full = saved
        else:
            full = _saved_per_block(build_training(m, cfg.micro_batch, cfg.seq_len,
                                                   replace(impl, recompute="none")))
    t_tok = cfg.micro_batch * loc.seq
    act_bytes = t_tok * m.hidden_size * e
    tp_ar = collective_time("all_reduce", act_bytes, cfg.tp, cluster,
                            min(cfg.tp, cluster.gpus_per_node)).time_s if cfg.tp > 1 else 0.0
    ep_local = max(1, min(cfg.ep, cluster.gpus_per_node // max(1, cfg.tp)))
    a2a = (collective_time("all_to_all", t_tok * m.experts_per_token * m.hidden_size * e,
                           cfg.ep, cluster, ep_local).time_s if m.is_moe and cfg.ep > 1 else 0.0)
    cp_layer = 0.0
    if cfg.cp > 1:
        kv = t_tok * cfg.cp * 2 * loc.kv_heads * m.head_size * e
        cp_local = max(1, min(cfg.cp, cluster.gpus_per_node // max(1, cfg.tp)))
        cp_layer = (collective_time("all_gather", kv, cfg.cp, cluster, cp_local).time_s
                    + collective_time("reduce_scatter", kv, cfg.cp, cluster, cp_local).time_s)
    attn_core = attn_all / m.num_layers
    layer_full = max((v for k, v in full.items() if k.startswith("layer")), default=0.0)
    widest = max(m.intermediate_size * (2 if m.mlp == "gated" else 1) // cfg.tp, m.hidden_size)
    return {"block_t": block_t, "fwd_share": fwd_share, "saved": saved, "tp_ar": tp_ar,
            "a2a": a2a, "cp_layer": cp_layer, "attn_core": attn_core, "act_bytes": act_bytes,
            "hw_flops": hw_flops, "t_tok": t_tok, "vocab": loc.vocab,
            "e": e, "working": 2 * t_tok * widest * e + (
                layer_full if cfg.recompute == "full" else 0.0)}


@dataclass(frozen=True)
class _StageTable:
    """Per-stage layer counts and parameters of one (tp, pp, ep) split, as arrays."""

    layers: np.ndarray
    dense: np.ndarray
    moe: np.ndarray
    sliding: np.ndarray
    emb: np.ndarray
    head: np.ndarray
    params: np.ndarray
    first: Any
    last: Any


def _stage_table(m: ModelSpec, tp: int, pp: int, ep: int) -> _StageTable:
    sts = stages(m, tp, pp, ep)

    def col(f: Callable[[Stage], float]) -> np.ndarray:
        return np.array([f(s) for s in sts], dtype=float)

    return _StageTable(col(lambda s: s.layers), col(lambda s: s.dense_layers),
                       col(lambda s: s.moe_layers), col(lambda s: s.sliding_layers),
                       col(lambda s: s.has_embedding), col(lambda s: s.has_head),
                       col(lambda s: s.params), sts[0], sts[-1])


def search(m: ModelSpec, cluster: Cluster, base: TrainConfig, objective: str = "throughput",
           top: int = 10, efficiency: Efficiency | None = None,
           micro_batches: tuple[int, ...] = MICRO_BATCHES) -> SearchResult:
    """Rank every valid layout of `cluster.gpus` GPUs for `base`'s model, sequence length,
    precision and global batch by tokens/s (or by cost, which ranks the same on a fixed GPU
    count: reported for both)."""
    t0 = time.perf_counter()
    gpus, gpn = cluster.gpus, cluster.gpus_per_node
    device = cluster.device
    eff = efficiency or training_efficiency(device)
    gb = base.global_batch or gpus * base.micro_batch
    heads, kv, L = m.num_heads, m.kv_heads, m.num_layers
    tps = [t for t in _divisors(gpus) if t <= gpn and heads % t == 0 and (kv % t == 0 or t % kv
                                                                         == 0)]
    cps = [c for c in (1, 2, 4, 8) if c == 1 or (gpus % c == 0 and base.seq_len % c == 0
                                                 and base.seq_len // c >= 512)]
    eps = [x for x in _divisors(m.num_experts) if gpus % x == 0] if m.is_moe else [1]
    # selective recomputation only drops the s^2 tensors of naive attention
    rcs = [r for r in RECOMPUTES if r != "selective" or base.attention == "naive"]
    bpp = state_bytes_per_param(base)
    tables: dict[tuple[int, int, int], _StageTable] = {}
    saved_cache: dict[tuple[int, ...], dict[str, Any]] = {}
    time_cache: dict[tuple[object, ...], Any] = {}
    cases: list[dict[str, Any]] = []
    for tp, cp, ep, rc, mb in itertools.product(tps, cps, eps, rcs, micro_batches):
        if gpus % (tp * cp):
            continue
        rest = gpus // (tp * cp)
        pps = [p for p in _divisors(rest) if p <= L and gb % (mb * (rest // p)) == 0
               and (ep == 1 or ((rest // p) * cp) % ep == 0)]
        if not pps:
            continue
        g = replace(base, tp=tp, cp=cp, ep=ep, sp=tp > 1, recompute=rc, micro_batch=mb,
                    global_batch=gb, dp=1, pp=1, zero=0, fsdp="none", virtual_stages=1,
                    offload_optimizer=False)
        prof = _group_profile(m, cluster, g, eff, saved_cache, time_cache)
        bt = prof["block_t"]
        ar = 2 * (3 if rc == "full" else 2)
        for pp in pps:
            tab = tables.get((tp, pp, ep))
            if tab is None:
                tab = tables[(tp, pp, ep)] = _stage_table(m, tp, pp, ep)
            compute = ((tab.layers - tab.sliding) * bt.get(BLOCK_ATTN, 0.0)
                       + tab.sliding * bt.get(BLOCK_ATTN_WINDOW, 0.0)
                       + tab.dense * bt.get(BLOCK_MLP, 0.0) + tab.moe * bt.get(BLOCK_MOE, 0.0)
                       + tab.emb * bt.get("embedding", 0.0) + tab.head * bt.get("head", 0.0))
            comm = tab.layers * ar * prof["tp_ar"] + tab.moe * 4 * prof["a2a"]
            i = int(np.argmax(compute + comm))
            cases.append({"g": g, "prof": prof, "pp": pp, "dp": rest // pp, "tab": tab,
                          "t_mb": float(compute[i] + comm[i]), "compute_mb": float(compute[i]),
                          "slow_params": float(tab.params[i]),
                          "slow_layers": float(tab.layers[i])})
    z, v, idx = [], [], []
    for k, c in enumerate(cases):
        pp, dp = c["pp"], c["dp"]
        for zz in ([0, 1, 2, 3] if dp * c["g"].cp > 1 else [0]):
            # interleaved schedule: v virtual chunks of the stage's layers (Narayanan 2021 §2.2)
            for vv in range(1, 9):
                if vv == 1 or (pp > 1 and L % (pp * vv) == 0):
                    for off in ((False, True) if zz >= 1 else (False,)):
                        z.append(zz)
                        v.append(vv)
                        idx.append((k, off))
    t, mem = _evaluate_all(m, cluster, cases, np.array(z), np.array(v),
                           np.array([o for _, o in idx]), np.array([k for k, _ in idx]), bpp,
                           eff)
    fits = mem <= device.capacity_bytes
    order = np.argsort(np.where(fits, t, np.inf))
    candidates = []
    for j in order[: max(top * 3, top)]:
        if not fits[j]:
            break
        c = cases[idx[j][0]]
        candidates.append((replace(c["g"], dp=c["dp"], pp=c["pp"], zero=int(z[j]),
                                   virtual_stages=int(v[j]), offload_optimizer=bool(idx[j][1])),
                           (float(t[j]), float(mem[j]))))
    elapsed = time.perf_counter() - t0
    timed = [(cfg, step_time(m, cluster, cfg, eff), fast) for cfg, fast in candidates]
    timed.sort(key=lambda r: r[1].step_time_s or float("inf"))
    timed = timed[:top]
    return SearchResult(len(z), int(fits.sum()), elapsed, [(c, s) for c, s, _ in timed],
                        objective, [f for _, _, f in timed])


def _evaluate_all(m: ModelSpec, cluster: Cluster, cases: list[dict[str, Any]], z: np.ndarray,
                  v: np.ndarray, off: np.ndarray, k: np.ndarray, bpp: dict[str, float],
                  eff: Efficiency) -> tuple[np.ndarray, np.ndarray]:
    """Step time and peak memory of every layout row: step_time's and train_memory's
    formulas."""
    device = cluster.device
    gpn = cluster.gpus_per_node
    # per-case scalars (collectives depend on sizes and groups, not on z or v)
    n = len(cases)
    col = {name: np.zeros(n) for name in (
        "t_mb", "fwd", "bwd", "cp", "pp_exp", "ar", "rs", "ag", "group", "params", "pp",
        "n_micro", "mem_fixed_first", "mem_fixed_last", "act_first", "act_last",
        "p_first", "p_last", "t_first", "t_last", "layer_params", "dp", "frag", "dyn_first",
        "dyn_last", "offload")}
    for i, c in enumerate(cases):
        g, prof, pp, dp = c["g"], c["prof"], c["pp"], c["dp"]
        n_micro = g.global_batch // (g.micro_batch * dp)
        fwd = c["compute_mb"] * prof["fwd_share"]
        group = dp * g.cp
        local = max(1, gpn // (g.tp * g.cp)) if g.tp * g.cp < gpn else 1
        grad_b, w_b = c["slow_params"] * bpp["gradients"], c["slow_params"] * bpp["weights"]
        col["t_mb"][i], col["fwd"][i], col["bwd"][i] = c["t_mb"], fwd, c["compute_mb"] - fwd
        col["n_micro"][i], col["pp"][i], col["group"][i], col["dp"][i] = n_micro, pp, group, dp
        col["params"][i] = c["slow_params"]
        if g.cp > 1:
            col["cp"][i] = max(0.0, prof["cp_layer"] - prof["attn_core"]) * c["slow_layers"] \
                * n_micro
        if pp > 1:
            pp_local = 1 if g.tp * dp * g.cp >= gpn else 2
            col["pp_exp"][i] = 2 * (pp - 1) * collective_time(
                "send_recv", prof["act_bytes"], 2, cluster, pp_local).time_s
        if group > 1:
            col["ar"][i] = collective_time("all_reduce", grad_b, group, cluster, local).time_s
            col["rs"][i] = collective_time("reduce_scatter", grad_b, group, cluster,
                                           local).time_s
            col["ag"][i] = collective_time("all_gather", w_b, group, cluster, local).time_s
        col["offload"][i] = offload_step_time(c["slow_params"], bpp, cluster)
        tab = c["tab"]
        for name, st in (("first", tab.first), ("last", tab.last)):
            col[f"act_{name}"][i] = stage_activation_bytes(m, st, prof["saved"])
            col[f"p_{name}"][i] = st.params
            held = float(min(pp - st.index, max(n_micro, 1))) if pp > 1 else 1.0
            col[f"t_{name}"][i] = held
            dyn = max(prof["working"], prof["t_tok"] * prof["vocab"] * FP32_LOSS_BACKWARD_BYTES
                      if st.has_head else 0.0)
            col[f"dyn_{name}"][i] = dyn
            col[f"mem_fixed_{name}"][i] = dyn + CUDA_CONTEXT_BYTES * (device.kind != "cpu") + (
                NCCL_BYTES if max(dp, g.tp, pp, g.cp, g.ep) > 1 else 0.0)
        col["layer_params"][i] = (m.attention_params() + max(
            m.mlp_params(), m.moe_params() if m.is_moe else 0)) / g.tp
        col["frag"][i] = g.fragmentation
    x = {name: a[k] for name, a in col.items()}
    pp = x["pp"]
    pipeline = x["n_micro"] * x["t_mb"] + np.where(pp > 1, (pp - 1) * x["t_mb"] / v, 0.0)
    z3 = (np.maximum(0.0, x["ag"] - x["fwd"]) + np.maximum(0.0, x["ag"] + x["rs"] - x["bwd"])) \
        * x["n_micro"]
    dp_exp = np.where(x["group"] > 1, np.select(
        [z == 0, z < 3], [np.maximum(0.0, x["ar"] - x["bwd"]),
                          np.maximum(0.0, x["rs"] - x["bwd"]) + x["ag"]], z3), 0.0)
    group = np.maximum(x["group"], 1)
    shard = np.where(z >= 1, group, 1)
    opt_b = x["params"] / shard * OPTIMIZER_BYTES_PER_PARAM[cases[0]["g"].optimizer]
    mem_eff = np.interp(np.log10(np.maximum(opt_b, 1.0)), [5, 6, 7, 8], [0.3, 0.6, 0.75, 0.9]) \
        / 0.9 * eff.memory_ceiling if eff.size_dependent else eff.memory_ceiling
    t_opt = np.where(off, x["offload"] / shard,
                     opt_b / (device.mem_bw_bytes_per_s * mem_eff))
    t = pipeline + x["cp"] + x["pp_exp"] + dp_exp + t_opt
    adam = cases[0]["g"].optimizer in ("adam", "adamw")
    mem = np.zeros(len(z))
    for name in ("first", "last"):
        p = x[f"p_{name}"]
        tensors = m.param_tensors() * p / m.params()
        w = p * bpp["weights"] / np.where(z >= 3, group, 1)
        gr = np.where(off & (z >= 2), 0.0, p * bpp["gradients"] / np.where(z >= 2, group, 1))
        o = np.where(off, 0.0, (p * bpp["optimizer"] + (tensors * 4 if adam else 0))
                     / np.where(z >= 1, group, 1))
        inflight = np.where(pp > 1, x[f"t_{name}"] * np.where(v > 1, 1 + (pp - 1) / (pp * v),
                                                              1.0), 1.0)
        a = x[f"act_{name}"] * inflight
        other = x[f"mem_fixed_{name}"] + np.select(
            [z >= 3, off & (z == 2), x["dp"] > 1],
            [x["layer_params"] * (2 * bpp["weights"] + bpp["gradients"]),
             np.minimum(OFFLOAD_BUCKET_ELEMENTS, p) * bpp["gradients"], 2 * DDP_BUCKET_BYTES],
            0.0)
        other = other + x["frag"] * (a + x[f"dyn_{name}"])
        mem = np.maximum(mem, w + gr + o + a + other)
    return t, mem


def result_json(r: SearchResult) -> dict[str, Any]:
    rows = []
    for cfg, s in r.ranked:
        rows.append({"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp, "ep": cfg.ep,
                     "zero": cfg.zero, "virtual_stages": cfg.virtual_stages,
                     "recompute": cfg.recompute, "micro_batch": cfg.micro_batch,
                     "sequence_parallel": cfg.sp, "step_time_s": s.step_time_s,
                     "tokens_per_s": s.tokens_per_s, "mfu": s.mfu,
                     "memory_bytes": s.memory.total_bytes, "dominant": s.dominant,
                     "breakdown_s": s.breakdown, "why": why(cfg, s)})
    return {"evaluated": r.evaluated, "fitting": r.fitting, "search_seconds": r.seconds,
            "layouts_per_s": r.layouts_per_s, "objective": r.objective, "top": rows}


def why(cfg: TrainConfig, s: StepResult) -> str:
    """One line on why a layout ranks where it does."""
    b = s.breakdown
    step = s.step_time_s or 1.0
    parts = [f"compute {b.get('compute', 0) / step:.0%}"]
    for k in ("tp_comm", "pipeline_bubble", "dp_comm_exposed", "ep_comm", "cp_comm_exposed"):
        if b.get(k, 0) / step >= 0.02:
            parts.append(f"{k.replace('_', ' ')} {b[k] / step:.0%}")
    if cfg.recompute != "none":
        parts.append(f"{cfg.recompute} recompute to fit")
    return ", ".join(parts)
