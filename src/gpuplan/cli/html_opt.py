"""`--html FILE`: a self-contained HTML report of a command's result (see report/html.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan.report.files import HTML_SUFFIXES, output_path
from gpuplan.specs.files import user_path


def _check(path: Path | None) -> Path | None:
    """Refuse a path that cannot be written before any work is done: an empty name, another
    extension than .html/.htm, a missing folder, a folder or a special file (/dev/full)."""
    if path is None:
        return None
    return output_path("--html", user_path(path), HTML_SUFFIXES)


HtmlOpt = Annotated[Path | None, typer.Option(
    "--html", callback=_check,
    help="write a self-contained HTML report (charts, inputs, assumptions; offline)")]

_NOT_INPUTS = frozenset({"as_json", "html", "plot"})


def write(path: Path, command: str, result: dict[str, Any], ctx: typer.Context,
          quiet: bool) -> None:
    """Write the report atomically; the inputs are the command's parsed options."""
    from gpuplan.report.html import write_report

    inputs = {k: v for k, v in ctx.params.items() if k not in _NOT_INPUTS}
    write_report(path, command, result, inputs)
    if not quiet:
        Console(stderr=True).print(f"HTML report written to {path}")
