"""Device: one accelerator or CPU socket, every number in SI base units, every number sourced.

A Device is built from a catalog record (see `specs/catalog.py` for the file format). Peaks are
DENSE FLOP/s per dtype; a dtype without a fast path on the hardware is absent, never zero.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4", "int4")
"""Datatypes a peak may be given for. fp32 is the non-tensor (CUDA-core / vector) rate."""

DeviceKind = Literal["gpu", "tpu", "npu", "cpu"]

USABLE_MIN, USABLE_MAX = 0.85, 1.1
"""Bounds of usable_memory_bytes / memory_bytes. Usable can exceed the vendor's "80 GB" because
software counts binary units (H100: 81,559 MiB in nvidia-smi = 85.5e9 bytes); it falls short by
the driver's reserve and, on GDDR cards with ECC on, the ECC carve-out (T4: 15,360 MiB of 16 GiB)."""


class Provenance(BaseModel):
    """Where one number comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = Field(description="title of the source: datasheet, paper and table, web page")
    url: str | None = Field(default=None, description="where to read it")
    date: str = Field(description="publication or access date of the source, YYYY or YYYY-MM[-DD]")
    uncertain: bool = Field(default=False, description="True when sources conflict or are third-party")
    note: str | None = Field(default=None, description="derivation or caveat for this value")


class Link(BaseModel):
    """A link class, bandwidth per GPU per direction (one-way)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="e.g. 'NVLink 4', 'PCIe 5.0 x16', 'InfiniBand NDR 400G'")
    bw_bytes_per_s: float = Field(gt=0, description="per GPU, per direction")
    fabric: Literal["infiniband"] | None = Field(
        default=None, description="the network technology when the catalog knows it (sets the "
        "achievable share of the rating, specs.cluster.network_efficiency); None: not stated")


