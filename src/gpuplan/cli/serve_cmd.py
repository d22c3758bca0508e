"""`gpuplan serve`: prefill/decode latency of a batch, the saturating throughput, a simulated
request stream (continuous or static batching), and dollars per million tokens."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import finite, serve_rules
from gpuplan.cli.options import StoreDtype
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.errors import InputError
from gpuplan.report.output import emit
from gpuplan.specs.limits import MAX_BATCH, MAX_GPUS, MAX_REQUESTS, MAX_SEQ, MAX_USD_PER_GPU_HOUR

MAX_RATE = 1e9
"""requests per second (--rate); a saturating load is --max-throughput"""
MAX_SLO_S = 1e6
MAX_BLOCK = 2**20


class Scheduler(str, Enum):
    continuous = "continuous"
    static = "static"


def _int_len(field: str, v: str) -> int:
    try:
        n = int(v)
    except ValueError:
        raise InputError(field, v, "a whole number of tokens here (distributions need --rate "
                         "or --max-throughput)") from None
    if not 1 <= n <= MAX_SEQ:
        raise InputError(field, v, f"a whole number from 1 to {MAX_SEQ}")
    return n


def _read(path: Path, what: str) -> str:
    from gpuplan.specs.files import read_text

    return read_text(path, what)


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g", help="device name or .toml")] = "h100",
        tp: Annotated[int, typer.Option("--tp", min=1, max=MAX_GPUS)] = 1,
        weight_dtype: Annotated[StoreDtype, typer.Option("--weight-dtype")] = StoreDtype.bf16,
        kv_dtype: Annotated[StoreDtype, typer.Option("--kv-dtype")] = StoreDtype.bf16,
        weight_only: Annotated[bool, typer.Option(
            "--weight-only", help="dequantize quantized weights in the matmul (W4A16/W8A16) "
                                  "even where the device has a tensor rate for them")] = False,
        paged_attention: Annotated[bool, typer.Option(
            "--paged-attention", help="PagedAttention kernels (vLLM) instead of a contiguous "
                                      "KV cache (FlashAttention/FlashDecoding)")] = False,
        prompt_len: Annotated[str, typer.Option(
            "--prompt-len", help="tokens, or with --rate/--max-throughput a distribution: "
                                 "uniform:LO:HI, normal:MEAN:STD, lognormal:MEDIAN:SIGMA, "
                                 "exponential:MEAN")] = "512",
        output_len: Annotated[str, typer.Option("--output-len", help="as --prompt-len")] =
        "256",
        batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=MAX_BATCH)] = 1,
        max_throughput: Annotated[bool, typer.Option(
            "--max-throughput", help="saturating load: every request queued at t=0")] = False,
        rate: Annotated[float | None, typer.Option(
            "--rate", callback=finite(0.0, MAX_RATE, lo_open=True, unit=" requests/s"),
            help="Poisson arrivals, requests per second")] = None,
        requests: Annotated[int | None, typer.Option("--requests", min=1, max=MAX_REQUESTS)] = None,
        scheduler: Annotated[Scheduler, typer.Option("--scheduler")] = Scheduler.continuous,
        chunked_prefill: Annotated[bool, typer.Option("--chunked-prefill")] = False,
        seed: Annotated[int, typer.Option("--seed", min=0, max=2**63 - 1)] = 0,
        trace: Annotated[Path | None, typer.Option(
            "--trace", help="CSV with arrival_s, prompt_tokens, output_tokens")] = None,
        slo_ttft: Annotated[float | None, typer.Option(
            "--slo-ttft", callback=finite(0.0, MAX_SLO_S, lo_open=True, unit=" s"))] = None,
        slo_tpot: Annotated[float | None, typer.Option(
            "--slo-tpot", callback=finite(0.0, MAX_SLO_S, lo_open=True, unit=" s"))] = None,
        max_batch: Annotated[int, typer.Option(
            "--max-batch", min=1, max=MAX_BATCH, help="engine: sequences per iteration")] = 2048,
        max_tokens: Annotated[int, typer.Option(
            "--max-tokens", min=1, max=MAX_BATCH * 64, help="engine: tokens per iteration")] = 8192,
        block_size: Annotated[int | None, typer.Option(
            "--block-size", min=1, max=MAX_BLOCK, help="paged KV block, tokens (default 32, TensorRT-LLM's)")]
        = None,
        kv_fraction: Annotated[float, typer.Option(
            "--kv-fraction", min=0.05, max=1.0,
            help="share of the free memory given to the KV cache")] = 0.90,
        usd_per_gpu_hour: Annotated[float | None, typer.Option(
            "--usd-per-gpu-hour", callback=finite(0.0, MAX_USD_PER_GPU_HOUR),
            help="default: the on-demand price basis (gpuplan cost)")] = None,
        api_prices: Annotated[Path | None, typer.Option(
            "--api-prices", help="TOML table of API prices (default: the built-in one)")] = None,
        curve: Annotated[bool, typer.Option(
            "--curve", help="throughput vs p99 latency as the load grows")] = False,
        plot: Annotated[Path | None, typer.Option("--plot", help="write the curve chart")] =
        None,
        profile: ProfileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Serving latency (TTFT, TPOT), throughput under load, and $ per million tokens."""
        from gpuplan.estimate.latency import step_model
        from gpuplan.report.serve import render
        from gpuplan.specs.catalog import get_device, get_model
        from gpuplan.specs.serving import ServeConfig

        if plot is not None:
            from gpuplan.report.files import PLOT_SUFFIXES, output_path

            plot = output_path("--plot", plot, PLOT_SUFFIXES)
        serve_rules(ctx, {"trace": trace, "max_throughput": max_throughput, "rate": rate,
                          "curve": curve, "plot": plot})
        m, d = get_model(model), get_device(gpu)
        cfg = ServeConfig(weight_dtype=weight_dtype.value, kv_dtype=kv_dtype.value, tp=tp,
                          attention="paged" if paged_attention else "flash",
                          weight_only=weight_only)
        eff, prof = None, None
        if profile is not None:
            from gpuplan.cli.profile_opt import apply

            eff, prof = apply(profile, d)
        sm = step_model(m, d, cfg, eff)
        ctx = {"m": m, "d": d, "cfg": cfg, "sm": sm}
        block_size = block_size or 32
        simulated = (max_throughput or rate is not None or trace is not None or curve
                     or plot is not None)
        if simulated:
            from gpuplan.estimate.serve_plan import run_sim

            r = run_sim(ctx, prompt_len, output_len, max_throughput, rate, requests, scheduler.value,
                        chunked_prefill, seed, _read(trace, "--trace") if trace else None, slo_ttft,
                        slo_tpot, max_batch, max_tokens, block_size, kv_fraction, curve or
                        plot is not None, f"--trace {trace}" if trace else None)
        else:
            from gpuplan.estimate.serve_plan import run_latency

            r = run_latency(ctx, _int_len("--prompt-len", prompt_len),
                            _int_len("--output-len", output_len), batch, block_size)
        from gpuplan.cli.cost_cmd import on_demand_price
        from gpuplan.estimate.serve_plan import add_cost

        price = on_demand_price(ctx["d"].name, usd_per_gpu_hour, None)  # same basis as train
        add_cost(r, ctx, price["usd_per_gpu_hour"],
                 _read(api_prices, "--api-prices") if api_prices else None,
                 price["source"] + (f" ({price['as_of']})" if price.get("as_of") else ""))
        if prof is not None:
            r["assumptions"]["profile"] = prof
        if plot is not None:
            from gpuplan.report.serving_plot import curve_chart

            r["plot"] = str(curve_chart(r["curve"], plot, f"{m.name} on {tp} x {d.name}"))
        r = {"model": m.name, "device": d.name, **r}
        emit(r, as_json, lambda con: render(con, r))
