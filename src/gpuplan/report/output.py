"""Output helpers shared by the commands: JSON (SI units, bytes as integers) and rich tables."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


def console() -> Console:
    """Terminal width when interactive; 160 columns when piped so tables keep their names."""
    probe = Console()
    return Console(highlight=False, soft_wrap=False,
                   width=None if probe.is_terminal else 160)


def _clean(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def print_json(obj: dict[str, Any]) -> None:
    """One JSON object on stdout."""
    print(json.dumps(_clean(obj), indent=2))


def emit(obj: dict[str, Any], as_json: bool, render: Callable[[Console], None]) -> None:
    if as_json:
        print_json(obj)
    else:
        render(console())


def table(title: str, columns: list[tuple[str, str]], caption: str | None = None,
          wrap: tuple[int, ...] | None = None) -> Table:
    """A table with (header, justify) columns, drawn compactly so it fits 80 columns.

    No outer frame and two spaces between columns. Text columns (left-justified, or those in
    `wrap`) give way first and are never cut with an ellipsis: they wrap, so rows that differ
    late stay apart; number columns (right-justified) do not wrap. The first column keeps at
    least 10 characters."""
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
    for i, (header, justify) in enumerate(columns):
        wraps = (justify == "left") if wrap is None else (i in wrap)
        t.add_column(header, justify=justify, no_wrap=not wraps,  # type: ignore[arg-type]
                     overflow="fold" if wraps else "ellipsis",
                     min_width=min(10, max(len(header), 4)) if i == 0 else None)
    return t


_PREFIXES = (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0),
             ("m", 1e-3), ("µ", 1e-6), ("n", 1e-9))


def column_scale(values: list[float], unit: str) -> tuple[str, float]:
    """One unit for a whole column: the SI prefix that puts the column's largest value in
    [1, 1000), e.g. ([3.1e-3, 2.2e-2], "s") -> ("ms", 1e-3). Header gets the unit, cells numbers."""
    top = max((abs(v) for v in values), default=0.0)
    for prefix, scale in _PREFIXES:
        if top >= scale:
            return f"{'K' if prefix == 'k' and unit == 'B' else prefix}{unit}", scale
    return unit, 1.0


def num(x: float, scale: float = 1.0) -> str:
    """A cell in a scaled column: three significant digits, never exponent notation."""
    v = x / scale
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 0.001:
        return f"{v:.3g}"
    return "<0.001"
