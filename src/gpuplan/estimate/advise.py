"""Which device and how many: rank catalog devices by the cost to meet a goal by a deadline.

Each goal maps to an evaluator (`EVALUATORS`); an evaluator turns (model, device, goal, price)
into one `Option` with its fit, time, cost and the reason it wins or fails. Training goals:
1. screen every device: GPUs needed to hold the model states (memory first) and to finish in
   time at the screening MFU, rounded up to a power of two; cost at that MFU;
2. the cheapest screened devices get the real layout search (`estimate.search`) at that GPU
   count (twice as many if nothing fits or the deadline is missed); the others keep their
   screening numbers, marked as such.
LoRA/QLoRA goals try 1, 2, 4, 8 GPUs (FSDP-sharded beyond one) with the memory model and
`step_time` directly (the layout search models full training only).
The serving goal ranks by $ per million tokens instead (`estimate.serve_rank.advise_serve`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.errors import InputError
from gpuplan.estimate.flops import flops_summary
from gpuplan.estimate.lora import LoraConfig
from gpuplan.estimate.memory import (
    TrainConfig,
    lora_states,
    not_out_of_memory,
    train_memory,
    verdict_note,
)
from gpuplan.estimate.partition import stages
from gpuplan.estimate.search import search
from gpuplan.estimate.training import StepResult, step_time
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.device import Device
from gpuplan.specs.memory_behaviour import MEMORY_BAND
from gpuplan.specs.model import ModelSpec

DAY = 86400.0
SCREEN_MFU = 0.35
"""Screening only: model FLOPs utilization assumed before the layout search (large dense
training reports 35-45%, e.g. Llama 3 405B: 38-43%, Dubey et al. 2024 Table 4)."""
MAX_GPUS = 32768
"""Largest cluster considered (Llama 3 405B trained on 16,384 H100s)."""
STATE_BYTES_PER_PARAM = 16.0
"""Mixed-precision AdamW: 2 + 2 + 12 bytes per parameter (ZeRO §3.1)."""
MEMORY_HEADROOM = 0.8
"""Screening: share of memory the model states may take (the rest: activations, buffers)."""

GOAL_DEFAULTS: dict[str, dict[str, float]] = {
    # tokens (None: Chinchilla 20 per parameter, Hoffmann et al. 2022), days, seq, batch
    "pretrain": {"days": 90.0, "seq_len": 4096, "global_batch": 1024},
    "finetune": {"tokens": 1e8, "days": 7.0, "seq_len": 4096, "global_batch": 32},
    "lora": {"tokens": 1e8, "days": 7.0, "seq_len": 4096, "global_batch": 16},
    "qlora": {"tokens": 1e8, "days": 7.0, "seq_len": 4096, "global_batch": 16},
}
"""Assumptions: pretraining at Llama 3's initial batch (4M tokens = 1,024 x 4,096; Dubey et
al. 2024 §3.4.1) within a quarter; fine-tuning on 100M tokens (a few epochs of a 50k-example
instruction set) within a week, QLoRA's batch of 16 (Dettmers et al. 2023 App. B); sequences of
4,096 tokens everywhere (the project's --seq-len default)."""


@dataclass(frozen=True)
class Goal:
    kind: str
    tokens: float
    deadline_s: float
    budget_usd: float | None = None
    seq_len: int = 4096
    global_batch: int = 1024
    lora_rank: int = 16


def make_goal(m: ModelSpec, kind: str, tokens: float | None = None, days: float | None = None,
              budget_usd: float | None = None, seq_len: int | None = None,
              global_batch: int | None = None, lora_rank: int = 16) -> Goal:
    if kind not in GOAL_DEFAULTS:
        raise InputError("goal", kind, ", ".join(GOAL_DEFAULTS) + " (serve: "
                         "serve_rank.advise_serve)")
    d = GOAL_DEFAULTS[kind]
    toks = tokens if tokens is not None else d.get("tokens", 20.0 * m.params())
    return Goal(kind, toks, (days if days is not None else d["days"]) * DAY, budget_usd,
                seq_len or int(d["seq_len"]), global_batch or int(d["global_batch"]), lora_rank)


@dataclass
class Option:
    device: str
    gpus: int
    fits: bool
    cost_usd: float | None
    time_s: float | None
    why: str
    method: str
    meets: bool = False
    usd_per_gpu_hour: float | None = None
    layout: dict[str, Any] = field(default_factory=dict)
    mfu: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "gpus": self.gpus, "fits": self.fits,
                "meets_goal": self.meets, "cost_usd": self.cost_usd, "time_s": self.time_s,
                "time_days": self.time_s / DAY if self.time_s else None, "mfu": self.mfu,
                "usd_per_gpu_hour": self.usd_per_gpu_hour, "layout": self.layout,
                "method": self.method, "why": self.why}


