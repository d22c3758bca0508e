"""Rendering of `gpuplan advise --goal serve`: devices by $ per million tokens at an SLO."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import table


def render_serve_advice(con: Console, r: dict[str, Any], top: int) -> None:
    g = r["goal"]
    t = table(f"{r['model']}: serve {g['rate_requests_per_s']:g} req/s (prompt "
              f"{g['prompt_tokens']}, output {g['output_tokens']}) within TTFT "
              f"{g['slo_ttft_s']:g} s, TPOT {g['slo_tpot_s']:g} s",
              [("#", "right"), ("device", "left"), ("GPUs", "right"), ("TP", "right"),
               ("weights", "left"), ("meets SLO", "left"), ("$/M out tok", "right"),
               ("TPOT", "right"), ("why", "left")],
              caption="Screen: " + r["assumptions"]["screen"] + ". $/M: "
                      + r["assumptions"]["usd_per_million_tokens"] + ".")
    rows = r["ranking"]
    shown = rows[:top] + [o for o in rows[top:] if o["method"] == "cpu"]
    for i, o in enumerate(shown, 1):
        usd = o["usd_per_million_tokens"]
        t.add_row("cpu" if o["method"] == "cpu" else str(i), o["device"],
                  f"{o['gpus']:,}" if o["gpus"] else "-", str(o["tp"]), o["weight_dtype"],
                  "yes" if o["meets_goal"] else "no",
                  units.format_usd(usd) if usd is not None else "-",
                  units.format_seconds(o["tpot_s"]) if o["tpot_s"] else "-", o["why"])
    con.print(t)
