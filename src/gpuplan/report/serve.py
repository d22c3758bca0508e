"""Tables for `gpuplan serve`."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import table


def _s(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x * 1e3:,.2f} ms" if x < 1 else f"{x:,.2f} s"


def _n(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:,.4g}{unit}"


def render(con: Console, r: dict[str, Any]) -> None:
    title = f"{r['model']} on {r['tp']} x {r['device']}: {r['mode'].replace('_', ' ')}"
    t = table(title, [("quantity", "left"), ("value", "right"), ("note", "left")],
              caption="Assumptions: " + "; ".join(
                  f"{k}={v}" for k, v in r["assumptions"].items() if k != "efficiency"))
    if r["mode"] == "batch":
        t.add_row("batch / prompt / output", f"{r['batch']} / {r['prompt_len']} / "
                  f"{r['output_len']}", "")
        t.add_row("TTFT (prefill)", _s(r["ttft_s"]), "")
        t.add_row("TPOT (mean decode step)", _s(r["tpot_s"]),
                  f"first {_s(r['decode_first_step_s'])}, last {_s(r['decode_last_step_s'])}")
        t.add_row("weight-read floor per step", _s(r["weight_read_floor_s"]),
                  "bytes / bandwidth: no decode step is faster")
        t.add_row("end-to-end latency", _s(r["e2e_latency_s"]), "")
        t.add_row("decode is", f"{r['decode_bound']}-bound", "")
        t.add_row("memory per GPU", units.format_bytes(r["memory"]["total_bytes"]),
                  "fits" if r["fits"] else "DOES NOT FIT")
    else:
        t.add_row("requests completed", f"{r['completed_requests']:,}", r["workload"])
        t.add_row("requests/s", _n(r["requests_per_s"]), "")
        for k in ("ttft", "tpot", "e2e_latency", "queue"):
            t.add_row(f"{k} p50 / p90 / p99", " / ".join(_s(r[f"{k}_p{q}_s"])
                                                         for q in (50, 90, 99)), "")
        t.add_row("max concurrency reached", f"{r['batch']:,}",
                  f"engine max batch {r['engine']['max_batch']}")
        t.add_row("KV utilization (time average)", f"{r['kv_utilization']:.0%}",
                  f"{r['memory']['kv_capacity_tokens']:,} tokens per GPU")
        t.add_row("goodput", _n(r["goodput_requests_per_s"], " req/s"),
                  f"{r['slo_attainment']:.0%} meet the SLOs {r['slo']}")
    t.add_row("output tokens/s (whole TP group)", _n(r["output_tokens_per_s"]), "")
    t.add_row("decode turns compute-bound at batch", _n(r["compute_bound_batch"]), "")
    t.add_row("$ per million output tokens", _n(r["cost_per_million_tokens_usd"]),
              r["cost"].get("price_source", r["cost"].get("note", "")))
    con.print(t)
    for a in r["cost"].get("api", []):
        where = ("the GPU is cheaper above "
                 f"{a['break_even_requests_per_s']:.3g} req/s" if a["gpu_ever_cheaper"]
                 else "the API is cheaper at every load this GPU can serve")
        con.print(f"vs {a['name']} (${a['input_usd_per_mtok']}/${a['output_usd_per_mtok']} per "
                  f"Mtok in/out, {a['date']}): {where}")
    for row in r.get("curve", []):
        con.print(f"  {row['scheduler']:<10} rate {row['rate_requests_per_s']:8.3g}/s -> "
                  f"{row['output_tokens_per_s']:10,.0f} tok/s, p99 TTFT "
                  f"{_s(row['ttft_p99_s'])}, p99 TPOT {_s(row['tpot_p99_s'])}")
    if r.get("plot"):
        con.print(f"chart written to {r['plot']}")