def _pow2(x: float) -> int:
    return 1 if x <= 1 else 2 ** math.ceil(math.log2(x))


def _train_flops(m: ModelSpec, g: Goal) -> float:
    per_seq = float(flops_summary(m, 1, g.seq_len)["train_flops"])
    return per_seq * g.tokens / g.seq_len


def _finish(o: Option, g: Goal, rate: float | None) -> Option:
    """Cost from GPU-hours at the rate; whether the deadline and budget are met; the reason."""
    o.usd_per_gpu_hour = rate
    if o.time_s is not None and rate is not None:
        o.cost_usd = o.time_s * o.gpus / 3600 * rate
    late = o.time_s is not None and o.time_s > g.deadline_s
    over = g.budget_usd is not None and o.cost_usd is not None and o.cost_usd > g.budget_usd
    o.meets = o.fits and o.time_s is not None and not late and not over and rate is not None
    if o.fits and late and o.time_s is not None:
        o.why = f"misses the deadline: {o.time_s / DAY:.3g} days > {g.deadline_s / DAY:g}; " \
                + o.why
    elif o.fits and over and o.cost_usd is not None and g.budget_usd is not None:
        o.why = f"over budget: ${o.cost_usd:,.0f} > ${g.budget_usd:,.0f}; " + o.why
    elif o.fits and rate is None:
        o.why = "no on-demand price on the basis (pass --prices); " + o.why
    return o


def _describe(step: StepResult, cfg: TrainConfig, n: int, device: Device) -> str:
    b, t = step.breakdown, step.step_time_s or 1.0
    comm = {k: v / t for k, v in b.items() if k != "compute" and v / t >= 0.05}
    mem = step.memory
    parts = [f"MFU {step.mfu:.0%}" if step.mfu else "",
             verdict_note(mem.total_bytes, mem.capacity_bytes, mem.band)
             if mem.verdict == "tight" else
             f"{mem.total_bytes / 1e9:.0f} of {mem.capacity_bytes / 1e9:.0f} GB per GPU"]
    nodes = math.ceil(n / 8)
    if nodes > 1:
        net = device.scale_out.name if device.scale_out else "100 Gb/s Ethernet (assumed)"
        parts.append(f"{nodes} nodes over {net}")
    parts += [f"{k.replace('_', ' ')} {v:.0%}" for k, v in comm.items()]
    return ", ".join(p for p in parts if p)


def _layout(cfg: TrainConfig) -> dict[str, Any]:
    return {"dp": cfg.dp, "tp": cfg.tp, "pp": cfg.pp, "cp": cfg.cp, "zero": cfg.zero_stage,
            "micro_batch": cfg.micro_batch, "recompute": cfg.recompute}


def screen_full(m: ModelSpec, d: Device, g: Goal, rate: float | None) -> Option:
    """GPUs to hold 16 bytes/param of states and to finish in time at SCREEN_MFU."""
    peak = d.matmul_peak("bf16")
    n_mem = STATE_BYTES_PER_PARAM * m.params() / (MEMORY_HEADROOM * d.capacity_bytes)
    n_time = _train_flops(m, g) / (g.deadline_s * peak * SCREEN_MFU)
    n = _pow2(max(n_mem, n_time))
    if n > MAX_GPUS:
        what = ("memory: the model states alone need" if n_mem > n_time else
                f"deadline: {g.deadline_s / DAY:g} days at {SCREEN_MFU:.0%} MFU needs")
        return Option(d.name, n, False, None, None, f"{what} ~{n:,} GPUs (more than "
                      f"{MAX_GPUS:,} considered)", "screen")
    time_s = _train_flops(m, g) / (n * peak * SCREEN_MFU)
    o = Option(d.name, n, True, None, time_s, f"screened at {SCREEN_MFU:.0%} MFU (not "
               f"searched); {n_mem:.3g} GPUs' memory for the states", "screen")
    return _finish(o, g, rate)


