"""`gpuplan roofline`: every op of a step on a device's roofline, fusion and attention compared."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import default_len, positions, precision
from gpuplan.cli.html_opt import HtmlOpt
from gpuplan.cli.options import AttentionChoice, DtypeChoice, PhaseChoice
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.estimate.command_results import RooflineResult
from gpuplan.report.files import PLOT_SUFFIXES, output_path
from gpuplan.report.output import emit
from gpuplan.report.roofline import render_roofline
from gpuplan.specs.limits import MAX_BATCH, MAX_SEQ, MAX_TOP


def register(app: typer.Typer) -> None:
    @app.command()
    def roofline(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g", help="device name or .toml")] = "h100",
        batch: Annotated[int, typer.Option("--batch", "-b", min=1, max=MAX_BATCH)] = 1,
        seq_len: Annotated[int | None, typer.Option(
            "--seq-len", "-s", min=1, max=MAX_SEQ,
            help="tokens per sequence (decode: cached context; default 4096, or the model's "
                 "positions if fewer)")] = None,
        phase: Annotated[PhaseChoice, typer.Option("--phase")] = PhaseChoice.train,
        attention: Annotated[AttentionChoice, typer.Option("--attention")] = AttentionChoice.flash,
        dtype: Annotated[DtypeChoice, typer.Option("--dtype", help="compute dtype")] =
        DtypeChoice.bf16,
        fused: Annotated[bool, typer.Option(
            "--fused", help="fuse element-wise chains as a compiler would; show the savings")] =
        False,
        compare_attention: Annotated[bool, typer.Option(
            "--compare-attention", help="naive vs flash attention over sequence lengths")] = False,
        ideal: Annotated[bool, typer.Option(
            "--ideal", help="100% of datasheet peaks, no overheads (a pure bound)")] = False,
        top: Annotated[int, typer.Option("--top", min=1, max=MAX_TOP, help="rows to print")] =
        20,
        plot: Annotated[Path | None, typer.Option("--plot", help="write a roofline chart")] = None,
        profile: ProfileOpt = None,
        html: HtmlOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Each op's FLOPs, bytes, intensity and bound on the device; step time; fusion."""
        from gpuplan.estimate.analysis import analyze, attention_sweep
        from gpuplan.estimate.efficiency import ideal_efficiency
        from gpuplan.ops.transformer import Impl
        from gpuplan.specs.catalog import get_device, get_model

        if plot is not None:
            plot = output_path("--plot", plot, PLOT_SUFFIXES)
        if compare_attention and phase.value == "decode":
            from gpuplan.specs.limits import ConflictError

            raise ConflictError("--compare-attention", "--phase decode", "the comparison "
                                "sweeps the sequence lengths of prefill or training")
        m, d = get_model(model), get_device(gpu)
        seq_len = default_len(m, seq_len, 4096)
        positions(m, seq_len, "--seq-len")
        precision(d, dtype.value, "--dtype")
        impl = Impl(attention=attention.value, dtype="bf16" if dtype.value == "fp8" else
                    dtype.value, matmul_dtype="fp8" if dtype.value == "fp8" else None)
        eff, prof = ideal_efficiency() if ideal else None, None
        if profile is not None:
            from gpuplan.cli.profile_opt import apply
            from gpuplan.errors import GpuplanError

            if ideal:
                raise GpuplanError("--profile and --ideal exclude each other (measured "
                                   "ceilings vs 100% of the datasheet)")
            eff, prof = apply(profile, d)
        a = analyze(m, d, phase.value, batch, seq_len, impl, fused=fused, efficiency=eff)
        res = RooflineResult(a, profile=prof)
        if prof is not None:
            mdt = impl.matmul_dtype or impl.dtype
            if eff is not None and mdt in eff.measured:
                res.measured_ridge_flops_per_byte = eff.measured[mdt] / eff.measured["memory"]
        if compare_attention and phase.value != "decode":
            lens = sorted(n for n in {max(1, seq_len // 4), max(1, seq_len // 2), seq_len,
                                      seq_len * 2, seq_len * 4}
                          if n <= m.max_position_embeddings)  # no longer than its positions
            res.attention_comparison = attention_sweep(m, d, batch, lens, impl,
                                                       train=phase.value == "train")
        if plot is not None:
            from gpuplan.report.plot import roofline_chart

            res.plot_path = str(plot)
            pts = [{"name": o["name"], "intensity": o["intensity"], "share": o["share"],
                    "bound": o["bound"], "attained": o["executed_flops"] / o["time_s"]
                    if o["time_s"] else 0.0} for o in res.to_json()["ops"]
                   if o["flops"] > 0 and o["bytes"] > 0]
            roofline_chart(d, pts, plot, f"{m.name} {phase.value}, batch {batch}, seq {seq_len}"
                           f" on {d.name} (points: ops; size: share of step time)")
        r = res.to_json()
        emit(r, as_json, lambda con: render_roofline(con, r, top))
        if html is not None:
            from gpuplan.cli.html_opt import write

            write(html, "roofline", r, ctx, as_json)
        if plot is not None and not as_json:
            Console(stderr=True).print(f"roofline chart written to {plot}")
