"""`gpuplan profile SCRIPT [-- ARGS]`: run an unmodified training script, profile N steps after
K warm-up steps, and say where the step goes and what to do next."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import finite
from gpuplan.errors import GpuplanError
from gpuplan.report.files import HTML_SUFFIXES, output_path
from gpuplan.report.output import emit


def _fail(message: str, script_traceback: str = "") -> None:
    """The script's own traceback (the user's), then one clear line; exit 1."""
    if script_traceback:
        sys.stderr.write(script_traceback)
    print(f"gpuplan: error: {message}", file=sys.stderr)
    raise typer.Exit(1)


def _check_outcome(out: Any, session: Any, steps: int, warmup: int) -> None:
    seen = session.raw.steps_seen
    if out.status == "raised":
        _fail(f"{out.message} after {seen} optimizer steps; nothing profiled", out.traceback)
    if out.status == "timeout":
        _fail(out.message + "; nothing profiled")
    if session.measured_steps == 0:
        if seen == 0:
            _fail(f"{out.message} without ever calling optimizer.step() of a torch.optim "
                  f"optimizer: no training step to profile (around a custom loop use the Python "
                  f"API: with gpuplan.profile() as prof: ... prof.step())")
        _fail(f"{out.message} after {seen} optimizer steps; --warmup {warmup} + --steps {steps} "
              f"need {warmup + steps}: lower --warmup or --steps")


def _write(path: Path, writer: Any) -> str:
    tmp = path.with_name(path.name + ".tmp")
    try:
        writer(tmp)
        tmp.replace(path)
    except OSError as e:
        raise GpuplanError(f"{path}: cannot write ({e.strerror})") from None
    return str(path)


MAX_PROFILE_STEPS = 10**5
"""measured or warm-up steps (a profile keeps a few rows per step)"""


def register(app: typer.Typer) -> None:
    @app.command()
    def profile(
        script: Annotated[str, typer.Argument(help="the training script, run as `python SCRIPT`")],
        args: Annotated[list[str] | None, typer.Argument(help="the script's arguments (after --)")]
        = None,
        steps: Annotated[int, typer.Option(
            "--steps", min=1, max=MAX_PROFILE_STEPS, help="steps to measure")] = 5,
        warmup: Annotated[int, typer.Option(
            "--warmup", min=0, max=MAX_PROFILE_STEPS, help="steps to skip first")] = 2,
        timeout: Annotated[float | None, typer.Option(
            "--timeout", min=0.1, callback=finite(0.1, 7 * 86400.0, unit=" s"),
            help="stop the script after this many seconds")] = None,
        trace: Annotated[Path | None, typer.Option(
            "--trace", help="write the measured steps as a Chrome/Perfetto trace (JSON)")] = None,
        html: Annotated[Path | None, typer.Option(
            "--html", help="write a self-contained HTML report")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Profile a PyTorch training script: step time split into input wait, copies, forward,
        backward, optimizer and communication; host reads; ops on this machine's roofline;
        gpuplan's prediction next to the measurement; advice ranked by time saved."""
        from gpuplan.measure.workload_run import check_script

        if trace is not None:
            trace = output_path("--trace", trace, (".json",))
        if html is not None:
            html = output_path("--html", html, HTML_SUFFIXES)
        path = check_script(script)
        r = run_profile(path, list(args or []), steps, warmup, timeout, trace, as_json)
        if html is not None:
            from gpuplan.report.profile_html import write_html

            r["html"] = _write(html, lambda tmp: write_html(r, tmp))
        emit(r, as_json, lambda con: _render(con, r))


def _render(con: Any, r: dict[str, Any]) -> None:
    from gpuplan.report.profile_render import render

    render(con, r)
    for key in ("trace", "html"):
        if r.get(key):
            con.print(f"{key} written to {r[key]}")


def run_profile(path: Path, args: list[str], steps: int, warmup: int, timeout: float | None,
                trace: Path | None, as_json: bool) -> dict[str, Any]:
    from gpuplan.measure.workload import WorkloadSession
    from gpuplan.measure.workload_api import finish
    from gpuplan.measure.workload_run import run_script

    tmp_trace = trace.with_name(trace.name + ".tmp") if trace else None
    session = WorkloadSession(steps, warmup, stop_script=True,
                              trace_path=str(tmp_trace) if tmp_trace else None)
    # with --json, stdout is ours (one JSON object): the script prints to stderr
    quiet = contextlib.redirect_stdout(sys.stderr) if as_json else contextlib.nullcontext()
    with quiet:
        out = run_script(path, args, session, timeout)
    try:
        _check_outcome(out, session, steps, warmup)
    except typer.Exit:
        if tmp_trace is not None and tmp_trace.exists():
            os.unlink(tmp_trace)
        raise
    r = finish(session)
    r["warmup"] = warmup
    r["script"] = {"path": str(path), "args": args, "outcome": out.status,
                   "note": out.message if out.status != "done" else ""}
    if tmp_trace is not None and tmp_trace.exists():
        tmp_trace.replace(trace)  # type: ignore[arg-type]
        r["trace"] = str(trace)
    return r
