"""The device record file format (TOML) and its conversion into a validated Device.

One file per device. Quantities are written with their unit ("80 GB", "3.35 TB/s",
"989.4 TFLOP/s") and parsed by `gpuplan.units`; each names a source declared in the same file.
`memory` is the vendor's figure ("80 GB" = 80e9 bytes); the optional `usable_memory` is what a
PyTorch process can allocate (torch.cuda.get_device_properties().total_memory, which is CUDA's
totalGlobalMem; else the nvidia-smi total), and the memory planner uses it when present:

    name = "H100-SXM"
    aliases = ["h100"]
    vendor = "NVIDIA"
    kind = "gpu"
    year = 2022
    form_factor = "SXM5"
    memory_type = "HBM3"
    pcie_gen = 5

    [sources.datasheet]
    title = "NVIDIA H100 Tensor Core GPU datasheet"
    url = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
    date = "2023-09"

    [sources.devicequery]
    title = "deviceQuery output on an H100 SXM node"
    date = "2024-11"

    [values]
    memory = { value = "80 GB", source = "datasheet" }
    usable_memory = { value = "85045477376 B", source = "devicequery", note = "CUDA totalGlobalMem" }
    mem_bw = { value = "3.35 TB/s", source = "datasheet" }

    [peak]          # DENSE; the datasheet's "with sparsity" figure is twice this
    bf16 = { value = "989.4 TFLOP/s", source = "datasheet", note = "1979 with sparsity" }

    [scale_up]      # per GPU, per direction
    name = "NVLink 4"
    bandwidth = { value = "450 GB/s", source = "datasheet", note = "900 GB/s bidirectional" }
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuplan import units
from gpuplan.errors import GpuplanError, InputError
from gpuplan.specs.device import Device, Link, Provenance, Topology
from gpuplan.specs.files import parse_toml, read_text, shown


class SourceEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    title: str
    url: str | None = None
    date: str = Field(pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")


class ValueEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    value: str | float | int
    source: str
    uncertain: bool = False
    note: str | None = None
    date: str | None = Field(default=None, pattern=r"^\d{4}(-\d{2}(-\d{2})?)?$")


class LinkEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    bandwidth: ValueEntry
    fabric: Literal["infiniband"] | None = None


class Values(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    memory: ValueEntry
    usable_memory: ValueEntry | None = None
    mem_bw: ValueEntry
    l2_cache: ValueEntry | None = None
    compute_units: ValueEntry | None = None
    tdp: ValueEntry | None = None
    list_price: ValueEntry | None = None
    cloud_price: ValueEntry | None = None


class TopologyEntry(BaseModel):
    """[topology]: scale-up domain size, devices per host, shape; one source for the record."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    scale_up_domain: int = Field(ge=1)
    devices_per_node: int = Field(ge=1)
    kind: Literal["switch", "mesh", "torus", "pairs"]
    per_peer_bandwidth: str | None = None
    source: str
    note: str | None = None


