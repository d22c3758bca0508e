"""The answers of `gpuplan serve` as JSON-ready dicts (pure; the CLI reads files and renders):
a batch's latency, a simulated stream or the saturating load, and the cost next to APIs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuplan.estimate.inference import infer_memory
from gpuplan.estimate.latency import StepModel, latency
from gpuplan.estimate.request_stream import Workload, poisson_workload, trace_workload
from gpuplan.estimate.serving import kv_capacity, load_curve, max_throughput, summarize
from gpuplan.estimate.serving_cost import api_comparison, gpu_cost
from gpuplan.estimate.serving_sim import Engine, simulate
from gpuplan.specs.api_prices import builtin_api_prices, parse_api_prices
from gpuplan.specs.device import Device
from gpuplan.specs.limits import check_positions
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.serving import ServeConfig
from gpuplan.specs.workload import InferConfig

CUDA_CONTEXT_BYTES = 537_000_000
"""CUDA context + library workspaces per GPU (the memory planner's default); 0 on CPUs."""


def _ctx_bytes(d: Device) -> int:
    return 0 if d.kind == "cpu" else CUDA_CONTEXT_BYTES


def run_latency(ctx: dict[str, Any], prompt: int, output: int, batch: int,
                block_size: int) -> dict[str, Any]:
    """One batch served alone: TTFT, TPOT, e2e, tokens/s, the memory it needs."""
    m: ModelSpec = ctx["m"]
    d: Device = ctx["d"]
    cfg: ServeConfig = ctx["cfg"]
    sm: StepModel = ctx["sm"]
    check_positions(prompt + output, m.max_position_embeddings, m.name,
                    "--prompt-len + --output-len", m.position)
    lat = latency(sm, batch, prompt, output)
    mem = infer_memory(m, d, InferConfig(
        batch=batch, context=prompt + output, weight_dtype=cfg.weight_dtype,
        kv_dtype=cfg.kv_dtype, tp=cfg.tp, block_size=block_size,
        cuda_context_bytes=_ctx_bytes(d)))
    r: dict[str, Any] = lat.to_json()
    assumptions: dict[str, Any] = r.pop("assumptions")
    r.update({"mode": "batch", "tp": cfg.tp, "gpus": cfg.tp, "memory": mem.to_json(),
              "fits": mem.fits, "input_tokens_per_s": batch * prompt / lat.e2e_latency_s,
              "requests_per_s": batch / lat.e2e_latency_s,
              "assumptions": {**assumptions, "batch": "served alone: one prefill of the whole "
                              "batch, then decode steps together until the last token"}})
    return r


def _engine(ctx: dict[str, Any], max_batch: int, max_tokens: int, block_size: int,
            kv_fraction: float, scheduler: str, chunked: bool) -> tuple[Engine, dict[str, Any]]:
    m, d, cfg = ctx["m"], ctx["d"], ctx["cfg"]
    blocks, mem = kv_capacity(m, d, cfg, block_size, max_tokens, _ctx_bytes(d), kv_fraction)
    eng = Engine(kv_blocks=blocks, block_size=block_size, max_batch=max_batch,
                 max_tokens=max_tokens, scheduler=scheduler, chunked_prefill=chunked)
    eng.validate()
    memo = mem.to_json()
    memo["kv_capacity_tokens"] = blocks * block_size
    memo["kv_fraction_of_free_memory"] = kv_fraction
    return eng, memo


def run_sim(ctx: dict[str, Any], prompt: str, output: str, saturate: bool, rate: float | None,
            requests: int | None, scheduler: str, chunked: bool, seed: int,
            trace_text: str | None, slo_ttft: float | None, slo_tpot: float | None,
            max_batch: int, max_tokens: int, block_size: int, kv_fraction: float,
            curve: bool, trace_name: str | None = None) -> dict[str, Any]:
    """A simulated stream (trace, Poisson at `rate`, or saturating), with the contract keys."""
    sm: StepModel = ctx["sm"]
    eng, memo = _engine(ctx, max_batch, max_tokens, block_size, kv_fraction, scheduler, chunked)
    m: ModelSpec = ctx["m"]
    if trace_text is not None:
        w = trace_workload(trace_text, trace_name or "trace")
        res = simulate(sm, _in_positions(m, w, trace_name or "trace"), eng)
    elif saturate or rate is None:
        p_fixed = _fixed(prompt)
        o_fixed = _fixed(output)
        if p_fixed and o_fixed:
            check_positions(p_fixed + o_fixed, m.max_position_embeddings, m.name,
                            "--prompt-len + --output-len", m.position)
            res, _ = max_throughput(sm, eng, p_fixed, o_fixed, requests, seed)
        else:
            w = poisson_workload(requests or 2000, None, prompt, output, seed)
            res = simulate(sm, _in_positions(m, w, "--prompt-len + --output-len"), eng)
    else:
        w = poisson_workload(requests or 1000, rate, prompt, output, seed)
        res = simulate(sm, _in_positions(m, w, "--prompt-len + --output-len"), eng)
    s = summarize(res, slo_ttft, slo_tpot)
    r: dict[str, Any] = {"mode": "max_throughput" if saturate else "simulation", "tp": sm.cfg.tp,
                         "gpus": sm.cfg.tp, **s, "memory": memo}
    r["ttft_s"], r["tpot_s"] = s["ttft_p50_s"], s["tpot_p50_s"]
    r["e2e_latency_s"] = s["e2e_latency_p50_s"]
    r["batch"] = res.peak_concurrency
    r["max_concurrency"] = res.peak_concurrency
    from gpuplan.estimate.latency import compute_bound_batch

    r["compute_bound_batch"] = compute_bound_batch(sm)
    r["assumptions"] = {**sm.assumptions, "kv_admission": "each request reserves "
                        "ceil((prompt+output)/block) KV blocks until it ends (no preemption)",
                        "ttft_s/tpot_s/e2e_latency_s": "medians over the requests"}
    if curve:
        r["curve"] = _curve(ctx, eng, prompt, output, requests, seed)
    return r


def _in_positions(m: ModelSpec, w: Workload, origin: str) -> Workload:
    """Every request's prompt + output within the model's positions (a trace or a drawn
    length past them is refused, naming the request)."""
    total = w.prompt + w.output
    i = int(total.argmax())
    check_positions(int(total[i]), m.max_position_embeddings, m.name,
                    f"{origin}: request {i} prompt+output tokens", m.position)
    return w


def _fixed(spec: str) -> int | None:
    try:
        n = int(spec)
    except ValueError:
        return None
    return n if n >= 1 else None


def _curve(ctx: dict[str, Any], eng: Engine, prompt: str, output: str, requests: int | None,
           seed: int) -> list[dict[str, object]]:
    sm: StepModel = ctx["sm"]
    sat = simulate(sm, poisson_workload(requests or 1000, None, prompt, output, seed),
                   replace(eng, scheduler="continuous"))
    peak = float(summarize(sat)["requests_per_s"])  # type: ignore[arg-type]

    def at(rate: float) -> Workload:
        return poisson_workload(requests or 1000, rate, prompt, output, seed)

    return load_curve(sm, eng, at, peak)


def add_cost(r: dict[str, Any], ctx: dict[str, Any], usd_per_gpu_hour: float | None,
             api_text: str | None, price_source: str | None = None) -> None:
    """$ per million tokens at the throughput reached, and the API comparison. The hourly
    price is the caller's (the on-demand price basis, or the flag), else the device file's."""
    d: Device = ctx["d"]
    m: ModelSpec = ctx["m"]
    price = usd_per_gpu_hour or d.cloud_usd_per_hour
    if not usd_per_gpu_hour or price_source is None:
        price_source = f"not on the price basis: the device file's cloud price of {d.name}"
    if not price:
        r["cost_per_million_tokens_usd"] = None
        r["cost"] = {"note": f"no hourly price for {d.name} in the catalog: pass "
                             "--usd-per-gpu-hour"}
        return
    cost = gpu_cost(price, r["gpus"], r["output_tokens_per_s"], r["input_tokens_per_s"])
    r["cost_per_million_tokens_usd"] = cost["cost_per_million_tokens_usd"]
    prices = parse_api_prices(api_text, "--api-prices") if api_text is not None else builtin_api_prices()
    mean_p = r["input_tokens_per_s"] / r["requests_per_s"] if r["requests_per_s"] else 0.0
    mean_o = r["output_tokens_per_s"] / r["requests_per_s"] if r["requests_per_s"] else 0.0
    r["cost"] = {**cost, "usd_per_gpu_hour": price,
                 "price_source": price_source,
                 "api": api_comparison(prices, m.name, float(cost["usd_per_hour"] or 0),
                                       mean_p, mean_o, float(r["requests_per_s"]))}
