"""`gpuplan roofline`: every op of a step on a device's roofline, fusion and attention compared."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.options import AttentionChoice, DtypeChoice, PhaseChoice
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.report.output import column_scale, emit, num, table


def _ridge(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def _render(con: Console, r: dict[str, Any], top: int, sweep: list[dict[str, Any]] | None) -> None:
    eff = r["assumptions"]["efficiency"]
    ctx = "context" if r["phase"] == "decode" else "seq"
    shown = r["ops"][:top]
    fl_u, fl_s = column_scale([o["flops"] for o in shown], "FLOP")
    by_u, by_s = column_scale([o["bytes"] for o in shown], "B")
    tm_u, tm_s = column_scale([o["time_s"] for o in shown], "s")
    t = table(
        f"{r['model']} {r['phase']} on {r['device']}: batch {r['batch']}, {ctx} {r['seq_len']}, "
        f"{r['dtype']}, {r['attention']} attention{' (fused)' if r['fused'] else ''}",
        [("op", "left"), ("kind", "left"), ("x", "right"), (fl_u, "right"),
         (by_u, "right"), ("FLOP/B", "right"), ("bound", "left"), (tm_u, "right"),
         ("share", "right")],
        caption=(f"x = how many times the op runs per step (the layer count for `layers.` ops); "
                 f"{fl_u}, {by_u} and {tm_u} are totals over the x runs; FLOP/B = arithmetic "
                 f"intensity; share = of step time. "
                 f"Ridge point {_ridge(r['ridge_flops_per_byte'])} FLOP/B ({r['dtype']}, "
                 f"{r.get('ridge_source', 'datasheet')}). "
                 f"Assumed: {eff['source']}; {eff['kernel_overhead_s'] * 1e6:.0f} µs per kernel."))
    for o in shown:
        t.add_row(o["name"], o["kind"], str(o["count"]), num(o["flops"], fl_s),
                  num(o["bytes"], by_s), f"{o['intensity']:.1f}", o["bound"],
                  num(o["time_s"], tm_s), f"{o['share']:.1%}")
    if len(r["ops"]) > top:
        rest = r["ops"][top:]
        t.add_row(f"... {len(rest)} more ops", "", "", "", "", "", "",
                  num(sum(o["time_s"] for o in rest), tm_s),
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
        shown_c = [c for c in f["chains"] if c["bytes_saved"] > 0][:12]
        tu, ts = column_scale([max(c["time_before_s"], c["time_after_s"]) for c in shown_c], "s")
        bu, bs = column_scale([c["bytes_saved"] for c in shown_c], "B")
        ft = table(f"fusion: eager {units.format_seconds(f['unfused_time_s'])} -> fused "
                   f"{units.format_seconds(f['fused_time_s'])} ({f['speedup']:.2f}x), "
                   f"{units.format_bytes(f['bytes_saved'])} less traffic",
                   [("fused chain", "left"), ("phase", "left"), (f"saved {bu}", "right"),
                    (f"before {tu}", "right"), (f"after {tu}", "right"), ("speedup", "right")],
                   caption="saved = memory traffic the fusion removes; before/after = the "
                           "chain's time unfused and fused, all layers")
        for c in shown_c:
            ft.add_row(" + ".join(c["ops"]), c["phase"], num(c["bytes_saved"], bs),
                       num(c["time_before_s"], ts), num(c["time_after_s"], ts),
                       f"{c['speedup']:.2f}x")
        con.print(ft)
    if sweep:
        keys = [("naive", "bytes", "B"), ("flash", "bytes", "B"), ("naive", "saved_bytes", "B"),
                ("flash", "saved_bytes", "B"), ("naive", "time_s", "s"), ("flash", "time_s", "s")]
        scales = [column_scale([row[a][k] for row in sweep], u) for a, k, u in keys]
        heads = ["naive", "flash", "naive saved", "flash saved", "naive", "flash"]
        at = table("attention core, all layers: naive (scores in memory) vs flash",
                   [("seq", "right")] + [(f"{h} {su}", "right") for h, (su, _) in
                                         zip(heads, scales)],
                   caption="bytes = memory traffic of the attention core; saved = activations "
                           "kept for backward; times at this device's rates")
        for row in sweep:
            at.add_row(str(row["seq_len"]), *(num(row[a][k], sc) for (a, k, _), (_, sc) in
                                              zip(keys, scales)))
        con.print(at)


def register(app: typer.Typer) -> None:
    @app.command()
    def roofline(
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g", help="device name or .toml")] = "h100",
        batch: Annotated[int, typer.Option("--batch", "-b", min=1)] = 1,
        seq_len: Annotated[int, typer.Option(
            "--seq-len", "-s", min=1, help="tokens per sequence (decode: cached context)")] = 4096,
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
        top: Annotated[int, typer.Option("--top", min=1, help="rows to print")] = 20,
        plot: Annotated[Path | None, typer.Option("--plot", help="write a roofline chart")] = None,
        profile: ProfileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Each op's FLOPs, bytes, intensity and bound on the device; step time; fusion."""
        from gpuplan.estimate.analysis import analyze, attention_sweep
        from gpuplan.estimate.efficiency import ideal_efficiency
        from gpuplan.ops.transformer import Impl
        from gpuplan.specs.catalog import get_device, get_model

        m, d = get_model(model), get_device(gpu)
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
            lens = sorted({max(1, seq_len // 4), max(1, seq_len // 2), seq_len, seq_len * 2,
                           seq_len * 4})
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
        if plot is not None and not as_json:
            Console(stderr=True).print(f"roofline chart written to {plot}")
