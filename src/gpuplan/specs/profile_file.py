"""The machine-profile file (`gpuplan bench` output, read by `--profile FILE`): the fields the
planner uses, typed and range-checked. Other keys (the raw measurements) pass through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gpuplan.errors import GpuplanError, did_you_mean, shorten
from gpuplan.specs.device import DTYPES
from gpuplan.specs.files import load_json, shown

MAX_FLOPS_PER_S = 1e19
"""10 EFLOP/s per device: 2000x a B200's dense fp8"""
MAX_BYTES_PER_S = 1e15
"""1 PB/s: 125x a B200's HBM3e"""
MAX_MEMORY_BYTES = 2**50


class Identity(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str | None = Field(default=None, max_length=1000)
    kind: str = Field(default="cpu", pattern=r"^(cpu|cuda)$")
    host: str | None = Field(default=None, max_length=1000)
    gpu_memory_bytes: int | None = Field(default=None, ge=0, le=MAX_MEMORY_BYTES)
    host_memory_bytes: int | None = Field(default=None, ge=0, le=MAX_MEMORY_BYTES)


class ProfileFile(BaseModel):
    """What `--profile` needs; NaN, infinities, negatives and unknown dtypes are refused."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    device: str = Field(min_length=1, max_length=1000)
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}")
    matmul_flops_per_s: dict[str, float] = Field(min_length=1)
    memory_bw_bytes_per_s: float = Field(gt=0, le=MAX_BYTES_PER_S)
    launch_overhead_s: float | None = Field(default=None, ge=0, le=1.0)
    identity: Identity = Identity()

    @field_validator("matmul_flops_per_s")
    @classmethod
    def _rates(cls, v: dict[str, float]) -> dict[str, float]:
        for dt, rate in v.items():
            if dt not in DTYPES:
                close = did_you_mean(dt, list(DTYPES))
                hint = f"did you mean {close}? " if close else ""
                raise ValueError(f"dtype {shorten(dt)} is not known; {hint}expected one of "
                                 f"{', '.join(DTYPES)}")
            if not 0 < rate <= MAX_FLOPS_PER_S:
                raise ValueError(f"{dt}: {shorten(rate)} FLOP/s is not in (0, "
                                 f"{MAX_FLOPS_PER_S:g}]")
        return v


def validate_profile(data: Any, origin: str) -> dict[str, Any]:
    """The profile as a dict whose used fields are checked (one GpuplanError otherwise)."""
    if not isinstance(data, dict):
        raise GpuplanError(f"{origin}: holds no JSON object (write one with `gpuplan bench`)")
    missing = [k for k in ("device", "date", "matmul_flops_per_s", "memory_bw_bytes_per_s")
               if k not in data]
    if missing:
        raise GpuplanError(f"{origin}: lacks {', '.join(missing)}; write one with "
                           "`gpuplan bench`")
    try:
        ProfileFile.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "profile"
        msg = "required field is missing" if err["type"] == "missing" else err["msg"]
        if err["type"] != "missing" and "input" in err:
            msg += f" (got {shorten(err['input'], 60)})"
        raise GpuplanError(f"{origin}: field {loc}: {msg}; write one with `gpuplan bench`"
                           ) from None
    return data


def read_profile(path: Path) -> dict[str, Any]:
    origin = f"--profile {shown(path)}"
    return validate_profile(load_json(path, "--profile"), origin)
