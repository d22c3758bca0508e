"""Search every valid parallel layout for a GPU count and rank those that fit.

A layout is (tp, cp, ep, recompute, micro-batch) x (pp, ZeRO stage, virtual stages), dp being
the rest. The expensive part, the operator roofline of one micro-batch, depends only on the
first five; it is built once per such group. Everything else (pipeline schedule, memory per
stage, data-parallel and pipeline communication, optimizer) is evaluated with numpy over all
(pp, ZeRO, v, offload) of the group at once, calling the very term functions that
`training.step_time` and `memory.train_memory` sum (`estimate.step`, `memory.stage_memory`),
with numpy arrays instead of floats. The top layouts are then re-timed with `step_time`
itself for their full results; the times agree to the last digit.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuplan.estimate.comm import collective_time
from gpuplan.estimate.efficiency import Efficiency, Retime, training_efficiency
from gpuplan.estimate.memory import (
    Layout,
    MemoryProfile,
    StageFacts,
    memory_profile,
    not_out_of_memory,
    saved_per_block,
    stage_facts,
    stage_memory,
    stage_total,
    state_bytes_per_param,
)
from gpuplan.estimate.partition import Stage, stages
from gpuplan.estimate.step import (
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
from gpuplan.estimate.training import (
    BlockProfile,
    Coll,
    GroupComm,
    StepResult,
    dp_collectives,
    dp_local,
    full_recompute_derivable,
    group_comm,
    pp_local,
    reduce_bytes_per_param,
    step_time,
    timing_profile,
    with_full_recompute,
)
from gpuplan.ops.impl import train_impl
from gpuplan.ops.transformer import build_training
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.memory_behaviour import MEMORY_BAND
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import Recompute, TrainConfig

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
    expert: np.ndarray
    first: Stage
    last: Stage


def _stage_table(m: ModelSpec, tp: int, pp: int, ep: int) -> _StageTable:
    sts = stages(m, tp, pp, ep)

    def col(f: Callable[[Stage], float]) -> np.ndarray:
        return np.array([f(s) for s in sts], dtype=float)

    return _StageTable(col(lambda s: s.layers), col(lambda s: s.dense_layers),
                       col(lambda s: s.moe_layers), col(lambda s: s.sliding_layers),
                       col(lambda s: s.has_embedding), col(lambda s: s.has_head),
                       col(lambda s: s.params), col(lambda s: s.expert_params), sts[0],
                       sts[-1])


@dataclass(frozen=True)
class _Group:
    """One (tp, cp, ep, recompute, micro-batch) group: its job, block times and memory."""

    cfg: TrainConfig
    prof: BlockProfile
    mem: MemoryProfile
    comm: GroupComm


def _group(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, eff: Efficiency,
           time_cache: dict[tuple[object, ...], Any],
           done: dict[tuple[int, ...], tuple[BlockProfile, MemoryProfile]]) -> _Group:
    """The same timing profile, memory profile and collectives as `step_time` and
    `train_memory`; `done` keeps each group's no-recompute profiles, from which full
    recomputation's timing is derived as `step_time` derives it."""
    impl = train_impl(cfg, cluster.device.kind)
    key = (cfg.tp, cfg.cp, cfg.ep, cfg.micro_batch)
    base = done.get(key) if cfg.recompute == "full" else None
    if base is not None and full_recompute_derivable(m, cfg):
        prof = with_full_recompute(m, base[0], impl.recompute_early_stop)
        mem = memory_profile(m, cfg, impl, base[1].per_block)
    elif cfg.recompute == "full":  # with dropout the recomputed forward is built, as in
        prof = timing_profile(m, cfg, impl, cluster.device, eff, time_cache)  # step_time
        mem = memory_profile(m, cfg, impl, base[1].per_block if base else None)
    else:
        ops = build_training(m, cfg.micro_batch, cfg.seq_len, impl)
        prof = timing_profile(m, cfg, impl, cluster.device, eff, time_cache, ops)
        mem = memory_profile(m, cfg, impl, saved_per_block(ops))
        if cfg.recompute == "none":
            done[key] = (prof, mem)
    return _Group(cfg, prof, mem,
                  group_comm(m, cfg, impl, cluster.gpus_per_node, _plain(cluster),
                             eff.tp_overlap(cfg.sp, cfg.tp)))


