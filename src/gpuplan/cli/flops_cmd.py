"""`gpuplan flops`: parameters, forward and training FLOPs, by component, convention stated."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import default_len, positions
from gpuplan.estimate.flops import flops_summary
from gpuplan.report.output import emit, table
from gpuplan.specs.limits import MAX_BATCH, MAX_SEQ


def _render(con: Console, r: dict[str, Any]) -> None:
    t = table(f"{r['model']}: batch {r['batch']} x seq {r['seq_len']} = {r['tokens']:,} tokens",
              [("component", "left"), ("forward FLOPs", "right"), ("share", "right")],
              caption=r["convention"])
    fwd = r["forward_flops"]
    for k, v in r["breakdown"].items():
        t.add_row(k, units.format_flops(v), f"{v / fwd:.1%}" if fwd else "-")
    t.add_row("forward total", units.format_flops(fwd), "100%")
    t.add_row("backward (2 x forward)", units.format_flops(r["backward_flops"]), "")
    t.add_row("train (forward + backward)", units.format_flops(r["train_flops"]), "")
    t.add_row("parameters", f"{r['params']:,}", "")
    t.add_row("6 x N x tokens (Kaplan)", units.format_flops(r["six_n_d_flops"]), "")
    con.print(t)


def register(app: typer.Typer) -> None:
    @app.command()
    def flops(
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        batch: Annotated[int, typer.Option(
            "--batch", "-b", min=1, max=MAX_BATCH, help="sequences")] = 1,
        seq_len: Annotated[int | None, typer.Option(
            "--seq-len", "-s", min=1, max=MAX_SEQ,
            help="tokens each (default 4096, or the model's positions if fewer)")] = None,
        causal: Annotated[bool, typer.Option(
            "--causal", help="count only the unmasked half of causal attention scores")] = False,
        as_json: JsonOpt = False,
    ) -> None:
        """Parameters, forward FLOPs and training FLOPs for a batch, by component."""
        from gpuplan.specs.catalog import get_model

        m = get_model(model)
        seq_len = default_len(m, seq_len, 4096)
        positions(m, seq_len, "--seq-len")
        r = flops_summary(m, batch, seq_len, causal)
        emit(r, as_json, lambda con: _render(con, r))
