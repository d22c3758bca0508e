"""Framework profiles: what a training stack really does (fused kernels, loss fusion, attention
kernel, gradient dtype, sharding, communication overlap), one sourced TOML file each under
catalog/frameworks/. `gpuplan train --framework NAME` applies one; DEFAULT_FRAMEWORK when none
is given."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from importlib import resources
from typing import Literal

from gpuplan.errors import InputError, UnknownNameError
from gpuplan.specs.memory_behaviour import INFER, behaviour_for
from gpuplan.specs.workload import TrainConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_FRAMEWORK = "hf"
"""The profile used when none is named: plain eager PyTorch (Hugging Face Trainer), the most
conservative guess for an unknown job; name megatron, fsdp, deepspeed or llm-foundry for the
optimised stacks."""


@dataclass(frozen=True)
class Framework:
    name: str
    description: str
    source: str
    date: str
    fused: bool
    """fused norm/activation/dropout kernels"""
    fused_loss: bool
    """fused (or chunked) cross-entropy: no full fp32 logits copy"""
    attention_kernel: str
    """fa2, fa3, cudnn or sdpa (estimate/efficiency_attention.py)"""
    grad_dtype: Literal["auto", "fp32"]
    tp_comm_overlap: float
    param_gather_overlap: bool
    allocator: str
    notes: str = ""
    zero3_prefetch_params: float | None = None
    """ZeRO-3: parameters gathered ahead of use (DeepSpeed stage3_prefetch_bucket_size); None =
    a whole block ahead (FSDP prefetch)"""

    def apply(self, cfg: TrainConfig, named: bool = True) -> TrainConfig:
        """The job with this profile's kernels: fused when the stack fuses (or the user asked),
        fp32 gradients when the stack keeps them (Megatron main_grad); when the user named the
        stack (`named`), also its memory behaviour (loss buffers, FSDP units, allocator);
        otherwise the one the layout implies (memory_behaviour.INFER)."""
        grad = "fp32" if self.grad_dtype == "fp32" else cfg.grad_dtype
        mem = behaviour_for(self.name) if named else (cfg.memory_behaviour or INFER)
        return replace(cfg, fused=cfg.fused or self.fused, grad_dtype=grad, memory_behaviour=mem)

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "description": self.description, "fused": self.fused,
                "fused_loss": self.fused_loss, "attention_kernel": self.attention_kernel,
                "grad_dtype": self.grad_dtype, "tp_comm_overlap": self.tp_comm_overlap,
                "param_gather_overlap": self.param_gather_overlap,
                "zero3_prefetch_params": self.zero3_prefetch_params,
                "allocator": self.allocator, "notes": self.notes,
                "source": f"{self.source} ({self.date})"}


_DIR = resources.files("gpuplan") / "catalog" / "frameworks"


def framework_names() -> list[str]:
    return sorted(p.name[:-5] for p in _DIR.iterdir() if p.name.endswith(".toml"))


def get_framework(name: str | None) -> Framework:
    """The named profile (default DEFAULT_FRAMEWORK)."""
    name = name or DEFAULT_FRAMEWORK
    names = framework_names()
    if name not in names:
        raise UnknownNameError("framework", name, names)
    raw = tomllib.loads((_DIR / f"{name}.toml").read_text(encoding="utf-8"))
    try:
        return Framework(**raw)
    except TypeError as e:
        raise InputError(f"framework file {name}.toml", str(e), "the Framework fields") from None
