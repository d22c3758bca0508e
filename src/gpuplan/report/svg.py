"""Hand-written SVG charts (no library, no network): a stacked bar, horizontal bars, a log-log
roofline and line curves. Pure functions from numbers to one `<svg>` string; every text is
escaped. Styling uses presentation attributes only, so a strict Content-Security-Policy and an
offline HTML file both show them unchanged."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
W = 640


def _text(x: float, y: float, s: str, size: int = 11, anchor: str = "start",
          fill: str = "#222", weight: str = "normal") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'font-weight="{weight}" fill="{fill}" font-family="sans-serif">{escape(s)}</text>')


def _svg(height: float, body: list[str], title: str, testid: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height:.0f}" '
            f'width="{W}" height="{height:.0f}" role="img" data-testid="{escape(testid)}">'
            f'<title>{escape(title)}</title>{_text(8, 16, title, 13, weight="bold")}'
            + "".join(body) + "</svg>")


def stacked_bar(parts: Sequence[tuple[str, float]], limit: float | None, title: str,
                fmt: Callable[[float], str], testid: str = "chart-stacked",
                limit_label: str = "capacity") -> str:
    """One horizontal bar split into parts, a dashed line at `limit`, and a legend."""
    total = sum(v for _, v in parts)
    top = max(total, limit or 0.0) or 1.0
    x0, width, y = 10.0, W - 20.0, 30.0
    body, x = [], x0
    for i, (label, v) in enumerate(parts):
        w = width * v / top
        body.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0):.1f}" height="28" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(label)}: '
                    f'{escape(fmt(v))}</title></rect>')
        x += w
    if limit:
        lx = x0 + width * limit / top
        body.append(f'<line x1="{lx:.1f}" y1="{y - 6}" x2="{lx:.1f}" y2="{y + 34}" '
                    'stroke="#000" stroke-width="1.5" stroke-dasharray="5,3"/>')
        body.append(_text(min(lx, W - 10), y + 48, f"{limit_label} {fmt(limit)}", 10,
                          "end" if lx > W / 2 else "start"))
    rows = (len(parts) + 1) // 2
    for i, (label, v) in enumerate(parts):
        lx, ly = 10 + (i % 2) * (W / 2), y + 70 + (i // 2) * 16
        body.append(f'<rect x="{lx}" y="{ly - 9}" width="10" height="10" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        share = f" ({v / total:.0%})" if total else ""
        body.append(_text(lx + 14, ly, f"{label}: {fmt(v)}{share}", 10))
    body.append(_text(10, y + 74 + rows * 16, f"total {fmt(total)}", 11, weight="bold"))
    return _svg(y + 84 + rows * 16, body, title, testid)


def hbars(items: Sequence[tuple[str, float]], title: str, fmt: Callable[[float], str],
          testid: str = "chart-bars") -> str:
    """One labelled horizontal bar per item, longest first as given."""
    top = max((v for _, v in items), default=0.0) or 1.0
    label_w, y0 = 170.0, 30.0
    body = []
    for i, (label, v) in enumerate(items):
        y = y0 + i * 20
        w = (W - label_w - 110) * v / top
        body.append(_text(label_w - 6, y + 12, label, 10, "end"))
        body.append(f'<rect x="{label_w}" y="{y}" width="{max(w, 0):.1f}" height="15" '
                    f'fill="{PALETTE[i % len(PALETTE)]}"/>')
        body.append(_text(label_w + w + 4, y + 12, fmt(v), 10))
    return _svg(y0 + 20 * len(items) + 8, body, title, testid)


class _Log:
    """Map [lo, hi] (log10) onto [a, b] pixels."""

    def __init__(self, lo: float, hi: float, a: float, b: float) -> None:
        self.lo, self.hi, self.a, self.b = math.log10(lo), math.log10(hi), a, b

    def __call__(self, v: float) -> float:
        t = (math.log10(max(v, 1e-300)) - self.lo) / ((self.hi - self.lo) or 1.0)
        return self.a + t * (self.b - self.a)

    def ticks(self) -> list[float]:
        return [10.0 ** k for k in range(math.ceil(self.lo), math.floor(self.hi) + 1)]


def _axes(fx: _Log, fy: _Log, xlabel: str, ylabel: str, fmt_y: Callable[[float], str],
          box: tuple[float, float, float, float]) -> list[str]:
    left, top, right, bottom = box
    out = [f'<rect x="{left}" y="{top}" width="{right - left}" height="{bottom - top}" '
           'fill="none" stroke="#999"/>']
    for t in fx.ticks():
        x = fx(t)
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>')
        out.append(_text(x, bottom + 13, f"{t:g}", 9, "middle"))
    for t in fy.ticks():
        y = fy(t)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="#eee"/>')
        out.append(_text(left - 4, y + 3, fmt_y(t), 9, "end"))
    out.append(_text((left + right) / 2, bottom + 28, xlabel, 10, "middle"))
    out.append(_text(left, top - 6, ylabel, 10))
    return out


def roofline(roofs: Sequence[tuple[str, float]], bandwidth: float,
             points: Sequence[dict[str, object]], title: str, fmt_y: Callable[[float], str],
             testid: str = "chart-roofline", label_top: int = 4) -> str:
    """Log-log roofline: each roof min(peak, bandwidth x intensity); points = dicts with
    name, intensity (FLOP/B), attained (FLOP/s), share (0..1), bound ('compute'/'memory')."""
    pts = [p for p in points if float(p["intensity"]) > 0 and float(p["attained"]) > 0]  # type: ignore[arg-type]
    peaks = [pk for _, pk in roofs if pk > 0] or [bandwidth]
    xs = [float(p["intensity"]) for p in pts] or [1.0]  # type: ignore[arg-type]
    x_lo = 10 ** math.floor(math.log10(min(min(xs), 1.0)))
    x_hi = 10 ** math.ceil(math.log10(max(max(xs) * 2, 2 * max(peaks) / bandwidth)))
    y_hi = 10 ** math.ceil(math.log10(max(peaks) * 1.5))
    y_lo = 10 ** math.floor(math.log10(min(bandwidth * x_lo, *[float(p["attained"])  # type: ignore[arg-type]
                                                              for p in pts])))
    box = (70.0, 40.0, W - 20.0, 330.0)
    fx, fy = _Log(x_lo, x_hi, box[0], box[2]), _Log(y_lo, y_hi, box[3], box[1])
    body = _axes(fx, fy, "arithmetic intensity (FLOP / byte)", "attained FLOP/s", fmt_y, box)
    for i, (label, pk) in enumerate(roofs):
        ridge = pk / bandwidth
        body.append(f'<polyline fill="none" stroke="{PALETTE[i % len(PALETTE)]}" '
                    f'stroke-width="2" points="{fx(x_lo):.1f},{fy(bandwidth * x_lo):.1f} '
                    f'{fx(ridge):.1f},{fy(pk):.1f} {fx(x_hi):.1f},{fy(pk):.1f}"/>')
        body.append(_text(box[0] + 150 * i, box[3] + 44, f"— {label} {fmt_y(pk)}, ridge "
                          f"{ridge:.3g}", 9, fill=PALETTE[i % len(PALETTE)]))
    colour = {"compute": "#f28e2b", "memory": "#17becf"}
    ranked = sorted(pts, key=lambda p: -float(p["share"]))  # type: ignore[arg-type]
    for j, p in enumerate(ranked):
        x, y = fx(float(p["intensity"])), fy(float(p["attained"]))  # type: ignore[arg-type]
        r = 3 + 14 * math.sqrt(float(p["share"]))  # type: ignore[arg-type]
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" '
                    f'fill="{colour.get(str(p.get("bound")), "#888")}" fill-opacity="0.6" '
                    f'stroke="#333" stroke-width="0.5"><title>{escape(str(p["name"]))}: '
                    f'{float(p["share"]):.1%} of time</title></circle>')  # type: ignore[arg-type]
        if j < label_top:  # alternate below/above so neighbours do not print over each other
            dy = 12 + 10 * (j // 2) if j % 2 else -(4 + 10 * (j // 2))
            body.append(_text(x - r - 2, y + dy, str(p["name"]).removeprefix("layers."), 8,
                              "end"))
    body.append(_text(box[0], box[3] + 58, "points: ops (area ~ share of time); orange "
                      "compute-bound, teal memory-bound", 9))
    return _svg(box[3] + 66, body, title, testid)


def curves(series: Sequence[tuple[str, Sequence[float], Sequence[float]]], title: str,
           xlabel: str, ylabel: str, fmt_y: Callable[[float], str],
           testid: str = "chart-curve", log_x: bool = True) -> str:
    """Lines with markers (log x, linear y from 0)."""
    allx = [x for _, xs, _ in series for x in xs if x > 0] or [1.0]
    ally = [y for _, _, ys in series for y in ys if y is not None] or [1.0]
    box = (80.0, 40.0, W - 20.0, 300.0)
    y_hi = max(ally) * 1.1 or 1.0
    x_lo, x_hi = min(allx), max(allx)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo / 2, x_hi * 2
    fx = _Log(x_lo, x_hi, box[0] + 10, box[2] - 10) if log_x else None
    body = [f'<rect x="{box[0]}" y="{box[1]}" width="{box[2] - box[0]}" '
            f'height="{box[3] - box[1]}" fill="none" stroke="#999"/>']

    def px(x: float) -> float:
        if fx is not None:
            return fx(x)
        return box[0] + 10 + (x - x_lo) / (x_hi - x_lo) * (box[2] - box[0] - 20)

    def py(y: float) -> float:
        return box[3] - y / y_hi * (box[3] - box[1])

    for k in range(5):
        v = y_hi * k / 4
        body.append(f'<line x1="{box[0]}" y1="{py(v):.1f}" x2="{box[2]}" y2="{py(v):.1f}" '
                    'stroke="#eee"/>')
        body.append(_text(box[0] - 4, py(v) + 3, fmt_y(v), 9, "end"))
    for x in sorted({x for _, xs, _ in series for x in xs}):
        body.append(_text(px(x), box[3] + 13, f"{x:g}", 9, "middle"))
    for i, (label, xs, ys) in enumerate(series):
        c = PALETTE[i % len(PALETTE)]
        pts = [(px(x), py(y)) for x, y in zip(xs, ys, strict=True) if y is not None and x > 0]
        body.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="'
                    + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts) + '"/>')
        body += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3" fill="{c}"/>' for a, b in pts]
        body.append(_text(box[0] + 8, box[1] + 14 + 14 * i, label, 10, fill=c))
    body.append(_text((box[0] + box[2]) / 2, box[3] + 28, xlabel, 10, "middle"))
    body.append(_text(box[0], box[1] - 6, ylabel, 10))
    return _svg(box[3] + 36, body, title, testid)
