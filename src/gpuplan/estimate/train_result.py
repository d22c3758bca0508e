"""What `gpuplan train` answers, as one typed result: the step, the run totals and the
optional scaling curve, for one job on one cluster. Renderers (`report.train`) read its JSON;
nothing is added to it afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.runs import RunTotals, run_totals, scaling_curve
from gpuplan.estimate.training import StepResult, step_time
from gpuplan.specs.cluster import Cluster
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import TrainConfig


@dataclass
class TrainResult:
    model: str
    device: str
    cfg: TrainConfig
    step: StepResult
    run: RunTotals | None
    scaling: list[dict[str, Any]] | None = None
    profile: dict[str, Any] | None = None
    """the measured machine profile used for the ceilings, if any"""
    extra_assumptions: dict[str, Any] = field(default_factory=dict)
    price: dict[str, Any] | None = None
    """where the run's $/GPU-hour comes from (the on-demand price basis, a flag, ...)"""

    def layout(self) -> dict[str, Any]:
        c = self.cfg
        return {"dp": c.dp, "tp": c.tp, "pp": c.pp, "cp": c.cp, "ep": c.ep,
                "etp": c.expert_tp, "zero": c.zero_stage, "fsdp": c.fsdp, "sequence_parallel": c.sp,
                "virtual_stages": c.virtual_stages, "recompute": c.recompute,
                "offload_optimizer": c.offload_optimizer, "micro_batch": c.micro_batch,
                "seq_len": c.seq_len}

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "device": self.device,
                               **self.step.to_json(), "layout": self.layout()}
        run = self.run.to_json() if self.run else None
        out["gpu_hours"] = run.pop("gpu_hours") if run else None  # contract keys, top level
        out["cost_usd"] = run.pop("cost_usd") if run else None
        if run is not None and self.price is not None:
            run["price"] = self.price
        out["run"] = run
        if self.profile is not None:
            out["assumptions"] = {**out["assumptions"], "profile": self.profile}
        if self.extra_assumptions:
            out["assumptions"] = {**out["assumptions"], **self.extra_assumptions}
        if self.scaling is not None:
            out["scaling"] = self.scaling
        return out


def estimate_train(m: ModelSpec, cluster: Cluster, cfg: TrainConfig, tokens: float | None = None,
                   usd_per_gpu_hour: float | None = None, overlap: bool = True,
                   efficiency: Efficiency | None = None, scaling: bool = False,
                   profile: dict[str, Any] | None = None,
                   price: dict[str, Any] | None = None) -> TrainResult:
    """Step time, run totals and (optionally) data-parallel scaling up to the cluster's GPUs."""
    step = step_time(m, cluster, cfg, efficiency=efficiency, overlap=overlap)
    totals = run_totals(m, step, cluster, tokens, usd_per_gpu_hour)
    curve = None
    if scaling:
        base = replace(cfg, dp=1, global_batch=(cfg.global_batch // cfg.dp)
                       if cfg.global_batch else None)
        curve = scaling_curve(m, cluster, base, cluster.gpus, overlap=overlap,
                              efficiency=efficiency)
    return TrainResult(m.name, cluster.device.name, cfg, step, totals, curve, profile,
                       price=price)
