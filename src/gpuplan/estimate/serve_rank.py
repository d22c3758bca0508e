"""Serving screen: for one device, tensor-parallel degree and weight dtype, the largest batch
that meets a latency SLO, how many GPUs a request rate needs, the dollars per million output
tokens at that rate, and what bounds it (memory, bandwidth, compute). Pure; used by
`gpuplan advise --goal serve` and by the options of `gpuplan plan`.

The screen is closed-form steady continuous batching (`point`) on the latency model; the
simulator behind `gpuplan serve --rate` runs the same model request by request (Poisson
arrivals, queueing), so plan re-runs it on its choice."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplan.errors import InputError
from gpuplan.estimate.latency import (
    StepModel,
    compute_bound_batch,
    decode_s,
    latency,
    prefill_s,
    step_model,
)
from gpuplan.estimate.serving import kv_capacity
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.serving import ServeConfig

CUDA_CONTEXT_BYTES = 537_000_000
"""CUDA context + workspaces per GPU, as `serve` assumes (estimate.serve_plan); 0 on CPUs."""
BLOCK_SIZE = 32
"""Paged KV block (tokens), `gpuplan serve`'s default."""
MAX_BATCH = 2048
"""Engine sequences per iteration, `gpuplan serve`'s default (vLLM max_num_seqs order)."""
MAX_TOKENS = 8192
"""Engine tokens per iteration, `gpuplan serve`'s default."""
TP_DEGREES = (1, 2, 4, 8)
"""Tensor-parallel degrees tried: one HGX/DGX node at most."""


@dataclass(frozen=True)
class ServeLoad:
    """The load a serving screen is asked to meet."""

    prompt: int
    output: int
    rate: float
    """requests per second"""
    slo_ttft_s: float
    slo_tpot_s: float


@dataclass(frozen=True)
class ServeOption:
    device: str
    kind: str
    tp: int
    weight_dtype: str
    fits: bool
    meets_slo: bool
    batch: int
    """largest batch per TP group meeting the SLO (0 where none does)"""
    replicas: int
    gpus: int
    ttft_s: float | None
    tpot_s: float | None
    requests_per_s_per_replica: float | None
    usd_per_hour: float | None
    usd_per_million_tokens: float | None
    """group price / output tokens per second at the requested rate (idle capacity paid for)"""
    bottleneck: str
    why: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _ctx(d: Device) -> int:
    return 0 if d.kind == "cpu" else CUDA_CONTEXT_BYTES


@dataclass(frozen=True)
class Point:
    """Steady continuous batching at concurrency `batch` (no chunked prefill): each request
    is prefilled alone (p1) between decode iterations, so while `batch` requests each decode
    `output` tokens (mean step `step`), `batch` prefills stall them (Sarathi-Serve, Agrawal et
    al. OSDI'24 §2.3): cycle = output x step + batch x p1; TPOT = cycle / output;
    TTFT = p1 + one decode step of waiting; requests/s = batch / cycle."""

    batch: int
    ttft_s: float
    tpot_s: float
    requests_per_s: float
    decode_bound: str


def point(sm: StepModel, batch: int, load: ServeLoad) -> Point:
    p1 = prefill_s(sm, 1, load.prompt)
    lat = latency(sm, batch, load.prompt, load.output)
    step = lat.tpot_s if load.output > 1 else decode_s(sm, batch, load.prompt)
    cycle = load.output * step + batch * p1
    return Point(batch, p1 + step, cycle / load.output, batch / cycle, lat.decode_bound)


def _meets(pt: Point, load: ServeLoad) -> bool:
    return pt.ttft_s <= load.slo_ttft_s and pt.tpot_s <= load.slo_tpot_s


def _largest_batch(sm: StepModel, cap: int, load: ServeLoad) -> tuple[int, Point]:
    """Binary search of the largest batch <= cap meeting the SLO (TPOT grows with batch)."""
    pt1 = point(sm, 1, load)
    if not _meets(pt1, load):
        return 0, pt1
    top = point(sm, cap, load)
    if _meets(top, load):
        return cap, top
    lo, hi, best = 1, cap, pt1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        pt = point(sm, mid, load)
        if _meets(pt, load):
            lo, best = mid, pt
        else:
            hi = mid
    return lo, best


