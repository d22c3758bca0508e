"""Output helpers shared by the commands: JSON (SI units, bytes as integers) and rich tables."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

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


def table(title: str, columns: list[tuple[str, str]], caption: str | None = None) -> Table:
    """A table with (header, justify) columns."""
    t = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for header, justify in columns:
        t.add_column(header, justify=justify)  # type: ignore[arg-type]
    return t
