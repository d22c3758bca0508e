"""Self-contained HTML reports: one file with the inputs, the numbers, inline SVG charts, the
assumptions and the advice; it opens offline and loads nothing (its Content-Security-Policy
forbids every fetch).

Entry points: `render_report(...)` -> str and `write_report(path, ...)` (atomic: a temporary
file in the same folder, then a rename; a bad path is one GpuplanError). Any command can call
them; charts come from `report.charts` unless given.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

from gpuplan import __version__, units
from gpuplan.errors import GpuplanError
from gpuplan.report.charts import Chart, charts_for

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
_CSS = """body{font-family:sans-serif;margin:2em auto;max-width:980px;color:#222;padding:0 1em}
h1{font-size:1.4em}h2{font-size:1.1em;border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:2px 8px;
font-size:.9em;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}
.chart{margin:1em 0}pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:.8em}
.meta{color:#666;font-size:.85em}.figs{display:flex;flex-wrap:wrap;gap:.5em}
.fig{border:1px solid #ddd;padding:.3em .7em}.fig span{display:block;font-size:.75em;color:#666}"""


def format_value(key: str, v: Any) -> str:
    """A value for people, by the unit its key names (SI suffixes of the JSON contract)."""
    if isinstance(v, bool) or v is None or not isinstance(v, (int, float)):
        return "-" if v is None else str(v)
    for suffix, fmt in (("_bytes", units.format_bytes), ("_flops_per_s", units.format_flops_per_s),
                        ("_bytes_per_s", units.format_bandwidth), ("_flops", units.format_flops),
                        ("_usd", units.format_usd), ("_s", units.format_seconds)):
        if key.endswith(suffix):
            return f"{fmt(v)} ({v:,.6g})" if suffix != "_usd" else fmt(v)
    return f"{v:,}" if isinstance(v, int) else f"{v:.6g}"


# Objects of the JSON contract (DESIGN.md) whose members are bare names of one unit.
_MEMBER_UNIT = {"per_gpu": "_bytes", "other_items": "_bytes"}
# The figures shown first when a result has them (contract keys of the commands).
HEADLINE = ("fits", "total_bytes", "capacity_bytes", "max_batch", "step_time_s", "tokens_per_s",
            "mfu", "total_time_s", "ttft_s", "tpot_s", "output_tokens_per_s",
            "cost_per_million_tokens_usd", "cost_usd", "gpu_hours", "break_even_utilization")


def _rows(d: dict[str, Any], prefix: str = "", depth: int = 2,
          unit: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for k, v in d.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and depth > 0:
            inner = _MEMBER_UNIT.get(str(k)) or next(
                (u for u in ("_bytes", "_s", "_usd", "_flops") if str(k).endswith(u)), "")
            out += _rows(v, name + ".", depth - 1, inner)
        elif isinstance(v, (dict, list)):
            continue
        else:
            out.append((name, format_value(str(k) + unit, v)))
    return out


def _headline(result: dict[str, Any]) -> str:
    cells = "".join(f'<div class="fig"><span>{escape(k)}</span><b>'
                    f"{escape(format_value(k, result[k]).split(' (')[0])}</b></div>"
                    for k in HEADLINE if k in result and not isinstance(result[k], (dict, list)))
    return f'<div class="figs" data-testid="headline">{cells}</div>' if cells else ""


def _table(rows: Sequence[tuple[str, str]], testid: str) -> str:
    body = "".join(f'<tr><th>{escape(k)}</th><td class="n">{escape(v)}</td></tr>'
                   for k, v in rows)
    return f'<table data-testid="{testid}">{body}</table>'


def _records(rows: list[dict[str, Any]], limit: int = 25) -> str:
    cols = [k for k, v in rows[0].items() if not isinstance(v, (dict, list))]
    head = "".join(f"<th>{escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f'<td class="n">{escape(format_value(c, r.get(c)))}</td>'
                                    for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<p>... {len(rows) - limit} more rows in the JSON below</p>" if len(rows) > limit \
        else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _advice(result: dict[str, Any], advice: Sequence[str] | None) -> list[str]:
    out = list(advice or [])
    for a in result.get("advice") or []:
        out.append(a.get("text", str(a)) if isinstance(a, dict) else str(a))
    for i, s in enumerate(result.get("fix") or [], 1):
        out.append(f"fix {i}: {s.get('change')} -> {units.format_bytes(s.get('total_bytes', 0))}"
                   f" per GPU, {'fits' if s.get('fits') else 'does not fit yet'} "
                   f"(cost: {s.get('cost')})")
    return out


def render_report(command: str, result: dict[str, Any], inputs: dict[str, Any] | None = None, *,
                  title: str | None = None, charts: Sequence[Chart] | None = None,
                  advice: Sequence[str] | None = None) -> str:
    """The whole report as one HTML string."""
    charts = list(charts) if charts is not None else charts_for(command, result)
    title = title or f"gpuplan {command}: {result.get('model', '')} on {result.get('device', '')}"
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
             f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
             f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
             f"<h1>{escape(title)}</h1><p class=meta>gpuplan {escape(__version__)}, {when}. "
             "Units: SI (GB = 1e9 bytes); every estimate's assumptions are listed below.</p>"]
    parts.append(_headline(result))
    if charts:
        parts.append("<h2>Charts</h2>" + "".join(f'<div class="chart">{s}</div>'
                                                 for _, s in charts))
    adv = _advice(result, advice)
    if adv:
        parts.append("<h2>Advice</h2><ul>" + "".join(f"<li>{escape(a)}</li>" for a in adv)
                     + "</ul>")
    numbers = {k: v for k, v in result.items() if k != "assumptions"}
    parts.append("<h2>Numbers</h2>" + _table(_rows(numbers), "numbers"))
    for k, v in result.items():
        if isinstance(v, list) and v and all(isinstance(x, dict) for x in v) and k != "fix":
            parts.append(f"<h3>{escape(k)}</h3>{_records(v)}")
    if inputs:
        parts.append("<h2>Inputs</h2>" + _table(
            [(k, "-" if v is None else str(getattr(v, "value", v))) for k, v in inputs.items()],
            "inputs"))
    if isinstance(result.get("assumptions"), dict):
        parts.append("<h2>Assumptions</h2>" + _table(_rows(result["assumptions"], depth=3),
                                                       "assumptions"))
    parts.append("<h2>Full result (JSON)</h2><details><summary>show</summary><pre>"
                 + escape(json.dumps(result, indent=2, default=str)) + "</pre></details>")
    return "".join(parts) + "</body></html>\n"


def write_text_atomic(path: Path, text: str, option: str = "--html") -> Path:
    """Write `text` to `path` through a temporary file and a rename: never half a file."""
    path = Path(path).expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise GpuplanError(f"{option}: {str(path)!r} is a folder; give a file name such as "
                           "report.html")
    if not folder.is_dir():
        raise GpuplanError(f"{option}: folder {str(folder)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as e:
        raise GpuplanError(f"{option}: cannot write in {str(folder)!r} ({e.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)  # mkstemp makes it private; a report is a normal file
        os.replace(tmp, path)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise GpuplanError(f"{option}: cannot write {str(path)!r} ({e.strerror})") from None
    return path


def write_report(path: Path, command: str, result: dict[str, Any],
                 inputs: dict[str, Any] | None = None, **kw: Any) -> Path:
    """Render and write atomically; see `render_report` for the keywords."""
    return write_text_atomic(path, render_report(command, result, inputs, **kw))
