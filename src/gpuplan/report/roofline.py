"""Rendering of `gpuplan roofline`: the ops on the roofline, the totals, fusion savings and
the naive-vs-flash attention sweep, each column in one unit."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import column_scale, num, table


def _ridge(x: float) -> str:
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"


def render_roofline(con: Console, r: dict[str, Any], top: int) -> None:
    """The tables of `gpuplan roofline` from its JSON object: ops, totals, fusion, sweep."""
    sweep = r.get("attention_comparison")
    eff = r["assumptions"]["efficiency"]
    ctx = "context" if r["phase"] == "decode" else "seq"
    shown = r["ops"][:top]
    fl_u, fl_s = column_scale([o["flops"] for o in shown], "FLOP")
    by_u, by_s = column_scale([o["bytes"] for o in shown], "B")
    tm_u, tm_s = column_scale([o["time_s"] for o in shown], "s")
    prof = r["assumptions"].get("profile")
    on = r["device"] if prof is None else f"{r['device']} at rates measured on {prof['device']}"
    t = table(
        f"{r['model']} {r['phase']} on {on}: batch {r['batch']}, {ctx} {r['seq_len']}, "
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
                                         zip(heads, scales, strict=True)],
                   caption="bytes = memory traffic of the attention core; saved = activations "
                           "kept for backward; times at this device's rates")
        for row in sweep:
            at.add_row(str(row["seq_len"]), *(num(row[a][k], sc) for (a, k, _), (_, sc) in
                                              zip(keys, scales, strict=True)))
        con.print(at)