def _plain(cluster: Cluster, memo: dict[tuple[object, ...], float] | None = None) -> Coll:
    """collective_time's seconds, remembered per (op, bytes, group, local) in `memo`."""
    memo = {} if memo is None else memo

    def coll(what: str, op: str, nbytes: float, group: int, local: int) -> float:
        key = (op, nbytes, group, local)
        if key not in memo:
            memo[key] = collective_time(op, nbytes, group, cluster, local).time_s
        return memo[key]
    return coll


def _groups(m: ModelSpec, cluster: Cluster, base: TrainConfig, gb: int, eff: Efficiency,
            micro_batches: tuple[int, ...]) -> list[tuple[_Group, list[int]]]:
    """Every valid group with its pipeline depths (dp being the rest)."""
    gpus, gpn, L = cluster.gpus, cluster.gpus_per_node, m.num_layers
    heads, kv = m.num_heads, m.kv_heads
    tps = [t for t in _divisors(gpus) if t <= gpn and heads % t == 0 and (kv % t == 0 or t % kv
                                                                         == 0)]
    cps = [c for c in (1, 2, 4, 8) if c == 1 or (gpus % c == 0 and base.seq_len % c == 0
                                                 and base.seq_len // c >= 512)]
    eps = [x for x in _divisors(m.num_experts) if gpus % x == 0] if m.is_moe else [1]
    # selective recomputation only drops the s^2 tensors of naive attention
    rcs = [r for r in RECOMPUTES if r != "selective" or base.attention == "naive"]
    time_cache: dict[tuple[object, ...], Any] = {}
    done: dict[tuple[int, ...], tuple[BlockProfile, MemoryProfile]] = {}
    out = []
    for tp, cp, ep, rc, mb in itertools.product(tps, cps, eps, rcs, micro_batches):
        if gpus % (tp * cp):
            continue
        rest = gpus // (tp * cp)
        pps = [p for p in _divisors(rest) if p <= L and gb % (mb * (rest // p)) == 0
               and (ep == 1 or ((rest // p) * cp) % ep == 0)]
        if pps:
            g = replace(base, tp=tp, cp=cp, ep=ep, etp=None, sp=tp > 1, recompute=rc,
                        micro_batch=mb,
                        global_batch=gb, dp=1, pp=1, zero=0, fsdp="none", virtual_stages=1,
                        offload_optimizer=False)
            out.append((_group(m, cluster, g, eff, time_cache, done), pps))
    return out


def _case(m: ModelSpec, cluster: Cluster, grp: _Group, pp: int, eff: Efficiency,
          tables: dict[tuple[int, int, int], _StageTable],
          memo: dict[tuple[object, ...], float]) -> dict[str, Any]:
    """Per-(group, pp) scalars: the slowest stage's micro-batch, collectives by ZeRO stage,
    and the memory facts of the first and last stage."""
    g, gpn = grp.cfg, cluster.gpus_per_node
    dp = cluster.gpus // (g.tp * g.cp * pp)
    tab = tables.get((g.tp, pp, g.ep))
    if tab is None:
        tab = tables[(g.tp, pp, g.ep)] = _stage_table(m, g.tp, pp, g.ep)
    compute = stage_compute(grp.prof.block_t, tab.layers, tab.sliding, tab.dense, tab.moe,
                            tab.emb, tab.head)
    comm = stage_comm(tab.layers, tab.moe, tp_exposed_calls(g.recompute, eff.tp_backward_overlap, g.sp),
                      grp.comm.tp_ar, grp.comm.a2a)
    i = int(np.argmax(compute + comm))
    coll = _plain(cluster, memo)
    bpp, params = reduce_bytes_per_param(g), float(tab.params[i])
    ar = dp_collectives(0, dp, g.cp, g.tp, dp * g.cp, bpp, params, gpn, coll)[0]
    rs, ag = dp_collectives(1, dp, g.cp, g.tp, dp * g.cp, bpp, params, gpn, coll)[1:3]
    rs3, ag3 = dp_collectives(3, dp, g.cp, g.tp, dp * g.cp, bpp, params, gpn, coll)[3:]
    c = {"t_mb": float(compute[i] + comm[i]), "compute_mb": float(compute[i]),
         "fwd_share": grp.prof.fwd_share, "params": float(tab.params[i]),
         "expert_params": float(tab.expert[i]), "expert_ratio": g.tp / (g.ep * g.expert_tp),
         "layers": float(tab.layers[i]), "pp": float(pp), "dp": float(dp),
         "group": float(dp * g.cp), "n_micro": float((g.global_batch or 0) // (g.micro_batch * dp)),
         "cp_layer": grp.comm.cp_layer, "attn_core": grp.prof.attn_core,
         "dp_w": float(contention_weight(dp * g.cp, dp_local(g.tp, g.cp, gpn), cluster)),
         "cp_w": float(contention_weight(g.cp, max(1, gpn // g.tp), cluster)),
         "pp_w": float(contention_weight(2, pp_local(g.tp, dp, g.cp, gpn), cluster)),
         "tp_hidden": float(tab.layers[i]) * tp_hidden_per_layer(
             g.recompute, grp.comm.tp_ar, grp.comm.tp_hidden, eff.tp_backward_overlap,
             g.sp),
         "t_p2p": coll("", "send_recv", grp.comm.act_bytes, 2, pp_local(g.tp, dp, g.cp, gpn))
         if pp > 1 else 0.0, "ar": ar, "rs": rs, "ag": ag, "rs3": rs3, "ag3": ag3}
    for name, st in (("first", tab.first), ("last", tab.last)):
        sf = stage_facts(m, g, st, grp.mem)
        for f in _FACTS:
            c[f"{name}.{f}"] = float(getattr(sf, f))
    return c


_FACTS = ("index", "params", "matrix_params", "saved_bytes", "peak", "layer_params",
          "model_parallel", "expert_params", "expert_shard_ratio")


def search(m: ModelSpec, cluster: Cluster, base: TrainConfig, objective: str = "throughput",
           top: int = 10, efficiency: Efficiency | None = None,
           micro_batches: tuple[int, ...] = MICRO_BATCHES,
           retime: Retime | None = None) -> SearchResult:
    """Rank every valid layout of `cluster.gpus` GPUs for `base`'s model, sequence length,
    precision and global batch by tokens/s (or by cost, which ranks the same on a fixed GPU
    count: reported for both). `retime`: the best candidates are re-timed as the stack their
    layout implies runs them (efficiency.auto_retime), as `train` would time them."""
    t0 = time.perf_counter()
    eff = efficiency or training_efficiency(cluster.device)
    gb = base.global_batch or cluster.gpus * base.micro_batch
    tables: dict[tuple[int, int, int], _StageTable] = {}
    memo: dict[tuple[object, ...], float] = {}
    cases: list[tuple[_Group, dict[str, Any]]] = []
    for grp, pps in _groups(m, cluster, base, gb, eff, micro_batches):
        cases.extend((grp, _case(m, cluster, grp, pp, eff, tables, memo)) for pp in pps)
    z, v, off, k = [], [], [], []
    for i, (_, c) in enumerate(cases):
        pp = int(c["pp"])
        for zz in ([0, 1, 2, 3] if c["group"] > 1 else [0]):
            # interleaved schedule: v virtual chunks of the stage's layers (Narayanan 2021 §2.2)
            for vv in range(1, 9):
                if vv == 1 or (pp > 1 and m.num_layers % (pp * vv) == 0):
                    for o in ((False, True) if zz >= 1 else (False,)):
                        z.append(zz)
                        v.append(vv)
                        off.append(o)
                        k.append(i)
    t, mem = evaluate(m, cluster, base, cases, np.array(z), np.array(v), np.array(off),
                      np.array(k), eff)
    # not declared out of memory: fits, or tight (within the model's band; each top row's
    # memory_verdict says which)
    fits = not_out_of_memory(mem, cluster.device.capacity_bytes, MEMORY_BAND)
    order = np.argsort(np.where(fits, t, np.inf), kind="stable")
    candidates = []
    for j in order[: max(top * 3, top)]:
        if not fits[j]:
            break
        grp, c = cases[k[j]]
        candidates.append((replace(grp.cfg, dp=int(c["dp"]), pp=int(c["pp"]), zero=int(z[j]),
                                   virtual_stages=int(v[j]), offload_optimizer=bool(off[j])),
                           (float(t[j]), float(mem[j]))))
    elapsed = time.perf_counter() - t0
    as_run = [(*(retime(cfg) if retime else (cfg, eff)), fast) for cfg, fast in candidates]
    timed = [(cfg, step_time(m, cluster, cfg, e), fast) for cfg, e, fast in as_run]
    timed = [t for t in timed if t[1].fits]
    timed.sort(key=lambda r: r[1].step_time_s or float("inf"))
    timed = timed[:top]
    return SearchResult(len(z), int(fits.sum()), elapsed, [(c, s) for c, s, _ in timed],
                        objective, [f for _, _, f in timed])


def evaluate(m: ModelSpec, cluster: Cluster, base: TrainConfig,
             cases: list[tuple[_Group, dict[str, Any]]], z: np.ndarray, v: np.ndarray,
             off: np.ndarray, k: np.ndarray, eff: Efficiency) -> tuple[np.ndarray, np.ndarray]:
    """Step time and peak memory of every layout row, with the very terms `step_time` and
    `train_memory` sum (`estimate.step`, `estimate.memory.stage_memory`)."""
    x = {name: np.array([c[name] for _, c in cases])[k] for name in cases[0][1]}
    pp, n_micro = x["pp"], x["n_micro"]
    pipeline = pipeline_time(n_micro, x["t_mb"], pp, v)
    cp_tot, cp_exp = cp_comm(x["cp_layer"], x["attn_core"], x["layers"], n_micro, True)
    pp_tot, pp_exp = pp_comm(x["t_p2p"], pp, n_micro, v, True)
    fwd = x["compute_mb"] * x["fwd_share"]
    dp_tot, dp_exp = dp_comm(z, x["ar"], x["rs"], x["ag"], x["rs3"], x["ag3"], fwd,
                        x["compute_mb"] * (1 - x["fwd_share"]), n_micro, True,
                        eff.param_gather_overlap,
                        zero3_prefetch_share(eff, x["params"], x["layers"]),
                        eff.grad_reduce_overlap, pp, v)
    shard = np.where(z >= 1, x["group"], 1.0)
    t_opt = optimizer_time(x["params"], shard, base.optimizer, off,
                           state_bytes_per_param(base), cluster, eff, x["expert_params"],
                           x["expert_ratio"], z >= 1, base.precision)
    def hid(total: np.ndarray, exposed: np.ndarray) -> np.ndarray:
        return np.asarray(np.maximum(0.0, total - exposed))  # as training.contended_hidden

    hidden = (hid(cp_tot, cp_exp) * x["cp_w"] + hid(pp_tot, pp_exp) * x["pp_w"]
              + hid(dp_tot, dp_exp) * x["dp_w"] + x["tp_hidden"] * n_micro)
    t = pipeline + cp_exp + pp_exp + dp_exp + t_opt + overlap_slowdown(hidden,
                                                                       eff.overlap_slowdown)
    lay = Layout(z, x["group"], off, x["dp"], pp, v, n_micro)
    mem = np.zeros(len(z))
    for name in ("first", "last"):
        sf = StageFacts(*(x[f"{name}.{f}"] for f in _FACTS))
        mem = np.maximum(mem, stage_total(stage_memory(m, base, lay, sf)))
    return t, mem


def result_json(r: SearchResult) -> dict[str, Any]:
    rows = []
    for cfg, s in r.ranked:
        rows.append({"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp, "ep": cfg.ep,
                     "zero": cfg.zero, "virtual_stages": cfg.virtual_stages,
                     "recompute": cfg.recompute, "micro_batch": cfg.micro_batch,
                     "sequence_parallel": cfg.sp, "offload_optimizer": cfg.offload_optimizer,
                     "step_time_s": s.step_time_s,
                     "tokens_per_s": s.tokens_per_s, "mfu": s.mfu,
                     "memory_bytes": s.memory.total_bytes,
                     "memory_verdict": s.memory.verdict, "dominant": s.dominant,
                     "breakdown_s": s.breakdown, "why": why(cfg, s)})
    return {"evaluated": r.evaluated, "fitting": r.fitting, "search_s": r.seconds,
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
