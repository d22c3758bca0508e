"""`gpuplan roofline`: every op of a step on a device's roofline, fusion and attention compared."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import default_len, positions, precision
from gpuplan.cli.html_opt import HtmlOpt
from gpuplan.cli.options import AttentionChoice, DtypeChoice, PhaseChoice
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.report.files import PLOT_SUFFIXES, output_path
from gpuplan.report.output import emit, table
from gpuplan.specs.limits import MAX_BATCH, MAX_SEQ, MAX_TOP


def _ridge(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def _render(con: Console, r: dict[str, Any], top: int, sweep: list[dict[str, Any]] | None) -> None:
    eff = r["assumptions"]["efficiency"]
    ctx = "context" if r["phase"] == "decode" else "seq"
    t = table(
        f"{r['model']} {r['phase']} on {r['device']}: batch {r['batch']}, {ctx} {r['seq_len']}, "
        f"{r['dtype']}, {r['attention']} attention{' (fused)' if r['fused'] else ''}",
        [("op", "left"), ("kind", "left"), ("x", "right"), ("FLOPs", "right"),
         ("bytes", "right"), ("FLOP/B", "right"), ("bound", "left"), ("time", "right"),
         ("share", "right")],
        caption=(f"ridge point {_ridge(r['ridge_flops_per_byte'])} FLOP/B ({r['dtype']}, "
                 f"{r.get('ridge_source', 'datasheet')}). "
                 f"Assumed: {eff['source']}; {eff['kernel_overhead_s'] * 1e6:.0f} µs per kernel."))
    for o in r["ops"][:top]:
        t.add_row(o["name"], o["kind"], str(o["count"]), units.format_flops(o["flops"]),
                  units.format_bytes(o["bytes"]), f"{o['intensity']:.1f}", o["bound"],
                  units.format_seconds(o["time_s"]), f"{o['share']:.1%}")
    if len(r["ops"]) > top:
        rest = r["ops"][top:]
        t.add_row(f"... {len(rest)} more ops", "", "", "", "", "", "",
                  units.format_seconds(sum(o["time_s"] for o in rest)),
                  f"{sum(o['share'] for o in rest):.1%}")
    con.print(t)
    s = table("totals", [("", "left"), ("time", "right")])
    s.add_row("step", units.format_seconds(r["total_time_s"]))
    for k, v in r["time_by_phase"].items():
        s.add_row(f"  {k}", units.format_seconds(v))
    for k, v in sorted(r["time_by_component"].items(), key=lambda kv: -kv[1]):
        s.add_row(f"  component {k}", units.format_seconds(v))
    s.add_row("memory-bound share of time", f"{r['memory_bound_share']:.1%}")
    con.print(s)
    if "fusion" in r:
        f = r["fusion"]
        ft = table(f"fusion: eager {units.format_seconds(f['unfused_time_s'])} -> fused "
                   f"{units.format_seconds(f['fused_time_s'])} ({f['speedup']:.2f}x), "
                   f"{units.format_bytes(f['bytes_saved'])} less traffic",
                   [("fused chain", "left"), ("phase", "left"), ("bytes saved", "right"),
                    ("time before", "right"), ("after", "right"), ("speedup", "right")])
        for c in [c for c in f["chains"] if c["bytes_saved"] > 0][:12]:
            ft.add_row(" + ".join(c["ops"]), c["phase"], units.format_bytes(c["bytes_saved"]),
                       units.format_seconds(c["time_before_s"]),
                       units.format_seconds(c["time_after_s"]), f"{c['speedup']:.2f}x")
        con.print(ft)
    if sweep:
        at = table("attention core, all layers: naive (scores in memory) vs flash",
                   [("seq", "right"), ("naive bytes", "right"), ("flash bytes", "right"),
                    ("naive saved", "right"), ("flash saved", "right"), ("naive time", "right"),
                    ("flash time", "right")])
        for row in sweep:
            n, fl = row["naive"], row["flash"]
            at.add_row(str(row["seq_len"]), units.format_bytes(n["bytes"]),
                       units.format_bytes(fl["bytes"]), units.format_bytes(n["saved_bytes"]),
                       units.format_bytes(fl["saved_bytes"]), units.format_seconds(n["time_s"]),
                       units.format_seconds(fl["time_s"]))
        con.print(at)


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
        r = a.to_json()
        if prof is not None:
            r["assumptions"]["profile"] = prof
            mdt = impl.matmul_dtype or impl.dtype
            if eff is not None and mdt in eff.measured:
                r["ridge_flops_per_byte"] = eff.measured[mdt] / eff.measured["memory"]
                r["ridge_source"] = "measured profile"
        sweep = None
        if compare_attention and phase.value != "decode":
            lens = sorted(n for n in {max(1, seq_len // 4), max(1, seq_len // 2), seq_len,
                                      seq_len * 2, seq_len * 4}
                          if n <= m.max_position_embeddings)  # no longer than its positions
            sweep = attention_sweep(m, d, batch, lens, impl, train=phase.value == "train")
            r["attention_comparison"] = sweep
        if plot is not None:
            from gpuplan.report.plot import roofline_chart

            pts = [{"name": o["name"], "intensity": o["intensity"], "share": o["share"],
                    "bound": o["bound"], "attained": o["executed_flops"] / o["time_s"]
                    if o["time_s"] else 0.0} for o in r["ops"] if o["flops"] > 0 and o["bytes"] > 0]
            roofline_chart(d, pts, plot, f"{m.name} {phase.value}, batch {batch}, seq {seq_len}"
                           f" on {d.name} (points: ops; size: share of step time)")
            r["plot"] = str(plot)
        emit(r, as_json, lambda con: _render(con, r, top, sweep))
        if html is not None:
            from gpuplan.cli.html_opt import write

            write(html, "roofline", r, ctx, as_json)
        if plot is not None and not as_json:
            Console(stderr=True).print(f"roofline chart written to {plot}")