class Topology(BaseModel):
    """How devices connect beyond one link: the scale-up domain (GPUs that reach each other over
    the scale-up link), devices per host, and the domain's shape."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scale_up_domain: int = Field(ge=1, description="devices on one scale-up fabric (NVLink "
                                 "switch domain, ICI slice, xGMI mesh, bridged pair)")
    devices_per_node: int = Field(ge=1, description="devices in one host/server")
    kind: Literal["switch", "mesh", "torus", "pairs"] = Field(
        description="switch: full bandwidth to any peer; mesh: one link per peer; torus: ICI "
                    "rings; pairs: bridged pairs, PCIe between pairs")
    per_peer_bw_bytes_per_s: float | None = Field(
        default=None, gt=0, description="mesh: one link to each peer, per direction")


class Device(BaseModel):
    """An accelerator (or CPU socket) with its datasheet numbers in SI base units."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="canonical catalog name, e.g. 'H100-SXM'")
    aliases: tuple[str, ...] = Field(default=(), description="other names it answers to")
    vendor: str
    kind: DeviceKind
    year: int = Field(ge=1990, le=2100, description="year of release")
    form_factor: str
    memory_type: str
    memory_bytes: int = Field(gt=0, description="device memory in bytes (GB = 1e9), the vendor's figure")
    usable_memory_bytes: int | None = Field(
        default=None, gt=0,
        description="memory a PyTorch process can allocate: torch.cuda.get_device_properties()"
                    ".total_memory (= CUDA totalGlobalMem) where known, else the nvidia-smi total",
    )
    mem_bw_bytes_per_s: float = Field(gt=0, description="peak memory bandwidth, bytes/s")
    peak_flops_per_s: dict[str, float] = Field(description="DENSE peak FLOP/s (OP/s for int) per dtype")
    l2_cache_bytes: int | None = Field(default=None, gt=0, description="L2 (GPU) or last-level cache")
    compute_units: int | None = Field(default=None, gt=0, description="SMs, CUs, TensorCores or CPU cores")
    compute_unit_name: str | None = Field(default=None, description="'SM', 'CU', 'core'")
    tdp_w: float | None = Field(default=None, gt=0, description="board/module power, watts")
    scale_up: Link | None = Field(default=None, description="NVLink/xGMI/ICI per GPU per direction")
    pcie_gen: int | None = Field(default=None, ge=1, le=7)
    pcie: Link | None = Field(default=None, description="host link per direction")
    scale_out: Link | None = Field(default=None, description="typical network per GPU per direction")
    list_price_usd: float | None = Field(default=None, gt=0)
    cloud_usd_per_hour: float | None = Field(default=None, gt=0, description="typical on-demand $/GPU-h")
    notes: str | None = None
    ceilings: dict[str, float] = Field(
        default_factory=dict,
        description="measured achievable shares of peak: matmul_bf16, matmul_fp8, "
                    "attention_fa2, attention_fa3, attention_cudnn (sourced in provenance as "
                    "'ceiling.<key>')")
    topology: Topology | None = Field(default=None, description="scale-up domain and host shape")
    provenance: dict[str, Provenance] = Field(
        description="field name (peaks as 'peak.bf16') -> where the number comes from"
    )

    @field_validator("peak_flops_per_s")
    @classmethod
    def _known_dtypes(cls, peaks: dict[str, float]) -> dict[str, float]:
        for dtype, value in peaks.items():
            if dtype not in DTYPES:
                raise ValueError(f"peak dtype {dtype!r} is not one of {', '.join(DTYPES)}")
            if not value > 0:
                raise ValueError(
                    f"peak.{dtype} = {value}: a dtype without a fast path is left out, never zero"
                )
        if not peaks:
            raise ValueError("at least one dense peak is required")
        return peaks

    @model_validator(mode="after")
    def _every_number_sourced(self) -> Device:
        numeric = ["memory_bytes", "usable_memory_bytes", "mem_bw_bytes_per_s", "l2_cache_bytes",
                   "compute_units", "tdp_w", "scale_up", "pcie", "scale_out", "list_price_usd",
                   "cloud_usd_per_hour"]
        needed = [f for f in numeric if getattr(self, f) is not None]
        needed += [f"peak.{d}" for d in self.peak_flops_per_s]
        needed += [f"ceiling.{k}" for k in self.ceilings]
        needed += ["topology"] if self.topology is not None else []
        missing = [f for f in needed if f not in self.provenance]
        if missing:
            raise ValueError(f"no source for: {', '.join(missing)}")
        return self

    @model_validator(mode="after")
    def _usable_memory_plausible(self) -> Device:
        """The usable figure differs from the vendor's by unit (GB vs GiB) and driver reserve, a
        few percent either way; outside [0.85, 1.1] x memory it is a typo or the wrong device."""
        u = self.usable_memory_bytes
        if u is not None and not (USABLE_MIN * self.memory_bytes <= u <= USABLE_MAX * self.memory_bytes):
            raise ValueError(
                f"usable_memory_bytes = {u} is {u / self.memory_bytes:.3f} x memory_bytes "
                f"({self.memory_bytes}); expected between {USABLE_MIN} and {USABLE_MAX}"
            )
        return self

    @property
    def capacity_bytes(self) -> int:
        """Bytes the memory planner may fill: the usable figure when known, else the vendor's."""
        return self.usable_memory_bytes if self.usable_memory_bytes is not None else self.memory_bytes

    def peak(self, dtype: str) -> float | None:
        """Dense peak FLOP/s for a dtype, or None when the hardware has no fast path for it."""
        return self.peak_flops_per_s.get(dtype)

    def matmul_peak(self, dtype: str) -> float:
        """Peak FLOP/s a matmul in `dtype` can use: its own tensor rate, else the best slower path.

        fp8 on a part without fp8 runs in bf16/fp16; fp32 matmuls use tf32 only when the user
        allows it (PyTorch default: off), so fp32 falls back to the fp32 vector rate.
        """
        fallbacks = {
            "fp4": ["fp4", "fp8", "bf16", "fp16"],
            "int4": ["int4", "int8", "fp16", "bf16"],
            "fp8": ["fp8", "bf16", "fp16"],
            "int8": ["int8", "fp16", "bf16"],
            "bf16": ["bf16", "fp16", "fp32"],
            "fp16": ["fp16", "bf16", "fp32"],
            "tf32": ["tf32", "fp32"],
            "fp32": ["fp32", "bf16"],  # TPUs: fp32 matmuls run as bf16 passes
            "fp64": ["fp64", "fp32"],
        }
        for d in fallbacks.get(dtype, [dtype]):
            if d in self.peak_flops_per_s:
                return self.peak_flops_per_s[d]
        raise KeyError(dtype)

    def ridge_flops_per_byte(self, dtype: str) -> float:
        """Ridge point of the roofline: peak / bandwidth (Williams et al. 2009, Roofline, CACM)."""
        return self.matmul_peak(dtype) / self.mem_bw_bytes_per_s
