"""`gpuplan profile --html FILE`: one self-contained HTML page (inline SVG, no network): the
step's time breakdown, the ops on this machine's roofline, predicted vs measured, advice."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path
from typing import Any

from gpuplan.units import format_seconds

COLORS = {"input_wait": "#d62728", "host_to_device": "#ff7f0e", "forward": "#1f77b4",
          "backward": "#2ca02c", "optimizer": "#9467bd", "communication": "#8c564b",
          "other": "#7f7f7f"}


def breakdown_svg(r: dict[str, Any], width: int = 640) -> str:
    step = r["step_time_s"] or 1.0
    x, parts = 0.0, []
    for k, v in r["breakdown_s"].items():
        w = width * v / step
        if w > 0:
            parts.append(f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="28" '
                         f'fill="{COLORS[k]}"><title>{k}: {format_seconds(v)}</title></rect>')
        x += w
    legend = "".join(f'<rect x="{i * 90}" y="36" width="10" height="10" fill="{c}"/>'
                     f'<text x="{i * 90 + 14}" y="45" font-size="10">{k}</text>'
                     for i, (k, c) in enumerate(COLORS.items()))
    return f'<svg width="{width}" height="52" role="img">{"".join(parts)}{legend}</svg>'


def roofline_svg(r: dict[str, Any], w: int = 640, h: int = 360) -> str:
    roof = r["roofline"]
    pts = [o for o in r["ops"] if o["flops"] and o["bytes"]]
    peak, bw = roof["peak_flops_per_s"], roof["bw_bytes_per_s"]
    if not pts or not peak or not bw:
        return "<p>No op has counted FLOPs and bytes: no roofline chart.</p>"
    xs = [o["flops"] / o["bytes"] for o in pts] + [peak / bw]
    ys = [o["flops_per_s"] for o in pts] + [peak]
    x0, x1 = math.log10(min(xs)) - 0.5, math.log10(max(xs)) + 0.5
    y0, y1 = math.log10(max(min(ys), 1.0)) - 0.5, math.log10(peak) + 0.3

    def sx(v: float) -> float:
        return 50 + (math.log10(v) - x0) / (x1 - x0) * (w - 60)

    def sy(v: float) -> float:
        return h - 30 - (math.log10(max(v, 10 ** y0)) - y0) / (y1 - y0) * (h - 40)

    ridge = peak / bw
    roofs = (f'<polyline fill="none" stroke="black" points="{sx(10 ** x0):.1f},'
             f'{sy(bw * 10 ** x0):.1f} {sx(ridge):.1f},{sy(peak):.1f} {sx(10 ** x1):.1f},'
             f'{sy(peak):.1f}"/>')
    dots = "".join(
        f'<circle cx="{sx(o["flops"] / o["bytes"]):.1f}" cy="{sy(o["flops_per_s"]):.1f}" r="4" '
        f'fill="{"#1f77b4" if o["kind"] in ("matmul", "attention", "conv") else "#ff7f0e"}">'
        f'<title>{escape(o["name"])}: {format_seconds(o["time_s"])}/step, '
        f'{(o["roofline_share"] or 0):.0%} of the roofline</title></circle>' for o in pts)
    axes = (f'<text x="{w / 2:.0f}" y="{h - 5}" font-size="11" text-anchor="middle">arithmetic '
            f'intensity (FLOP/byte, log)</text><text x="12" y="{h / 2:.0f}" font-size="11" '
            f'transform="rotate(-90 12 {h / 2:.0f})" text-anchor="middle">achieved FLOP/s (log)'
            f'</text><line x1="50" y1="{h - 30}" x2="{w}" y2="{h - 30}" stroke="#999"/>'
            f'<line x1="50" y1="0" x2="50" y2="{h - 30}" stroke="#999"/>')
    return f'<svg width="{w}" height="{h}" role="img">{axes}{roofs}{dots}</svg>'


def _rows(cells: list[list[str]]) -> str:
    return "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>"
                   for row in cells)


def page(r: dict[str, Any]) -> str:
    pred = (r["predicted"] or {}).get("components", {})
    pred_rows = [[k, format_seconds(c["predicted_s"]) if c["predicted_s"] is not None else "-",
                  format_seconds(c["measured_s"]),
                  "-" if c["error"] is None else f"{c['error']:+.0%}"] for k, c in pred.items()]
    adv = [[str(i), a["kind"], format_seconds(a["expected_saving_s"]), a["text"]]
           for i, a in enumerate(r["advice"], 1)]
    ops = [[o["name"], o["kind"], format_seconds(o["time_s"]),
            "-" if o["roofline_share"] is None else f"{o['roofline_share']:.0%}"]
           for o in r["ops"][:20]]
    assumptions = "".join(f"<li><b>{escape(k)}</b>: {escape(str(v))}</li>"
                          for k, v in r["assumptions"].items())
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>gpuplan profile: {escape(r['model'])}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}td{{padding:2px 8px}}
table{{border-collapse:collapse}}tr:nth-child(even){{background:#f4f4f4}}</style></head><body>
<h1>{escape(r['model'])} on {escape(r['device'])}</h1>
<p>{format_seconds(r['step_time_s'])} per step, mean of {r['steps']} measured steps;
input wait {r['input_wait_fraction']:.0%}; host reads per step {r['host_reads_per_step']:g}.</p>
<h2>Where the step goes</h2>{breakdown_svg(r)}
<h2>Operators on this machine's roofline</h2>{roofline_svg(r)}
<table><tr><th>op</th><th>kind</th><th>time/step</th><th>roofline</th></tr>{_rows(ops)}</table>
<h2>Predicted vs measured</h2><table><tr><th>component</th><th>predicted</th><th>measured</th>
<th>error</th></tr>{_rows(pred_rows)}</table>
<h2>Advice</h2><table><tr><th>#</th><th>kind</th><th>saves/step</th><th>what to do</th></tr>
{_rows(adv)}</table><h2>Assumptions</h2><ul>{assumptions}</ul></body></html>
"""


def write_html(r: dict[str, Any], path: Path) -> None:
    path.write_text(page(r), encoding="utf-8")
