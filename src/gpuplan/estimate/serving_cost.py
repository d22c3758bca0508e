"""Dollars per million tokens served, next to per-token API prices, and the load below which
an API is cheaper than renting the GPUs.

A rented GPU costs its hourly price whether busy or idle: $/Mtok = group $/h / (tokens/s x
3600) x 1e6 at the throughput reached. An API costs (prompt x input price + output x output
price) per request, so per hour it grows with the load; the two meet at
rate* = group $/h / (3600 x API $ per request). Below rate* the API is cheaper."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.api_prices import ApiPrice


def gpu_cost(usd_per_gpu_hour: float, gpus: int, output_tokens_per_s: float,
             input_tokens_per_s: float) -> dict[str, float | None]:
    if not usd_per_gpu_hour > 0:
        raise InputError("usd_per_gpu_hour", usd_per_gpu_hour, "a positive price per GPU-hour")
    group = usd_per_gpu_hour * gpus
    per_s = group / 3600

    def per_m(tps: float) -> float | None:
        return per_s / tps * 1e6 if tps > 0 else None

    return {"usd_per_hour": group,
            "cost_per_million_tokens_usd": per_m(output_tokens_per_s),
            "cost_per_million_input_tokens_usd": per_m(input_tokens_per_s),
            "cost_per_million_total_tokens_usd": per_m(output_tokens_per_s + input_tokens_per_s)}


def api_comparison(prices: list[ApiPrice], model: str, usd_per_hour: float, prompt: float,
                   output: float, max_requests_per_s: float) -> list[dict[str, object]]:
    """Per API entry serving `model` (or any model): its cost per request, the break-even load
    and which is cheaper at the GPUs' full load."""
    rows: list[dict[str, object]] = []
    gpu_per_request = usd_per_hour / 3600 / max_requests_per_s if max_requests_per_s > 0 \
        else float("inf")
    for p in prices:
        if p.models and model not in p.models:
            continue
        api_req = (prompt * p.input_usd_per_mtok + output * p.output_usd_per_mtok) / 1e6
        rate = usd_per_hour / 3600 / api_req if api_req > 0 else float("inf")
        rows.append({
            "name": p.name, "input_usd_per_mtok": p.input_usd_per_mtok,
            "output_usd_per_mtok": p.output_usd_per_mtok, "api_usd_per_request": api_req,
            "gpu_usd_per_request_at_full_load": gpu_per_request,
            "break_even_requests_per_s": rate,
            "api_cheaper_below_requests_per_s": min(rate, max_requests_per_s),
            "gpu_ever_cheaper": rate < max_requests_per_s,
            "source": p.source, "date": p.date, "uncertain": p.uncertain})
    return rows
