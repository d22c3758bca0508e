"""`gpuplan advise`: which device and how many, ranked by the cost to meet a goal."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.cost_cmd import PricesOpt
from gpuplan.cli.guards import finite
from gpuplan.cli.job_opts import DEFAULTS, GlobalBatchOpt, SeqLenOpt
from gpuplan.estimate import plan_defaults as pd
from gpuplan.report.output import emit, table
from gpuplan.specs.limits import MAX_DIM, MAX_SEQ, MAX_TOKENS, MAX_TOP


class GoalChoice(str, Enum):
    pretrain = "pretrain"
    finetune = "finetune"
    lora = "lora"
    qlora = "qlora"
    serve = "serve"


def _render(con: Console, r: dict[str, Any], top: int) -> None:
    g = r["goal"]
    budget = f", budget {units.format_usd(g['budget_usd'])}" if g["budget_usd"] else ""
    t = table(f"{r['model']}: {g['kind']} on {units.format_count(g['tokens'])} tokens within "
              f"{g['deadline_s'] / 86400:g} days{budget}",
              [("#", "right"), ("device", "left"), ("GPUs", "right"), ("fits", "left"),
               ("meets goal", "left"), ("cost", "right"), ("days", "right"), ("why", "left")],
              caption="Cost = GPU-hours x the on-demand price basis ("
                      + r["price_basis"].get("on_demand", "user prices") + "). 'screened' rows "
                      f"assume {r['assumptions']['screen_mfu']:.0%} MFU; the others ran the "
                      "layout search or step model.")
    rows = r["ranking"]
    shown = rows[:top] + ([rows[-1]] if rows and rows[-1] not in rows[:top] else [])
    for i, o in enumerate(shown, 1):
        t.add_row(str(i) if o["method"] != "cpu" else "cpu", o["device"], f"{o['gpus']:,}",
                  "yes" if o["fits"] else "no", "yes" if o["meets_goal"] else "no",
                  units.format_usd(o["cost_usd"]) if o["cost_usd"] is not None else "-",
                  f"{o['time_days']:,.3g}" if o["time_days"] else "-", o["why"])
    con.print(t)


def _serve(model: str, rate: float, prompt: int, output: int, slo_ttft: float, slo_tpot: float,
           quantized: bool, top: int, prices: Path | None, as_json: bool) -> None:
    """`--goal serve`: devices and TP by $ per million output tokens meeting the SLO."""
    from gpuplan.estimate.serve_rank import ServeLoad, advise_serve
    from gpuplan.report.advise_serve import render_serve_advice
    from gpuplan.specs.catalog import device_catalog, get_model
    from gpuplan.specs.prices import load_prices

    m = get_model(model)
    table_ = load_prices(prices)
    r = advise_serve(m, list(device_catalog()), ServeLoad(prompt, output, rate, slo_ttft,
                                                          slo_tpot),
                     lambda d: table_.usd(d.name, "on_demand"), quantized)
    r["price_basis"] = table_.sources()
    r["user_prices"] = table_.user_file
    emit(r, as_json, lambda con: render_serve_advice(con, r, top))


def register(app: typer.Typer) -> None:
    @app.command()
    def advise(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        goal: Annotated[GoalChoice, typer.Option("--goal")] = GoalChoice.pretrain,
        tokens: Annotated[float | None, typer.Option(
            "--tokens", callback=finite(1, MAX_TOKENS),
            help="default: 20 per parameter (pretrain), 1e8 (fine-tuning)")]
        = None,
        budget: Annotated[float | None, typer.Option(
            "--budget", callback=finite(0, 1e15), help="US$")] = None,
        deadline: Annotated[float | None, typer.Option(
            "--deadline", callback=finite(0.001, 36500.0, unit=" days"),
            help="days (default 90 pretrain, 7 fine-tuning)")] = None,
        seq_len: SeqLenOpt = DEFAULTS["seq_len"],
        global_batch: GlobalBatchOpt = DEFAULTS["global_batch"],
        lora_rank: Annotated[int, typer.Option("--lora-rank", min=1, max=MAX_DIM)] = 16,
        top: Annotated[int, typer.Option(
            "--top", min=1, max=MAX_TOP, help="rows in the table")] = 10,
        rate: Annotated[float, typer.Option(
            "--rate", callback=finite(0.001, 1e9, unit=" requests/s"),
            rich_help_panel="serve goal", help="requests per second")] = pd.CHAT_RATE,
        prompt_len: Annotated[int, typer.Option(
            "--prompt-len", min=1, max=MAX_SEQ, rich_help_panel="serve goal")] = pd.CHAT_PROMPT,
        output_len: Annotated[int, typer.Option(
            "--output-len", min=1, max=MAX_SEQ, rich_help_panel="serve goal")] = pd.CHAT_OUTPUT,
        slo_ttft: Annotated[float, typer.Option(
            "--slo-ttft", callback=finite(0.0, 1e6, lo_open=True, unit=" s"),
            rich_help_panel="serve goal", help="seconds")] = pd.SLO_TTFT_S,
        slo_tpot: Annotated[float, typer.Option(
            "--slo-tpot", callback=finite(0.0, 1e6, lo_open=True, unit=" s"),
            rich_help_panel="serve goal", help="seconds")] = pd.SLO_TPOT_S,
        quantized: Annotated[bool, typer.Option(
            "--quantized", rich_help_panel="serve goal",
            help="also try fp8 weights (where native) and int4 weight-only")] = False,
        prices: PricesOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Rank devices and cluster sizes by the cost to meet a goal, with the reason for each."""
        from gpuplan.cli.guards import ADVISE_USES, goal_rules

        goal_rules(ctx, goal, ADVISE_USES)
        if goal is GoalChoice.serve:
            _serve(model, rate, prompt_len, output_len, slo_ttft, slo_tpot, quantized, top,
                   prices, as_json)
            return
        from gpuplan.estimate.advise import advise as rank
        from gpuplan.estimate.advise import make_goal
        from gpuplan.specs.catalog import device_catalog, get_model
        from gpuplan.specs.prices import load_prices

        m = get_model(model)
        table_ = load_prices(prices)
        g = make_goal(m, goal.value, tokens, deadline, budget, seq_len, global_batch, lora_rank)
        r = rank(m, list(device_catalog()), g, lambda name: table_.usd(name, "on_demand"))
        r["price_basis"] = table_.sources()
        r["user_prices"] = table_.user_file
        emit(r, as_json, lambda con: _render(con, r, top))
