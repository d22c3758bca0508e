"""`gpuplan bench`: measure this machine's ceilings, timed right; save them as a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import finite
from gpuplan.measure.safety import DEFAULT_MEMORY_FRACTION, MAX_FORCED_NPROC, deadline
from gpuplan.report.files import PLOT_SUFFIXES, output_path
from gpuplan.report.output import emit


def _progress_run(sections: tuple[str, ...], show: bool, **kw: Any) -> dict[str, Any]:
    """run_bench with a rich progress bar on stderr (stdout stays one JSON object)."""
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from gpuplan.measure.bench import run_bench

    if not show:
        return run_bench(sections=sections, **kw)
    bar = Progress(SpinnerColumn(), TextColumn("{task.description:<40}"), BarColumn(),
                   TextColumn("{task.completed}/{task.total} sections"), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    with bar:
        task = bar.add_task("starting", total=len(sections))
        return run_bench(sections=sections,
                         progress=lambda msg: bar.update(task, description=msg),
                         done=lambda: bar.advance(task), **kw)


def register(app: typer.Typer) -> None:
    @app.command()
    def bench(
        quick: Annotated[bool, typer.Option(
            "--quick", help="fewer sizes and samples (about a minute on a small CPU)")] = False,
        device: Annotated[str | None, typer.Option(
            "--device", help="cpu or cuda (default: cuda when a GPU is visible)")] = None,
        only: Annotated[str | None, typer.Option(
            "--only", help="comma-separated: matmul,memory,launch,fusion,attention,"
                           "collectives,decode (decode also runs matmul and memory: its "
                           "prediction uses them)")]
        = None,
        nproc: Annotated[int | None, typer.Option(
            "--nproc", min=1, max=MAX_FORCED_NPROC,
            help="local processes for collectives (default: 2 on CPU, all GPUs; at most the "
                 "cores or GPUs present unless --force); under torchrun its world size is "
                 "used")] = None,
        no_compile: Annotated[bool, typer.Option(
            "--no-compile", help="fusion: skip torch.compile (eager only)")] = False,
        plot: Annotated[Path | None, typer.Option(
            "--plot", help="write the measured roofline chart")] = None,
        compare: Annotated[bool, typer.Option(
            "--compare", help="measured vs the matching catalog device")] = False,
        save: Annotated[bool, typer.Option(
            "--save/--no-save", help="save the profile under ~/.cache/gpuplan/profiles")] = True,
        progress: Annotated[bool, typer.Option(
            "--progress/--no-progress", help="progress bar on stderr")] = True,
        force: Annotated[bool, typer.Option(
            "--force", help="allow --nproc above the cores (CPU) present")] = False,
        memory_fraction: Annotated[float, typer.Option(
            "--memory-fraction", callback=finite(0.01, 0.9),
            help="share of the free RAM (CPU) or GPU memory the buffers may use")] =
        DEFAULT_MEMORY_FRACTION,
        timeout: Annotated[float | None, typer.Option(
            "--timeout", callback=finite(1.0, 7 * 86400.0, unit=" s"),
            help="stop the run after this many seconds (default 900 with --quick, else "
                 "3600)")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Measured matmul FLOP/s per dtype, memory bandwidth, launch overhead, fusion, attention,
        collectives and (--only decode) a transformers decoder's TTFT/TPOT of this machine,
        next to gpuplan's predictions."""
        from gpuplan.cli.bench_render import measured_chart, render
        from gpuplan.measure.bench import parse_only
        from gpuplan.measure.collectives import torchrun_ranks, under_torchrun
        from gpuplan.measure.machine import resolve_device
        from gpuplan.measure.profile import compare as compare_catalog
        from gpuplan.measure.profile import save_profile

        sections = parse_only(only, nproc)
        if plot is not None:
            plot = output_path("--plot", plot, PLOT_SUFFIXES)
        dev = resolve_device(device)
        if "collectives" in sections and nproc is not None and not under_torchrun():
            from gpuplan.measure.machine import torch_module
            from gpuplan.measure.safety import check_nproc

            gpus = torch_module().cuda.device_count() if dev == "cuda" else 0
            check_nproc(nproc, dev, gpus, force)  # before any section runs
        ranks = torchrun_ranks()
        rank = ranks[0] if ranks else 0
        if under_torchrun():
            sections = ("collectives",)  # every rank joins; only rank 0 reports
        with deadline(timeout or (900.0 if quick else 3600.0)):
            r = _progress_run(sections, progress and rank == 0, device=dev, quick=quick,
                              nproc=nproc, compile_=not no_compile,
                              memory_fraction=memory_fraction, force=force)
        if rank != 0:
            return
        if compare:
            r["compare"] = compare_catalog(r)
        if plot is not None:
            if not r["matmul_flops_per_s"] or not r["memory_bw_bytes_per_s"]:
                from gpuplan.errors import GpuplanError

                raise GpuplanError("--plot: the measured roofline needs matmul and memory in "
                                   "--only")
            r["plot"] = str(measured_chart(r, plot))
        if save and r["matmul_flops_per_s"] and r["memory_bw_bytes_per_s"]:
            r["profile_path"] = str(save_profile({**r, "compare": None}))
        emit(r, as_json, lambda con: render(con, r))
        if plot is not None and not as_json:
            Console(stderr=True).print(f"measured roofline chart written to {plot}")
