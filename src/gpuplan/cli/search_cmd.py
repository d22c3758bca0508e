"""`gpuplan train --search`: every valid layout for the GPU count, the best ten and why."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.memory import TrainConfig
from gpuplan.report.output import emit, table
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec


def _render(con: Console, r: dict[str, Any], title: str) -> None:
    t = table(f"{title}: {r['evaluated']:,} layouts evaluated in {r['search_seconds']:.2f} s "
              f"({r['layouts_per_s']:,.0f}/s), {r['fitting']:,} fit",
              [("#", "right"), ("dp", "right"), ("tp", "right"), ("pp", "right"),
               ("v", "right"), ("cp", "right"), ("ep", "right"), ("ZeRO", "right"),
               ("recompute", "left"), ("mb", "right"), ("step", "right"), ("tokens/s", "right"),
               ("MFU", "right"), ("memory", "right"), ("why", "left")],
              caption="ranked by tokens/s (on a fixed GPU count also by cost per token); "
                      "times re-computed by the reference step model")
    for i, row in enumerate(r["top"], 1):
        t.add_row(str(i), str(row["dp"]), str(row["tp"]), str(row["pp"]),
                  str(row["virtual_stages"]), str(row["cp"]), str(row["ep"]), str(row["zero"]),
                  row["recompute"], str(row["micro_batch"]),
                  units.format_seconds(row["step_time_s"]), f"{row['tokens_per_s']:,.0f}",
                  f"{row['mfu']:.1%}", units.format_bytes(row["memory_bytes"]), row["why"])
    con.print(t)


def run_search(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, top: int, as_json: bool,
               efficiency: Efficiency | None = None, profile: dict[str, Any] | None = None
               ) -> dict[str, Any]:
    from gpuplan.estimate.search import result_json, search

    res = search(m, cluster, cfg, top=top, efficiency=efficiency)
    r = {"model": m.name, "device": cluster.device.name, "gpus": cluster.gpus,
         **result_json(res)}
    if profile is not None:
        r["profile"] = profile
    title = f"{m.name} on {cluster.gpus} x {cluster.device.name}, seq {cfg.seq_len}, " \
            f"global batch {cfg.global_batch or cluster.gpus * cfg.micro_batch}"
    emit(r, as_json, lambda con: _render(con, r, title))
    return r
