"""Serving screen: for one device, tensor-parallel degree and weight dtype, the largest batch
that meets a latency SLO, how many GPUs a request rate needs, the dollars per million output
tokens at that rate, and what bounds it (memory, bandwidth, compute). Pure; used by
`gpuplan advise --goal serve` and by the options of `gpuplan plan`.

The screen serves one full static batch alone with the latency model (`latency.latency`):
TTFT = prefill of the whole batch, TPOT = mean decode step. Continuous batching (the
simulator behind `gpuplan serve --rate`) admits requests one by one, so its TTFT is lower and
its throughput at least as high: the screen is the conservative side (Yu et al., Orca,
OSDI'22 §5; Kwon et al., vLLM, SOSP'23 §6)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuplan.errors import InputError
from gpuplan.estimate.latency import Latency, ServeConfig, compute_bound_batch, latency, step_model
from gpuplan.estimate.serving import kv_capacity
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec

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


def _meets(lat: Latency, load: ServeLoad) -> bool:
    return lat.ttft_s <= load.slo_ttft_s and lat.tpot_s <= load.slo_tpot_s


def _largest_batch(sm: Any, cap: int, load: ServeLoad) -> tuple[int, Latency]:
    """Binary search of the largest batch <= cap meeting the SLO (latency grows with batch)."""
    lat1 = latency(sm, 1, load.prompt, load.output)
    if not _meets(lat1, load):
        return 0, lat1
    top = latency(sm, cap, load.prompt, load.output)
    if _meets(top, load):
        return cap, top
    lo, hi, best = 1, cap, lat1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lat = latency(sm, mid, load.prompt, load.output)
        if _meets(lat, load):
            lo, best = mid, lat
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
    rps = b / lat.e2e_latency_s
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
    rows = [best_for_device(m, d, load, price(d), quantized) for d in devices]
    return sorted(rows, key=_order)