def evaluate_full(m: ModelSpec, d: Device, g: Goal, rate: float | None) -> Option:
    """The layout search at the screened GPU count (doubled once if it does not fit or is
    late): the best layout's step time gives time and cost."""
    o = screen_full(m, d, g, rate)
    if not o.fits:
        return o
    base = TrainConfig(micro_batch=1, seq_len=g.seq_len, global_batch=g.global_batch,
                       dropout=False, fused=True)
    n = o.gpus
    for _ in range(3):
        if n > MAX_GPUS or g.global_batch % min(n, g.global_batch):
            break
        res = search(m, default_cluster(d, n), base, top=1, micro_batches=(1, 2))
        if res.ranked:
            cfg, step = res.ranked[0]
            steps = g.tokens / (g.global_batch * g.seq_len)
            o = Option(d.name, n, True, None, steps * (step.step_time_s or 0.0),
                       _describe(step, cfg, n, d), "search", layout=_layout(cfg), mfu=step.mfu)
            o = _finish(o, g, rate)
            if o.meets or (o.time_s or 0) <= g.deadline_s:
                return o
        else:
            o = Option(d.name, n, False, None, None, f"memory: no layout of {n:,} GPUs fits",
                       "search")
        n *= 2
    return o


_ADAPTER_TRIES = (("none", 2), ("none", 1), ("full", 4), ("full", 2), ("full", 1))
_NEED: dict[tuple[ModelSpec, TrainConfig, str], int] = {}
"""Memory a (model, config) needs on one GPU: it depends on the device only through the
kernels modelled (its kind), so devices of a kind share it (speed: ~25 devices per goal)."""


def _fits(m: ModelSpec, d: Device, cfg: TrainConfig) -> bool:
    key = (m, cfg, d.kind)
    if key not in _NEED:
        if len(_NEED) > 4096:
            _NEED.clear()
        _NEED[key] = train_memory(m, d, cfg).total_bytes
    return bool(not_out_of_memory(_NEED[key], d.capacity_bytes, MEMORY_BAND))


def evaluate_adapters(m: ModelSpec, d: Device, g: Goal, rate: float | None) -> Option:
    """LoRA/QLoRA on 1, 2, 4, 8 GPUs (ZeRO-3/FSDP beyond one): the first count and the
    fastest (recompute, micro-batch) that fit and meet the deadline."""
    lc = LoraConfig(g.kind, g.lora_rank)  # type: ignore[arg-type]
    best: Option | None = None
    for n in (1, 2, 4, 8):
        base = TrainConfig(micro_batch=1, seq_len=g.seq_len, global_batch=g.global_batch,
                           dp=n, zero=3 if n > 1 else 0, recompute="full", dropout=False,
                           lora=lc)
        st0 = stages(m)[0]
        w, gr, opt, _ = lora_states(m, base, st0)
        if w + gr + opt > d.capacity_bytes or not _fits(m, d, base):
            continue
        for rc, mb in _ADAPTER_TRIES:
            if g.global_batch % (mb * n):
                continue
            cfg = replace(base, recompute=rc, micro_batch=mb)  # type: ignore[arg-type]
            if not _fits(m, d, cfg):
                continue
            step = step_time(m, default_cluster(d, n), cfg)
            steps = g.tokens / (g.global_batch * g.seq_len)
            o = _finish(Option(d.name, n, True, None, steps * (step.step_time_s or 0.0),
                               _describe(step, cfg, n, d), g.kind, layout=_layout(cfg),
                               mfu=step.mfu), g, rate)
            if o.meets or best is None:
                best = o
            break
        if best is not None and best.meets:
            return best
    if best is not None:
        return best
    need = train_memory(m, d, TrainConfig(micro_batch=1, seq_len=g.seq_len, recompute="full",
                                          dropout=False, lora=lc)).total_bytes
    return Option(d.name, 8, False, None, None, f"memory: {g.kind} needs {need / 1e9:.0f} GB "
                  f"on one GPU (has {d.capacity_bytes / 1e9:.0f}) and does not fit on 8 with "
                  "FSDP", g.kind)


Evaluator = Callable[[ModelSpec, Device, Goal, "float | None"], Option]
EVALUATORS: dict[str, Evaluator] = {"pretrain": evaluate_full, "finetune": evaluate_full,
                                    "lora": evaluate_adapters, "qlora": evaluate_adapters}
