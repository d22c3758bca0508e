"""Rendering of `gpuplan plan`: the training and serving answers, the options and the advice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import table


def _num(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def _usd(x: float | None) -> str:
    return units.format_usd(x) if x is not None else "-"


def _options(con: Console, r: dict[str, Any]) -> None:
    cols = [("device", "left"), ("$/GPU-h", "right")]
    has_t, has_s = "train" in r, "serve" in r
    if has_t:
        cols += [("train GPUs", "right"), ("days", "right"), ("cost", "right"),
                 ("train bound", "left")]
    if has_s:
        cols += [("serve GPUs", "right"), ("TP", "right"), ("$/M out tok", "right"),
                 ("serve bound", "left")]
    t = table("options: every catalog device (screens; see assumptions)", cols,
              caption="train: ZeRO-3 data parallel on the fewest GPUs (>= --gpus) that fit; "
                      "serve: GPUs to meet the SLO at the rate; '-' = no catalog price or "
                      "does not fit")
    for o in r["options"]:
        row = [o["device"], _num(o["usd_per_gpu_hour"], ".2f")]
        if has_t:
            tr = o["train"]
            row += [_num(tr["gpus"], ","), _num(tr["time_s"] and tr["time_s"] / 86400, ",.3g"),
                    _usd(tr["cost_usd"]), tr["bottleneck"]]
        if has_s:
            s = o["serve"]
            ok = s["meets_slo"]
            row += [_num(s["gpus"] if ok else None, ","), str(s["tp"]),
                    _usd(s["usd_per_million_tokens"]), s["bottleneck"] if ok or not s["fits"]
                    else "latency (SLO missed)"]
        t.add_row(*row)
    con.print(t)


def render_plan(con: Console, r: dict[str, Any],
                render_serve: Callable[[Console, dict[str, Any]], None]) -> None:
    """The page of `gpuplan plan` from its JSON object; `render_serve` draws `serve`'s table
    (the CLI passes `gpuplan serve`'s renderer)."""
    con.print(f"[bold]{r['model']}: plan on {r['device']}[/bold]")
    for k, v in r["assumptions"].items():
        con.print(f"  {k}: {v}")
    if "train" in r:
        from gpuplan.report.train import render_train

        render_train(con, r["train"])
    if "serve" in r:
        render_serve(con, r["serve"])
    _options(con, r)
    con.print("[bold]advice[/bold]")
    for i, a in enumerate(r["advice"], 1):
        con.print(f"{i}. {a}")
    for k, c in r["commands"].items():
        con.print(f"re-run {k}: {c}", soft_wrap=True)