def _no_fit(m: ModelSpec, d: Device, cfg: ServeConfig, msg: str) -> ServeOption:
    return ServeOption(d.name, d.kind, cfg.tp, cfg.weight_dtype, False, False, 0, 0, 0, None,
                       None, None, None, None, "memory",
                       f"memory: {m.name} at {cfg.weight_dtype} does not leave room for the KV "
                       f"cache on {cfg.tp} x {d.name} ({msg})")


def screen(m: ModelSpec, d: Device, cfg: ServeConfig, load: ServeLoad,
           price: float | None) -> ServeOption:
    """One (device, TP, dtype) candidate against `load`; `price` is US$ per GPU-hour."""
    try:
        cfg.validate(m)
        blocks, _ = kv_capacity(m, d, cfg, BLOCK_SIZE, MAX_TOKENS, _ctx(d))
    except InputError as e:
        return _no_fit(m, d, cfg, str(e).split(": ")[-1][:80])
    per_req = math.ceil((load.prompt + load.output) / BLOCK_SIZE)
    cap = min(MAX_BATCH, blocks // per_req)
    if cap < 1:
        return _no_fit(m, d, cfg, "one request's KV cache exceeds the free memory")
    sm = step_model(m, d, cfg)
    b, lat = _largest_batch(sm, cap, load)
    if b == 0:
        what = "TTFT" if lat.ttft_s > load.slo_ttft_s else "TPOT"
        got = lat.ttft_s if what == "TTFT" else lat.tpot_s
        return ServeOption(d.name, d.kind, cfg.tp, cfg.weight_dtype, True, False, 0, 0, 0,
                           lat.ttft_s, lat.tpot_s, None, None, None, "latency",
                           f"latency: batch-1 {what} {got:.3g} s exceeds the SLO "
                           f"({lat.decode_bound}-bound decode)")
    rps = lat.requests_per_s
    replicas = max(1, math.ceil(load.rate / rps - 1e-9))
    gpus = replicas * cfg.tp
    usd_h = price * gpus if price else None
    usd_m = usd_h / 3600 / (load.rate * load.output) * 1e6 if usd_h and load.rate > 0 else None
    ridge = compute_bound_batch(sm)
    if b == cap and cap < MAX_BATCH:
        bound = "memory"
        why = f"KV memory caps the batch at {b}"
    elif lat.decode_bound == "memory":
        bound = "bandwidth"
        why = f"decode reads weights + KV (batch {b} < compute-bound batch {ridge})"
    else:
        bound = "compute"
        why = f"decode compute-bound at batch {b}"
    if b < cap and b < MAX_BATCH:
        why += "; SLO limits the batch"
    return ServeOption(d.name, d.kind, cfg.tp, cfg.weight_dtype, True, True, b, replicas, gpus,
                       lat.ttft_s, lat.tpot_s, rps, usd_h, usd_m, bound,
                       f"{bound}: {why}; {replicas} x TP{cfg.tp} for {load.rate:g} req/s")


def weight_dtypes(d: Device, quantized: bool) -> list[tuple[str, bool]]:
    """(weight dtype, weight-only) pairs to try: bf16; with `quantized` also fp8 where the
    device has an fp8 tensor rate (W8A8, native) and int4 weight-only (W4A16, AWQ/GPTQ)."""
    out = [("bf16", False)]
    if quantized:
        if d.peak("fp8"):
            out.append(("fp8", False))
        out.append(("int4", True))
    return out


def best_for_device(m: ModelSpec, d: Device, load: ServeLoad, price: float | None,
                    quantized: bool = False, smallest_tp_only: bool = False) -> ServeOption:
    """The cheapest option of `d` meeting the SLO (or, failing that, the one that got
    closest): TP 1, 2, 4, 8 (stopping at the first that meets it when `smallest_tp_only`)."""
    tried: list[ServeOption] = []
    for wd, wo in weight_dtypes(d, quantized):
        for tp in TP_DEGREES:
            if m.num_heads % tp:
                continue
            if d.kind == "cpu" and tp > 1:
                break
            o = screen(m, d, ServeConfig(weight_dtype=wd, kv_dtype="bf16", tp=tp,
                                         weight_only=wo), load, price)
            tried.append(o)
            if o.meets_slo and smallest_tp_only:
                break
    return min(tried, key=_order)


def _order(o: ServeOption) -> tuple[int, float, int]:
    """Meeting the SLO first, then $ per million tokens (unpriced after priced), then GPUs."""
    if o.meets_slo:
        return (0, o.usd_per_million_tokens if o.usd_per_million_tokens is not None
                else math.inf, o.gpus)
    return (1 if o.fits else 2, math.inf, o.tp)


def rank_serving(m: ModelSpec, devices: list[Device], load: ServeLoad,
                 price: Callable[[Device], float | None], quantized: bool = False
                 ) -> list[ServeOption]:
    """Every device's best option, cheapest meeting the SLO first; CPUs included."""
    ServeConfig().validate(m)  # a decoder: the one-line error, not a "memory" row per device
    rows = [best_for_device(m, d, load, price(d), quantized) for d in devices]
    return sorted(rows, key=_order)


def advise_serve(m: ModelSpec, devices: list[Device], load: ServeLoad,
                 price: Callable[[Device], float | None], quantized: bool = False
                 ) -> dict[str, Any]:
    """`gpuplan advise --goal serve`: devices ranked by $ per million output tokens meeting the
    SLO at the rate, each with its reason, the best and the runner-up; CPUs ranked too."""
    rows = rank_serving(m, devices, load, price, quantized)
    met = [o for o in rows if o.meets_slo and o.usd_per_million_tokens is not None]
    best = met[0] if met else None
    runner = met[1] if len(met) > 1 else None
    ranking = []
    for o in rows:
        j = o.to_json()
        j["meets_goal"] = o.meets_slo
        j["method"] = "cpu" if o.kind == "cpu" else "screen"
        j["time_s"] = o.tpot_s
        if o is best:
            tail = (f"; runner-up {runner.device} ({runner.gpus} x TP{runner.tp}, "
                    f"{runner.weight_dtype}) costs "
                    f"{runner.usd_per_million_tokens / o.usd_per_million_tokens:.2f}x"
                    if runner and runner.usd_per_million_tokens and o.usd_per_million_tokens
                    else "")
            j["why"] = f"best: cheapest per token meeting the SLO{tail}; {o.why}"
        ranking.append(j)
    return {"model": m.name,
            "goal": {"kind": "serve", "rate_requests_per_s": load.rate,
                     "prompt_tokens": load.prompt, "output_tokens": load.output,
                     "slo_ttft_s": load.slo_ttft_s, "slo_tpot_s": load.slo_tpot_s,
                     "quantized_allowed": quantized},
            "ranking": ranking,
            "best": ranking[rows.index(best)] if best else None,
            "runner_up": ranking[rows.index(runner)] if runner else None,
            "assumptions": {
                "screen": "steady continuous batching at the largest concurrency meeting the "
                          "SLO: TPOT = mean decode step + the prefills that stall it, TTFT = "
                          "one prefill + one step (no queueing)",
                "tp": f"{', '.join(map(str, TP_DEGREES))} (one node)",
                "weights": "bf16" + ("; fp8 where the device has an fp8 tensor rate, int4 "
                                     "weight-only (W4A16)" if quantized else ""),
                "kv_dtype": "bf16",
                "usd_per_million_tokens": "GPUs needed for the rate x $/GPU-hour / output "
                                          "tokens per hour at the rate",
                "engine": f"max batch {MAX_BATCH}, {MAX_TOKENS} tokens per step, KV blocks of "
                          f"{BLOCK_SIZE}, 90% of free memory to KV"}}