class DeviceFile(BaseModel):
    """The raw record as written in the TOML file; unknown keys are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    aliases: list[str] = []
    vendor: str
    kind: Literal["gpu", "tpu", "npu", "cpu"]
    year: int
    form_factor: str
    memory_type: str
    compute_unit_name: str | None = None
    pcie_gen: int | None = None
    notes: str | None = None
    sources: dict[str, SourceEntry]
    values: Values
    peak: dict[str, ValueEntry]
    scale_up: LinkEntry | None = None
    pcie: LinkEntry | None = None
    scale_out: LinkEntry | None = None
    ceilings: dict[str, ValueEntry] = {}
    """[ceilings]: measured achievable share of the dense peak (0-1) per kernel class"""
    topology: TopologyEntry | None = None


CEILING_KEYS = ("matmul_bf16", "matmul_fp8", "attention_fa2", "attention_fa3", "attention_cudnn")


def _provenance(entry: ValueEntry, sources: dict[str, SourceEntry], where: str) -> Provenance:
    src = sources.get(entry.source)
    if src is None:
        raise InputError(f"{where}.source", entry.source, f"a key of [sources]: {', '.join(sources)}")
    return Provenance(source=src.title, url=src.url, date=entry.date or src.date,
                      uncertain=entry.uncertain, note=entry.note)


def device_from_record(raw: dict[str, Any], origin: str = "record") -> Device:
    """Validate a raw record (parsed TOML) and convert it to a Device in SI units."""
    try:
        rec = DeviceFile.model_validate(raw)
    except ValidationError as e:
        raise GpuplanError(f"{origin}: {first_error(e)}") from None
    try:
        return _convert(rec)
    except InputError as e:
        raise GpuplanError(f"{origin}: {e}") from None
    except ValidationError as e:
        raise GpuplanError(f"{origin}: {first_error(e)}") from None


def _convert(rec: DeviceFile) -> Device:
    prov: dict[str, Provenance] = {}
    fields: dict[str, Any] = {}
    v = rec.values

    def take(entry: ValueEntry | None, field: str, kind: units.Kind | None) -> float | None:
        if entry is None:
            return None
        prov[field] = _provenance(entry, rec.sources, field)
        if kind is None:
            return float(entry.value)
        return units.parse(entry.value, kind, field)

    fields["memory_bytes"] = round(take(v.memory, "memory_bytes", "bytes") or 0)
    usable = take(v.usable_memory, "usable_memory_bytes", "bytes")
    fields["usable_memory_bytes"] = round(usable) if usable is not None else None
    fields["mem_bw_bytes_per_s"] = take(v.mem_bw, "mem_bw_bytes_per_s", "bytes_per_s")
    l2 = take(v.l2_cache, "l2_cache_bytes", "bytes")
    fields["l2_cache_bytes"] = round(l2) if l2 is not None else None
    cu = take(v.compute_units, "compute_units", None)
    fields["compute_units"] = int(cu) if cu is not None else None
    fields["tdp_w"] = take(v.tdp, "tdp_w", "watts")
    fields["list_price_usd"] = take(v.list_price, "list_price_usd", "usd")
    fields["cloud_usd_per_hour"] = take(v.cloud_price, "cloud_usd_per_hour", "usd_per_hour")
    peaks: dict[str, float] = {}
    for dtype, entry in rec.peak.items():
        peaks[dtype] = take(entry, f"peak.{dtype}", "flops_per_s") or 0.0
    for link_field in ("scale_up", "pcie", "scale_out"):
        link: LinkEntry | None = getattr(rec, link_field)
        if link is not None:
            bw = take(link.bandwidth, link_field, "bytes_per_s") or 0.0
            fields[link_field] = Link(name=link.name, bw_bytes_per_s=bw, fabric=link.fabric)
    ceilings: dict[str, float] = {}
    for key, entry in rec.ceilings.items():
        if key not in CEILING_KEYS:
            raise InputError("ceilings", key, f"one of {', '.join(CEILING_KEYS)}")
        share = take(entry, f"ceiling.{key}", None) or 0.0
        if not 0 < share <= 1:
            raise InputError(f"ceilings.{key}", entry.value, "a share of peak in (0, 1]")
        ceilings[key] = share
    if rec.topology is not None:
        t = rec.topology
        prov["topology"] = _provenance(ValueEntry(value=0, source=t.source, note=t.note),
                                       rec.sources, "topology")
        peer = (units.parse(t.per_peer_bandwidth, "bytes_per_s", "topology.per_peer_bandwidth")
                if t.per_peer_bandwidth else None)
        fields["topology"] = Topology(scale_up_domain=t.scale_up_domain,
                                      devices_per_node=t.devices_per_node, kind=t.kind,
                                      per_peer_bw_bytes_per_s=peer)
    return Device(
        name=rec.name, ceilings=ceilings, aliases=tuple(rec.aliases), vendor=rec.vendor, kind=rec.kind,
        year=rec.year, form_factor=rec.form_factor, memory_type=rec.memory_type,
        compute_unit_name=rec.compute_unit_name, pcie_gen=rec.pcie_gen, notes=rec.notes,
        peak_flops_per_s=peaks, provenance=prov, **fields,
    )


def first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "record"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key (not part of the format)"
    elif err["type"] == "missing":
        msg = "required field is missing"
    more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
    return f"{loc}: {msg}{more}"


def load_device_file(path: Path) -> Device:
    """Read one device TOML file (UTF-8, size-capped)."""
    raw = parse_toml(read_text(path, "device file"), f"device file {shown(path)}")
    return device_from_record(raw, str(path))
