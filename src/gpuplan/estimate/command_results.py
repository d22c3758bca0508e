"""What `gpuplan memory` and `gpuplan roofline` answer, as typed results: the estimator's own
result plus what the command adds (measured profile, fix chain, attention sweep, chart path).
Renderers in `report/` read their JSON; nothing is added to it afterwards.

JSON keys are those of the contract in DESIGN.md (memory: `total_bytes`, `capacity_bytes`,
`fits`, `per_gpu`...; roofline: `total_time_s`, `ops`...), unchanged from the plain dicts these
replace."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuplan.estimate.analysis import Analysis
from gpuplan.estimate.fixes import FixStep
from gpuplan.estimate.memory import MemoryResult


@dataclass
class MemoryCheck:
    """`gpuplan memory`: the per-GPU breakdown of one job, and optionally how to make it fit."""

    model: str
    result: MemoryResult
    profile: dict[str, Any] | None = None
    """the measured machine profile named with --profile (it changes speeds, not bytes)"""
    fix: list[FixStep] | None = None
    """the fix chain (--fix); an empty list when it already fits"""
    plot_path: str | None = None
    framework: dict[str, Any] | None = None
    """the training framework's memory conventions (--framework), stated as an assumption"""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, **self.result.to_json()}
        if self.framework is not None:
            out["assumptions"] = {**out["assumptions"], "framework": self.framework}
        if self.profile is not None:
            out["assumptions"] = {**out["assumptions"], "profile": self.profile}
        if self.fix is not None:
            out["fix"] = [asdict(s) for s in self.fix]
        if self.plot_path is not None:
            out["plot"] = self.plot_path
        return out


@dataclass
class RooflineResult:
    """`gpuplan roofline`: every op of a step on the device's roofline."""

    analysis: Analysis
    profile: dict[str, Any] | None = None
    """the measured machine profile whose rates replaced the datasheet's (--profile)"""
    measured_ridge_flops_per_byte: float | None = None
    """ridge point from the profile's measured matmul rate / measured bandwidth"""
    attention_comparison: list[dict[str, Any]] | None = None
    plot_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = self.analysis.to_json()
        if self.profile is not None:
            out["assumptions"]["profile"] = self.profile
        if self.measured_ridge_flops_per_byte is not None:
            out["ridge_flops_per_byte"] = self.measured_ridge_flops_per_byte
            out["ridge_source"] = "measured profile"
        if self.attention_comparison is not None:
            out["attention_comparison"] = self.attention_comparison
        if self.plot_path is not None:
            out["plot"] = self.plot_path
        return out
