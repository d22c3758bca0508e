"""`gpuplan plan`: fit, speed, cost and choice together (pure).

Training: the layout search (`estimate.search`) on the chosen device and GPU count, then
`estimate_train` on its best layout: the very object `gpuplan train` returns for those options.
Serving: the smallest tensor-parallel degree whose screen meets the SLO at the rate, then the
same simulation and cost `gpuplan serve --rate` runs (`estimate.serve_plan`). Options: every
catalog device screened for both goals. Advice: ordered sentences drawn from those numbers."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpuplan.estimate.accuracy import training_regime
from gpuplan.estimate.efficiency import Efficiency, auto_retime, held_out_accuracy, stack_class
from gpuplan.estimate.latency import step_model
from gpuplan.estimate.memory import TrainConfig, train_memory
from gpuplan.estimate.plan_defaults import (
    CHAT_REQUESTS,
    DEFAULT_GPU,
)
from gpuplan.estimate.runs import CHINCHILLA_TOKENS_PER_PARAM
from gpuplan.estimate.search import search
from gpuplan.estimate.serve_plan import add_cost, run_sim
from gpuplan.estimate.serve_rank import (
    BLOCK_SIZE,
    MAX_BATCH,
    MAX_TOKENS,
    ServeLoad,
    ServeOption,
    best_for_device,
)
from gpuplan.estimate.train_result import TrainResult, estimate_train
from gpuplan.estimate.training import step_time
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.device import Device
from gpuplan.specs.framework import resolve_framework
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.serving import ServeConfig

MAX_SCREEN_GPUS = 16384
"""Largest power-of-two GPU count the training screen tries before giving up."""

Price = Callable[[Device], float | None]


@dataclass(frozen=True)
class PlanInputs:
    gpus: int
    tokens: float | None
    load: ServeLoad
    requests: int = CHAT_REQUESTS
    seed: int = 0


def train_tokens(m: ModelSpec, tokens: float | None) -> float:
    """Tokens to train on: given, or Chinchilla's 20 per parameter (Hoffmann et al. 2022)."""
    return tokens if tokens is not None else CHINCHILLA_TOKENS_PER_PARAM * m.params()


def plan_train(m: ModelSpec, d: Device, base: TrainConfig, inp: PlanInputs,
               price: dict[str, Any], eff: Efficiency | None = None,
               framework: dict[str, Any] | None = None, auto: bool = False) -> TrainResult:
    """The best searched layout of `inp.gpus` x `d`, timed and costed (at `price`, `train`'s
    rate and source) as `gpuplan train` does; the base job (not fitting) when none fits.
    `auto`: no stack named, so each layout is timed as the stack it implies runs it
    (efficiency.auto_retime), as `gpuplan train` does for that layout."""
    cluster = default_cluster(d, inp.gpus)
    retime = auto_retime(d, base) if auto else None
    res = search(m, cluster, base, top=1, efficiency=eff, retime=retime)
    cfg = res.ranked[0][0] if res.ranked else replace(base, dp=inp.gpus)
    if retime is not None:
        cfg, eff = retime(cfg)
        framework = resolve_framework(None, cfg).describe()
    out = estimate_train(m, cluster, cfg, train_tokens(m, inp.tokens),
                         price["usd_per_gpu_hour"], efficiency=eff, price=price)
    if framework is not None:
        out.extra_assumptions["framework"] = framework
        out.extra_assumptions["accuracy"] = held_out_accuracy(
            stack_class(framework["end_to_end_class"], d),
            training_regime(cfg, cluster.gpus, cluster.gpus_per_node))
    return out


def train_args(r: TrainResult, gpus: int, tokens: float) -> list[str]:
    """`gpuplan train` options that reproduce `r` (its layout and run length)."""
    c = r.cfg
    args = ["--gpus", str(gpus), "--dp", str(c.dp), "--tp", str(c.tp), "--pp", str(c.pp),
            "--cp", str(c.cp), "--ep", str(c.ep), "--zero", str(c.zero),
            "--fsdp", c.fsdp, "--virtual-stages", str(c.virtual_stages),
            "--recompute", c.recompute, "--micro-batch", str(c.micro_batch),
            "--seq-len", str(c.seq_len), "--tokens", repr(float(tokens))]
    if c.global_batch:
        args += ["--global-batch", str(c.global_batch)]
    if c.sp:
        args.append("--sequence-parallel")
    if c.offload_optimizer:
        args.append("--offload-optimizer")
    return args


