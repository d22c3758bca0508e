"""Terminal report of `gpuplan profile`."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan.report.output import column_scale, num, table
from gpuplan.units import format_bytes, format_seconds


def _s(x: float | None) -> str:
    return "-" if x is None else format_seconds(x)


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def render(con: Console, r: dict[str, Any]) -> None:
    step = r["step_time_s"]
    con.print(f"[bold]{r['model']}[/bold] on {r['device']}: {format_seconds(step)} per step "
              f"(mean of {r['steps']} measured steps after warm-up)")
    t = table("where the step goes (host wall time)", [("phase", "left"), ("per step", "right"),
                                                       ("share", "right")])
    for k, v in r["breakdown_s"].items():
        t.add_row(k, format_seconds(v), _share(v / step if step else None))
    con.print(t)
    reads = r["host_reads"]
    con.print(f"host reads per step: {reads['per_step']:g}" + "".join(
        f"\n  {s['call']}() at {s['file']}:{s['line']}  {s['per_step']:g}/step"
        for s in reads["sites"][:5]))
    for kind, c in r["host_to_device"].items():
        if c["bytes"]:
            bw = c["bw_bytes_per_s"]
            con.print(f"host-to-device ({kind}): {format_bytes(c['bytes'])} per step in "
                      f"{format_seconds(c['time_s'])}" + (f", {bw / 1e9:.3g} GB/s" if bw else ""))
    if r["device_idle"]:
        i = r["device_idle"]
        con.print(f"device idle: {format_seconds(i['idle_s'])} per step (busy "
                  f"{i['busy_fraction']:.0%}); after host reads {format_seconds(i['after_host_read_s'])}")
    _ops(con, r)
    _predicted(con, r)
    _advice(con, r)
    con.print("assumptions: " + "; ".join(f"{k}: {v}" for k, v in r["assumptions"].items()))


def _ops(con: Console, r: dict[str, Any]) -> None:
    ops = r["ops"][:15]

    def scale(key: str, unit: str) -> tuple[str, float]:
        return column_scale([o[key] for o in ops if o[key] is not None], unit)

    tu, ts = scale("time_s", "s")
    fu, fs = scale("flops", "FLOP")
    bu, bs = scale("bytes", "B")
    ru, rs = scale("flops_per_s", "FLOP/s")
    wu, ws = scale("bytes_per_s", "B/s")

    def cell(x: float | None, sc: float) -> str:
        return "-" if x is None else num(x, sc)

    t = table("operators, slowest first", [
        ("op", "left"), ("phase", "left"), ("kind", "left"), ("calls", "right"),
        (tu, "right"), (fu, "right"), (bu, "right"), (ru, "right"), (wu, "right"),
        ("roof", "right")],
        caption=f"calls, {tu}, {fu} and {bu} per step; {ru} and {wu} attained; roof = "
                "attainable time on the roofline / measured time; fwd/bwd = forward/backward")
    short = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}
    for o in ops:
        t.add_row(o["name"], short.get(o["phase"], o["phase"]), o["kind"],
                  f"{o['calls_per_step']:g}", num(o["time_s"], ts), cell(o["flops"], fs),
                  cell(o["bytes"], bs), cell(o["flops_per_s"], rs), cell(o["bytes_per_s"], ws),
                  _share(o["roofline_share"]))
    con.print(t)


def _predicted(con: Console, r: dict[str, Any]) -> None:
    p = r["predicted"]
    if not p:
        con.print(f"predicted vs measured: not available ({r['assumptions'].get('counting')})")
        return
    t = table(f"predicted (gpuplan, {p['device']}) vs measured", [
        ("component", "left"), ("predicted", "right"), ("measured", "right"),
        ("error", "right")], caption=p["note"])
    for k, c in p["components"].items():
        err = c["error"]
        t.add_row(k, _s(c["predicted_s"]), _s(c["measured_s"]),
                  "-" if err is None else f"{err:+.0%}")
    con.print(t)


def _advice(con: Console, r: dict[str, Any]) -> None:
    if not r["advice"]:
        con.print("advice: nothing above 1% of the step found")
        return
    t = table("advice, ranked by expected time saved per step",
              [("#", "right"), ("kind", "left"), ("saves", "right"), ("what to do", "left")])
    for i, a in enumerate(r["advice"], 1):
        t.add_row(str(i), a["kind"], format_seconds(a["expected_saving_s"]), a["text"])
    con.print(t)
