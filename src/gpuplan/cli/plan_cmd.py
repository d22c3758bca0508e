"""`gpuplan plan`: the main job on stated defaults: fit, speed, cost and choice together."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import finite
from gpuplan.estimate import plan_defaults as p
from gpuplan.report.output import emit
from gpuplan.specs.limits import MAX_GPUS, MAX_SEQ, MAX_TOKENS


class PlanGoal(str, Enum):
    train = "train"
    serve = "serve"
    both = "both"


def serve_price(device: str) -> tuple[float | None, str | None]:
    """(rate, source) as `gpuplan serve` costs a device without --usd-per-gpu-hour."""
    from gpuplan.cli.cost_cmd import on_demand_price

    p_ = on_demand_price(device, None, None)
    return p_["usd_per_gpu_hour"], p_["source"] + (f" ({p_['as_of']})" if p_.get("as_of")
                                                   else "")


def register(app: typer.Typer) -> None:
    @app.command()
    def plan(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str | None, typer.Option(
            "--gpu", "-g", help=f"device name or .toml (default {p.DEFAULT_GPU})")] = None,
        gpus: Annotated[int, typer.Option(
            "--gpus", "-n", min=1, max=MAX_GPUS, help="training GPUs")] = p.DEFAULT_GPUS,
        goal: Annotated[PlanGoal, typer.Option("--goal")] = PlanGoal.both,
        tokens: Annotated[float | None, typer.Option(
            "--tokens", callback=finite(1, MAX_TOKENS),
            help="training tokens (default: 20 per parameter)")] = None,
        rate: Annotated[float, typer.Option(
            "--rate", callback=finite(0.001, 1e9), help="serving load, requests per second")] = p.CHAT_RATE,
        prompt_len: Annotated[int, typer.Option("--prompt-len", min=1, max=MAX_SEQ)] = p.CHAT_PROMPT,
        output_len: Annotated[int, typer.Option("--output-len", min=1, max=MAX_SEQ)] = p.CHAT_OUTPUT,
        slo_ttft: Annotated[float, typer.Option(
            "--slo-ttft", callback=finite(0.0, 1e6, lo_open=True), help="seconds")] =
        p.SLO_TTFT_S,
        slo_tpot: Annotated[float, typer.Option(
            "--slo-tpot", callback=finite(0.0, 1e6, lo_open=True), help="seconds")] =
        p.SLO_TPOT_S,
        as_json: JsonOpt = False,
    ) -> None:
        """Will it fit, how fast, what it costs, and what to use: training and serving."""
        from dataclasses import replace

        from gpuplan.cli.guards import PLAN_USES, default_len, goal_rules
        from gpuplan.cli.job_opts import DEFAULTS, train_job
        from gpuplan.cli.train_cmd import train_price
        from gpuplan.estimate.efficiency import framework_efficiency
        from gpuplan.estimate.plan import PlanInputs, build_plan
        from gpuplan.estimate.serve_rank import ServeLoad
        from gpuplan.report.plan import render_plan
        from gpuplan.report.serve import render
        from gpuplan.specs.catalog import device_catalog, get_device, get_model
        from gpuplan.specs.device import Device
        from gpuplan.specs.framework import get_framework
        from gpuplan.specs.prices import load_prices
        from gpuplan.specs.workload import TrainConfig

        goal_rules(ctx, goal, PLAN_USES)
        name = gpu or p.DEFAULT_GPU
        m, d = get_model(model), get_device(name)
        fw = get_framework(None)  # train's default stack, as `gpuplan train` sets it up
        o = dict(DEFAULTS)
        o["seq_len"] = default_len(m, o["seq_len"], TrainConfig().seq_len)
        job = train_job(o, 1, d.kind)
        # the user's kernels stay unstated (None) so each searched layout takes its stack's
        base = replace(fw.apply(job, named=False), fused=job.fused)
        train_eff = (framework_efficiency(d, fw), fw.describe())
        inp = PlanInputs(gpus, tokens, ServeLoad(prompt_len, output_len, rate, slo_ttft,
                                                   slo_tpot))
        table_ = load_prices(None)

        def price(dev: Device) -> float | None:
            return table_.usd(dev.name, "on_demand") or dev.cloud_usd_per_hour

        r = build_plan(m, d, base, inp, goal.value, list(device_catalog()), price,
                       (model, name), train_price(d, None, None), serve_price(d.name),
                       train_eff, train_auto=bool(fw.chosen_by))
        emit(r, as_json, lambda con: render_plan(con, r, render))