def plan_serve(m: ModelSpec, d: Device, inp: PlanInputs, price: float | None,
               serve_price: tuple[float | None, str | None] = (None, None)
               ) -> tuple[dict[str, Any], ServeOption]:
    """The smallest TP of `d` whose screen meets the SLO (screened at `price`), then
    `gpuplan serve --rate` on it, costed as serve costs it: `serve_price` = (rate, source)."""
    opt = best_for_device(m, d, inp.load, price, smallest_tp_only=True)
    cfg = ServeConfig(tp=opt.tp)
    ctx = {"m": m, "d": d, "cfg": cfg, "sm": step_model(m, d, cfg)}
    ld = inp.load
    r = run_sim(ctx, str(ld.prompt), str(ld.output), False, ld.rate, inp.requests, "continuous",
                False, inp.seed, None, ld.slo_ttft_s, ld.slo_tpot_s, MAX_BATCH, MAX_TOKENS,
                BLOCK_SIZE, 0.90, False)
    add_cost(r, ctx, serve_price[0], None, serve_price[1])
    return {"model": m.name, "device": d.name, **r}, opt


def serve_args(r: dict[str, Any], inp: PlanInputs) -> list[str]:
    ld = inp.load
    return ["--tp", str(r["tp"]), "--prompt-len", str(ld.prompt), "--output-len",
            str(ld.output), "--rate", repr(ld.rate), "--requests", str(inp.requests),
            "--seed", str(inp.seed), "--slo-ttft", repr(ld.slo_ttft_s),
            "--slo-tpot", repr(ld.slo_tpot_s)]


def screen_job(base: TrainConfig, gpus: int, recompute: str) -> TrainConfig:
    """The memory-lean data-parallel job of the training screen: ZeRO-3 over all GPUs."""
    return replace(base, dp=gpus, zero=3 if gpus > 1 else 0, micro_batch=1,
                   recompute=recompute)  # type: ignore[arg-type]


def train_option(m: ModelSpec, d: Device, base: TrainConfig, inp: PlanInputs,
                 price: float | None) -> dict[str, Any]:
    """Smallest power-of-two GPU count (>= the plan's) whose screen job fits, timed there."""
    n = inp.gpus
    while n <= MAX_SCREEN_GPUS:
        for rc in ("none", "selective", "full"):
            cfg = screen_job(base, n, rc)
            if train_memory(m, d, cfg).fits:
                s = step_time(m, default_cluster(d, n), cfg)
                wall = train_tokens(m, inp.tokens) / (s.tokens_per_s or math.inf)
                cost = wall / 3600 * n * price if price else None
                dom = s.dominant or "compute"
                return {"gpus": n, "fits": True, "recompute": rc, "step_time_s": s.step_time_s,
                        "mfu": s.mfu, "time_s": wall, "cost_usd": cost, "bottleneck": dom,
                        "why": f"{dom}-bound; ZeRO-3 over {n}, {rc} recompute"}
        n *= 2
    return {"gpus": None, "fits": False, "recompute": None, "step_time_s": None, "mfu": None,
            "time_s": None, "cost_usd": None, "bottleneck": "memory",
            "why": f"memory: no ZeRO-3 job fits up to {MAX_SCREEN_GPUS} GPUs"}


def options(m: ModelSpec, devices: list[Device], base: TrainConfig, inp: PlanInputs,
            price: Price, goal: str) -> list[dict[str, Any]]:
    """One row per catalog device: training and/or serving screens."""
    rows = []
    for d in devices:
        p = price(d)
        row: dict[str, Any] = {"device": d.name, "kind": d.kind, "usd_per_gpu_hour": p}
        if goal in ("train", "both"):
            row["train"] = train_option(m, d, base, inp, p)
        if goal in ("serve", "both"):
            row["serve"] = best_for_device(m, d, inp.load, p, smallest_tp_only=True).to_json()
        rows.append(row)
    return rows


