"""Whole training runs and scaling: time to train on T tokens, GPU-hours, energy and cost, and
the same job on 1, 2, 4, ... N GPUs with each point explained."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.memory import TrainConfig
from gpuplan.estimate.training import StepResult, step_time
from gpuplan.specs.cluster import Cluster, default_cluster
from gpuplan.specs.model import ModelSpec

CHINCHILLA_TOKENS_PER_PARAM = 20
"""Compute-optimal tokens per parameter (Hoffmann et al. 2022, Table 3: ~20)."""
PUE = 1.2
"""Power usage effectiveness of a modern data centre (assumption; hyperscalers report 1.1-1.2)."""
POWER_UTILIZATION = 0.8
"""Average board power as a share of TDP during training (assumption)."""


@dataclass(frozen=True)
class RunTotals:
    tokens: float
    steps: float
    wall_s: float
    gpu_hours: float
    energy_kwh: float
    cost_usd: float | None
    usd_per_gpu_hour: float | None

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "steps": self.steps, "wall_time_s": self.wall_s,
                "wall_days": self.wall_s / 86400, "gpu_hours": self.gpu_hours,
                "energy_kwh": self.energy_kwh, "cost_usd": self.cost_usd,
                "usd_per_gpu_hour": self.usd_per_gpu_hour,
                "assumptions": {"pue": PUE, "power_share_of_tdp": POWER_UTILIZATION}}


def run_totals(m: ModelSpec, step: StepResult, cluster: Cluster, tokens: float | None = None,
               usd_per_gpu_hour: float | None = None) -> RunTotals | None:
    """Time, GPU-hours, energy (TDP x utilisation x PUE) and cost for `tokens` tokens
    (default: Chinchilla's 20 per parameter)."""
    if not step.step_time_s:
        return None
    tokens = tokens if tokens is not None else CHINCHILLA_TOKENS_PER_PARAM * m.params()
    steps = tokens / step.tokens_per_step
    wall = steps * step.step_time_s
    gpu_hours = wall * step.gpus / 3600
    tdp = cluster.device.tdp_w or 0.0
    energy = gpu_hours * tdp * POWER_UTILIZATION * PUE / 1000
    rate = usd_per_gpu_hour if usd_per_gpu_hour is not None else cluster.device.cloud_usd_per_hour
    return RunTotals(tokens, steps, wall, gpu_hours, energy,
                     gpu_hours * rate if rate is not None else None, rate)


def scaling_curve(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, max_gpus: int,
                  overlap: bool = True, efficiency: Efficiency | None = None
                  ) -> list[dict[str, Any]]:
    """Data-parallel scaling of one job: per-GPU micro-batch and gradient accumulation fixed,
    so the global batch grows with the GPUs (weak scaling); the model-parallel part (tp x pp x
    cp) stays. Each point says what grew."""
    mp = cfg.tp * cfg.pp * cfg.cp
    accum = (cfg.global_batch // (cfg.micro_batch * cfg.dp)) if cfg.global_batch else 1
    points: list[dict[str, Any]] = []
    base: StepResult | None = None
    n = mp
    while n <= max_gpus:
        dp = n // mp
        c = default_cluster(cluster.device, n, cluster.gpus_per_node if n >= cluster.gpus_per_node
                            else None, cluster.scale_up.bw_bytes_per_s,
                            cluster.scale_out.bw_bytes_per_s)
        c = c.model_copy(update={"scale_up": cluster.scale_up, "scale_out": cluster.scale_out})
        job = replace(cfg, dp=dp, global_batch=cfg.micro_batch * dp * accum)
        r = step_time(m, c, job, efficiency=efficiency, overlap=overlap)
        row: dict[str, Any] = {"gpus": n, "dp": dp, "fits": r.fits,
                               "step_time_s": r.step_time_s, "tokens_per_s": r.tokens_per_s,
                               "mfu": r.mfu}
        if r.step_time_s and base is not None and base.tokens_per_s:
            speedup = (r.tokens_per_s or 0.0) / base.tokens_per_s
            row["speedup"] = speedup
            row["efficiency"] = speedup / (n / mp)
            grew = {k: r.breakdown[k] - base.breakdown.get(k, 0.0) for k in r.breakdown}
            worst = max(grew, key=lambda k: grew[k] / (r.step_time_s or 1))
            row["why"] = (f"{worst.replace('_', ' ')} grew to {r.breakdown[worst]:.3g} s of a "
                          f"{r.step_time_s:.3g} s step" if grew[worst] > 0.01 * r.step_time_s
                          else "near-linear: communication hidden behind compute")
        elif r.step_time_s:
            base = r
            row.update(speedup=1.0, efficiency=1.0, why="baseline")
        if not r.fits:
            row["why"] = "does not fit in memory (timed as if it fit); " + row.get("why", "")
        points.append(row)
        n *= 2
    return points
