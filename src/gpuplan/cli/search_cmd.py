"""`gpuplan train --search`: every valid layout for the GPU count, the best ten and why."""

from __future__ import annotations

from typing import Any

from gpuplan.estimate.efficiency import Efficiency, Retime
from gpuplan.estimate.memory import TrainConfig
from gpuplan.report.output import emit
from gpuplan.report.search import render_search
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec


def run_search(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, top: int, as_json: bool,
               efficiency: Efficiency | None = None, profile: dict[str, Any] | None = None,
               retime: Retime | None = None) -> dict[str, Any]:
    from gpuplan.estimate.search import result_json, search

    res = search(m, cluster, cfg, top=top, efficiency=efficiency, retime=retime)
    r = {"model": m.name, "device": cluster.device.name, "gpus": cluster.gpus,
         **result_json(res)}
    if profile is not None:
        r["profile"] = profile
    title = f"{m.name} on {cluster.gpus} x {cluster.device.name}, seq {cfg.seq_len}, " \
            f"global batch {cfg.global_batch or cluster.gpus * cfg.micro_batch}"
    emit(r, as_json, lambda con: render_search(con, r, title))
    return r