def _days(s: float | None) -> str:
    return f"{s / 86400:,.3g} days" if s is not None else "-"


def _usd(x: float | None) -> str:
    return f"${x:,.0f}" if x is not None and x >= 100 else (f"${x:,.2f}" if x is not None
                                                           else "no price")


def _cheapest(rows: list[dict[str, Any]], goal: str, key: str) -> dict[str, Any] | None:
    ok = [r for r in rows if goal in r and r[goal].get(key) is not None
          and r[goal].get("fits") and r[goal].get("meets_slo", True)]
    return min(ok, key=lambda r: r[goal][key]) if ok else None


def _expected_error(t: dict[str, Any]) -> str:
    """' Expected error ...' of the training estimate's regime (estimate.accuracy), or ''."""
    reg = t.get("assumptions", {}).get("accuracy", {}).get("regime")
    if not reg:
        return ""
    return (f" Published runs like this ({reg['regime']}) were predicted within "
            f"{reg['median_abs_error_pct']:g} % (median), {reg['p90_abs_error_pct']:g} % in 9 "
            "of 10.")


def train_advice(t: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    out = []
    lay = t["layout"]
    if t["fits"]:
        out.append(f"Train on {t['gpus']} x {t['device']} with dp {lay['dp']}, tp {lay['tp']}, "
                   f"pp {lay['pp']}, cp {lay['cp']}, ZeRO-{lay['zero']}, micro-batch "
                   f"{lay['micro_batch']}, recompute {lay['recompute']}: step "
                   f"{t['step_time_s']:.3g} s, MFU {t['mfu']:.0%}, "
                   f"{_days(t['run']['wall_time_s'])}, {_usd(t['cost_usd'])}."
                   + _expected_error(t))
    else:
        out.append(f"Training does not fit on {t['gpus']} x {t['device']} in any layout: "
                   "use more GPUs or a larger-memory device (see options).")
    best = _cheapest(rows, "train", "cost_usd")
    if best and best["device"] != t["device"]:
        bt = best["train"]
        out.append(f"Cheapest training in the catalog: {bt['gpus']} x {best['device']} "
                   f"({_usd(bt['cost_usd'])}, {_days(bt['time_s'])}; screened layout).")
    cpu = [r for r in rows if r["kind"] == "cpu" and r.get("train", {}).get("time_s")]
    on_cpu = any(r["device"] == t["device"] and r["kind"] == "cpu" for r in rows)
    if cpu and t["fits"] and not on_cpu:
        c = min(cpu, key=lambda r: r["train"]["time_s"])
        out.append(f"On CPUs ({c['train']['gpus']} x {c['device']}) the same run takes "
                   f"{_days(c['train']['time_s'])}, "
                   f"{c['train']['time_s'] / t['run']['wall_time_s']:,.0f}x longer.")
    return out


def serve_advice(s: dict[str, Any], opt: ServeOption, rows: list[dict[str, Any]]) -> list[str]:
    out = [f"Serve on TP {s['tp']} x {s['device']}: TTFT p50 {s['ttft_p50_s'] * 1e3:.3g} ms, "
           f"TPOT p50 {s['tpot_p50_s'] * 1e3:.3g} ms, {s['output_tokens_per_s']:,.0f} output "
           f"tokens/s at {s['requests_per_s']:.3g} req/s, "
           + (f"{_usd(s['cost_per_million_tokens_usd'])} per million output tokens at this "
              "load" if s["cost_per_million_tokens_usd"] is not None else
              "no catalog price (serve --usd-per-gpu-hour sets one)")
           + (f"; one replica's capacity (screen): {opt.requests_per_s_per_replica:.3g} req/s "
              f"at {opt.batch} concurrent, {opt.bottleneck}-bound."
              if opt.requests_per_s_per_replica else f"; {opt.why}.")]
    if s["slo_attainment"] < 0.99:
        out.append(f"Only {s['slo_attainment']:.0%} of requests meet the SLO: add replicas "
                   f"(the screen says {opt.replicas}) or a faster device.")
    best = _cheapest(rows, "serve", "usd_per_million_tokens")
    if best and best["device"] != s["device"]:
        b = best["serve"]
        out.append(f"Cheapest serving at this load: {b['gpus']} x {best['device']} (TP "
                   f"{b['tp']}), {_usd(b['usd_per_million_tokens'])} per million output tokens.")
    for a in (s.get("cost") or {}).get("api", [])[:1]:
        if a["api_cheaper_below_requests_per_s"] >= s["requests_per_s"]:
            out.append(f"At {s['requests_per_s']:.3g} req/s an API ({a['name']}) is cheaper; "
                       f"a rented GPU wins above {a['break_even_requests_per_s']:.3g} req/s.")
    return out


def build_plan(m: ModelSpec, d: Device, base: TrainConfig, inp: PlanInputs, goal: str,
               devices: list[Device], price: Price, names: tuple[str, str],
               train_price: dict[str, Any],
               serve_price: tuple[float | None, str | None] = (None, None),
               train_eff: tuple[Efficiency | None, dict[str, Any] | None] = (None, None),
               train_auto: bool = False) -> dict[str, Any]:
    """The JSON of `gpuplan plan`; `names` = (model, device) as the user typed them, for the
    `commands` that re-run train and serve on the plan's choices; `train_price` = the rate
    `gpuplan train` costs the run at; `price` the options' rate per device."""
    note = None
    if goal == "both" and m.arch != "decoder":
        goal, note = "train", f"{m.name} is not a decoder (it generates no tokens): training only."
    out: dict[str, Any] = {"model": m.name, "device": d.name, "goal": goal}
    cmds: dict[str, str] = {}
    head = f"gpuplan {{}} {names[0]} --gpu {names[1]} "
    rows = options(m, devices, base, inp, price, goal)
    advice: list[str] = []
    if goal in ("train", "both"):
        tr = plan_train(m, d, base, inp, train_price, *train_eff, auto=train_auto)
        out["train"] = tr.to_json()
        cmds["train"] = head.format("train") + " ".join(train_args(tr, inp.gpus,
                                                                    train_tokens(m, inp.tokens)))
        advice += train_advice(out["train"], rows)
    if goal in ("serve", "both"):
        sv, opt = plan_serve(m, d, inp, price(d), serve_price)
        out["serve"] = sv
        cmds["serve"] = head.format("serve") + " ".join(serve_args(sv, inp))
        advice += serve_advice(sv, opt, rows)
    out["options"] = rows
    out["advice"] = advice + ([note] if note else [])
    out["commands"] = cmds
    ld = inp.load
    out["assumptions"] = {
        "device": "--gpu, else " + DEFAULT_GPU + " (train's and serve's default)",
        "train_tokens": train_tokens(m, inp.tokens),
        "train_tokens_rule": "given" if inp.tokens else
        f"Chinchilla: {CHINCHILLA_TOKENS_PER_PARAM} tokens per parameter (Hoffmann et al. 2022)",
        "train_layout": "best of the layout search on --gpus GPUs (train --search)",
        "serve_load": f"Poisson {ld.rate:g} req/s, prompt {ld.prompt}, output {ld.output} "
                      f"tokens, {inp.requests} requests, seed {inp.seed}",
        "serve_slo": f"TTFT {ld.slo_ttft_s:g} s, TPOT {ld.slo_tpot_s:g} s (MLPerf Inference "
                     "v4.0 Llama-2-70B server limits)",
        "serve_tp": "smallest TP whose screen meets the SLO; bf16 weights and KV",
        "options_train": "ZeRO-3 data parallel, micro-batch 1, least recompute that fits, "
                         "on the smallest power-of-two GPU count >= --gpus that fits",
        "options_serve": "closed-form steady continuous batching at the largest concurrency "
                         "meeting the SLO (no queueing); GPUs for the rate; $/M output tokens "
                         "at the rate",
        "prices": "on-demand price basis per GPU-hour, else the device file's cloud price "
                  "(train's and serve's rule)"}
    return out