SCREENS: dict[str, Evaluator] = {"pretrain": screen_full, "finetune": screen_full}
"""Goals whose evaluator is slow get a cheap screen first; the rest are evaluated in full."""


def cpu_option(m: ModelSpec, d: Device, g: Goal, best_s: float | None) -> Option:
    """The CPU/GPU gap as a number: one socket with the same step model when the job fits its
    memory, else a compute-bound lower bound at its dense bf16 peak (LoRA/QLoRA skip the
    weight-gradient third)."""
    lc = LoraConfig(g.kind) if g.kind in ("lora", "qlora") else LoraConfig()  # type: ignore[arg-type]
    cfg = TrainConfig(micro_batch=1, seq_len=g.seq_len, global_batch=g.global_batch,
                      recompute="full", dropout=False, lora=lc)
    mem = train_memory(m, d, cfg)
    if mem.fits:
        step = step_time(m, default_cluster(d, 1), cfg)
        time_s = g.tokens / (g.global_batch * g.seq_len) * (step.step_time_s or 0.0)
        how = f"the step model (MFU {step.mfu:.0%})" if step.mfu else "the step model"
    else:
        share = 1.0 if g.kind in ("pretrain", "finetune") else 2.0 / 3.0
        time_s = share * _train_flops(m, g) / d.matmul_peak("bf16")
        how = f"a lower bound at 100% of its {d.matmul_peak('bf16') / 1e12:.3g} TFLOP/s peak"
    gap = f", {time_s / best_s:,.0f}x the best GPU option" if best_s else ""
    why = f"CPU reference: {time_s / DAY:,.3g} days by {how}{gap}"
    if not mem.fits:
        why += f"; needs {mem.total_bytes / 1e9:,.0f} GB, has {d.capacity_bytes / 1e9:,.0f}"
    return Option(d.name, 1, mem.fits, None, time_s, why, "cpu")


def _key(o: Option) -> tuple[int, bool, float, float]:
    rank = 0 if o.meets else 1 if o.fits and o.time_s is not None else 2
    return (rank, o.method == "screen", o.cost_usd if o.cost_usd is not None else math.inf,
            o.time_s if o.time_s is not None else math.inf)


def advise(m: ModelSpec, devices: list[Device], g: Goal, price: Callable[[str], float | None],
           detailed: int = 4) -> dict[str, Any]:
    """Every accelerator ranked for the goal (met goals by cost first), the reason for each,
    the best and the runner-up, and a CPU row."""
    gpus = [d for d in devices if d.kind != "cpu"]
    evaluate, screen = EVALUATORS[g.kind], SCREENS.get(g.kind)
    if screen is not None:
        first = [screen(m, d, g, price(d.name)) for d in gpus]
        chosen = set(sorted(range(len(gpus)), key=lambda i: _key(first[i]))[:detailed])
        options = [evaluate(m, d, g, price(d.name)) if i in chosen else first[i]
                   for i, d in enumerate(gpus)]
    else:
        options = [evaluate(m, d, g, price(d.name)) for d in gpus]
    options.sort(key=_key)
    met = [o for o in options if o.meets]
    best = met[0] if met else None
    runner = met[1] if len(met) > 1 else None
    if best is not None:
        tail = (f"; runner-up {runner.device} x{runner.gpus} costs "
                f"{runner.cost_usd / best.cost_usd:.2f}x" if runner and runner.cost_usd and
                best.cost_usd else "")
        best.why = f"best: cheapest way to meet the goal{tail}; " + best.why
    cpus = [d for d in devices if d.kind == "cpu"]
    if cpus:
        options.append(cpu_option(m, cpus[0], g, best.time_s if best else None))
    return {"model": m.name, "goal": {"kind": g.kind, "tokens": g.tokens,
                                      "deadline_s": g.deadline_s, "budget_usd": g.budget_usd,
                                      "seq_len": g.seq_len, "global_batch": g.global_batch},
            "ranking": [o.to_json() for o in options],
            "best": best.to_json() if best else None,
            "runner_up": runner.to_json() if runner else None,
            "assumptions": {"screen_mfu": SCREEN_MFU, "max_gpus": MAX_GPUS,
                            "searched_devices": detailed if screen else len(gpus),
                            "state_bytes_per_param_screen": STATE_BYTES_PER_PARAM,
                            "goal_defaults": GOAL_DEFAULTS[g.kind],
                            "cost": "GPU-hours x the on-demand price basis",
                            "lora_rank": g.lora_rank}}
