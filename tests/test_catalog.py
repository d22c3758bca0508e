"""Sanity checks on the built-in device catalog (src/gpuplan/catalog/devices/*.toml).

The catalog is the product: every planning number starts here. These tests catch the usual ways a
datasheet number goes wrong when it is copied: a "with sparsity" headline taken as the dense peak, a
bidirectional link figure taken as one-way, a value pasted into the wrong device, a missing source.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

from gpuplan.errors import GpuplanError, UnknownNameError
from gpuplan.specs.catalog import device_catalog, get_device
from gpuplan.specs.device import DTYPES, Device
from gpuplan.specs.device_file import device_from_record, load_device_file

GB = 1e9
TB = 1e12
TFLOPS = 1e12

DATE_RE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")

ACCELERATOR_KINDS = ("gpu", "tpu", "npu")

# The devices the catalog must carry (canonical names).
REQUIRED = [
    "V100-SXM2-32GB", "A100-SXM-40GB", "A100-PCIE-40GB", "A100-SXM-80GB", "A100-PCIE-80GB",
    "H100-SXM", "H100-PCIE", "H100-NVL", "H200", "H20", "H800", "B200", "GB200", "L40S", "L4",
    "A10", "A10G", "T4", "RTX-3090", "RTX-4090", "RTX-5090", "RTX-A6000",
    "MI250X", "MI300X", "MI325X",
    "TPU-v4", "TPU-v5e", "TPU-v5p", "TPU-v6e",
    "Ascend-910B", "Xeon-8480+", "EPYC-9654", "Apple-M2-Ultra",
]


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch):
    """The built-in catalog only (no user files from the environment)."""
    monkeypatch.delenv("GPUPLAN_DEVICES", raising=False)
    return device_catalog()


def _devices() -> list[Device]:
    import os

    saved = os.environ.pop("GPUPLAN_DEVICES", None)
    try:
        return list(device_catalog())
    finally:
        if saved is not None:
            os.environ["GPUPLAN_DEVICES"] = saved


DEVICES = _devices()
ACCELERATORS = [d for d in DEVICES if d.kind in ACCELERATOR_KINDS]


def _ids(devices: list[Device]) -> list[str]:
    return [d.name for d in devices]


def half_precision_peak(d: Device) -> float | None:
    """Dense bf16 peak, else fp16 (V100, T4 and Apple GPUs have no bf16 path)."""
    return d.peak("bf16") or d.peak("fp16")


# --------------------------------------------------------------------------------------------
# Coverage and provenance
# --------------------------------------------------------------------------------------------


def test_catalog_has_at_least_30_devices(catalog) -> None:
    assert len(catalog) >= 30


def test_required_devices_present(catalog) -> None:
    missing = [n for n in REQUIRED if n not in catalog.devices]
    assert not missing, f"missing from the catalog: {missing}"


NUMERIC_FIELDS = {
    "memory_bytes": "memory_bytes",
    "usable_memory_bytes": "usable_memory_bytes",
    "mem_bw_bytes_per_s": "mem_bw_bytes_per_s",
    "l2_cache_bytes": "l2_cache_bytes",
    "compute_units": "compute_units",
    "tdp_w": "tdp_w",
    "list_price_usd": "list_price_usd",
    "cloud_usd_per_hour": "cloud_usd_per_hour",
    "scale_up": "scale_up",
    "pcie": "pcie",
    "scale_out": "scale_out",
}


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_every_number_has_a_dated_source(device: Device) -> None:
    fields = [f for f in NUMERIC_FIELDS if getattr(device, f) is not None]
    fields += [f"peak.{d}" for d in device.peak_flops_per_s]
    for field in fields:
        prov = device.provenance.get(field)
        assert prov is not None, f"{device.name}: {field} has no provenance"
        assert prov.source.strip(), f"{device.name}: {field} has an empty source"
        assert DATE_RE.match(prov.date), f"{device.name}: {field} date {prov.date!r}"
        if prov.uncertain:
            assert prov.note, f"{device.name}: {field} is uncertain but says nothing about why"


NVLINK_GPUS = [d for d in DEVICES if d.vendor == "NVIDIA" and d.kind == "gpu" and d.scale_up]


@pytest.mark.parametrize("device", NVLINK_GPUS, ids=_ids(NVLINK_GPUS))
def test_every_nvlink_gpu_states_its_sms(device: Device) -> None:
    """GEMM tile/wave quantization needs the SM count; without it a training GPU's matmuls are
    timed as if every wave were full (B200 and GB200 lacked it until stop 23)."""
    assert device.compute_units and 20 <= device.compute_units <= 200


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_peaks_use_known_dtypes_and_are_positive(device: Device) -> None:
    assert device.peak_flops_per_s, f"{device.name}: no peak at all"
    for dtype, value in device.peak_flops_per_s.items():
        assert dtype in DTYPES
        assert value > 0 and math.isfinite(value)


# --------------------------------------------------------------------------------------------
# Physical plausibility
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_memory_in_range(device: Device) -> None:
    if device.kind == "cpu":
        # Maximum memory per socket: up to 6 TB (EPYC 9654).
        assert 4 * GB <= device.memory_bytes <= 6 * TB, device.name
    else:
        assert 4 * GB <= device.memory_bytes <= 300 * GB, device.name


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_memory_bandwidth_in_range(device: Device) -> None:
    assert 50 * GB <= device.mem_bw_bytes_per_s <= 10 * TB, device.name


# Accelerators whose 16-bit ridge point is genuinely below 50 FLOP/byte.
LOW_RIDGE = {
    "H20": "export-limited: 148 TFLOP/s BF16 against 4 TB/s",
    "Apple-M2-Ultra": "no matrix engine: FP16 runs at the FP32 rate",
}


@pytest.mark.parametrize("device", ACCELERATORS, ids=_ids(ACCELERATORS))
def test_half_precision_ridge_point(device: Device) -> None:
    """A sparse headline doubles the ridge; a wrong unit moves it by 1000x."""
    peak = half_precision_peak(device)
    assert peak is not None, f"{device.name}: neither bf16 nor fp16"
    ridge = peak / device.mem_bw_bytes_per_s
    if device.name in LOW_RIDGE:
        assert 20 <= ridge < 50, f"{device.name}: ridge {ridge:.0f} ({LOW_RIDGE[device.name]})"
    else:
        assert 50 <= ridge <= 1000, f"{device.name}: bf16/fp16 ridge {ridge:.0f} FLOP/byte"


@pytest.mark.parametrize("device", ACCELERATORS, ids=_ids(ACCELERATORS))
def test_fp32_vector_ridge_point(device: Device) -> None:
    """The fp32 vector (non-tensor) rate; 150 rather than 100 because the Ada inference cards
    (L4: 101, L40S: 106 FLOP/byte) have a lot of CUDA-core FP32 on GDDR6."""
    fp32 = device.peak("fp32")
    if fp32 is None:
        pytest.skip(f"{device.name} publishes no fp32 vector rate")
    ridge = fp32 / device.mem_bw_bytes_per_s
    assert 1 <= ridge <= 150, f"{device.name}: fp32 ridge {ridge:.0f} FLOP/byte"


# int8 may exceed 2x the 16-bit rate listed where that rate is the FP32-accumulate one on GeForce.
INT8_RATIO_EXCEPTIONS = {
    "RTX-3090": "int8 284 = 2x the FP16-accumulate rate (142) = 4x the FP32-accumulate 71 listed",
}
# fp4 may exceed 2x fp8 where fp8 is the GeForce FP32-accumulate (half) rate.
FP4_RATIO_EXCEPTIONS = {
    "RTX-5090": "fp8 listed at the FP32-accumulate rate (419), half the FP16-accumulate 838",
}


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_dtype_ordering(device: Device) -> None:
    """Each halving of precision at most doubles the tensor rate: catches sparse figures and
    values pasted into the wrong dtype."""
    p = device.peak
    name = device.name
    bf16, fp16, fp8 = p("bf16"), p("fp16"), p("fp8")
    half = bf16 or fp16
    if bf16 and fp16 and device.kind != "cpu":  # Sapphire Rapids: AMX bf16 vs AVX512-FP16
        assert math.isclose(bf16, fp16, rel_tol=0.01), f"{name}: bf16 {bf16:g} != fp16 {fp16:g}"
    if fp8 and half:
        assert fp8 <= 2.05 * half, f"{name}: fp8 more than 2x bf16/fp16"
    if p("int8") and name not in INT8_RATIO_EXCEPTIONS:
        ref = max(x for x in (bf16, fp16, fp8) if x) if (bf16 or fp16 or fp8) else None
        if ref:
            assert p("int8") <= 2.05 * ref, f"{name}: int8 more than 2x fp16/bf16/fp8"
    if p("tf32") and bf16:
        assert p("tf32") <= 0.55 * bf16, f"{name}: tf32 more than half of bf16"
    if p("int4") and p("int8"):
        assert p("int4") <= 2.05 * p("int8"), f"{name}: int4 more than 2x int8"
    if p("fp4") and fp8 and name not in FP4_RATIO_EXCEPTIONS:
        assert p("fp4") <= 2.05 * fp8, f"{name}: fp4 more than 2x fp8"
    if p("fp32") and half:
        assert p("fp32") <= half * 1.001, f"{name}: fp32 vector above the 16-bit peak"
    if p("fp64") and p("fp32") and device.kind == "cpu":
        assert math.isclose(p("fp64") * 2, p("fp32"), rel_tol=0.01), f"{name}: CPU fp64 != fp32/2"


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_flops_per_watt_below_physical_cap(device: Device) -> None:
    """Dense bf16 above 2.5 TFLOP/s per watt (B200: 2.25) means a sparse or mis-scaled figure."""
    peak = half_precision_peak(device)
    if device.tdp_w is None or peak is None:
        pytest.skip(f"{device.name}: no TDP or no 16-bit peak")
    assert peak / device.tdp_w <= 2.5 * TFLOPS, f"{device.name}: {peak / device.tdp_w / 1e12:.2f}"


# Pairs that really share memory, bandwidth and bf16 peak: same silicon, different board or market.
SAME_SILICON = {
    frozenset({"H100-SXM", "H800"}),  # H800 = H100 SXM with NVLink and FP64 cut for export
    frozenset({"A100-SXM-80GB", "A800-SXM-80GB"}),  # A800 = A100 SXM with NVLink cut for export
    frozenset({"A100-SXM-40GB", "A100-PCIE-40GB"}),  # same GA100 datasheet peaks, 400 vs 250 W
}


def test_no_two_devices_share_memory_bandwidth_and_peak() -> None:
    seen: dict[tuple[int, int, int], str] = {}
    for d in DEVICES:
        peak = half_precision_peak(d) or 0.0
        key = (round(d.memory_bytes / 1e8), round(d.mem_bw_bytes_per_s / 1e9), round(peak / 1e11))
        if key in seen:
            pair = frozenset({seen[key], d.name})
            assert pair in SAME_SILICON, f"{seen[key]} and {d.name} look copy-pasted: {key}"
        else:
            seen[key] = d.name


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_links_are_per_direction(device: Device) -> None:
    """Bidirectional totals pasted as one-way figures exceed these caps."""
    if device.scale_up is not None:
        assert device.scale_up.bw_bytes_per_s <= 900 * GB, f"{device.name}: scale_up"
    if device.scale_out is not None:
        assert device.scale_out.bw_bytes_per_s <= 100 * GB, f"{device.name}: scale_out (800 Gb/s)"
    if device.pcie is not None:
        m = re.match(r"PCIe (\d)\.0 x16", device.pcie.name)
        if m:
            gen = int(m.group(1))
            assert device.pcie.bw_bytes_per_s == pytest.approx(16 * GB * 2 ** (gen - 3)), (
                f"{device.name}: PCIe {gen}.0 x16 is {16 * 2 ** (gen - 3)} GB/s per direction"
            )
            if device.pcie_gen is not None:
                assert device.pcie_gen == gen, f"{device.name}: pcie_gen vs link name"


# --------------------------------------------------------------------------------------------
# Names, aliases and errors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("H100", "H100-SXM"),
        ("h100 sxm", "H100-SXM"),
        ("H100-SXM5", "H100-SXM"),
        ("A100", "A100-SXM-80GB"),
        ("a100-40gb", "A100-SXM-40GB"),
        ("h200", "H200"),
        ("H800", "H800"),
        ("mi300x", "MI300X"),
        ("MI300X", "MI300X"),
        ("tpu-v5e", "TPU-v5e"),
        ("v5e", "TPU-v5e"),
        ("TPU v5e", "TPU-v5e"),
        ("trillium", "TPU-v6e"),
        ("rtx 4090", "RTX-4090"),
        ("4090", "RTX-4090"),
        ("gb200-nvl72", "GB200"),
        ("xeon-8480+", "Xeon-8480+"),
        ("m2 ultra", "Apple-M2-Ultra"),
    ],
)
def test_aliases_resolve_case_insensitively(catalog, alias: str, canonical: str) -> None:
    assert catalog.get(alias).name == canonical


def test_aliases_do_not_collide(catalog) -> None:
    # DeviceCatalog.add raises on collisions; check the index covers every name and alias.
    from gpuplan.specs.catalog import normalize

    for d in catalog:
        for key in (d.name, *d.aliases):
            assert catalog._index[normalize(key)] == d.name


def test_unknown_device_raises() -> None:
    with pytest.raises(UnknownNameError):
        get_device("no-such")


MINIMAL = """
name = "Test-GPU"
vendor = "Test"
kind = "gpu"
year = 2024
form_factor = "PCIe"
memory_type = "GDDR6"

[sources.s]
title = "made up for a test"
date = "2024"

[values]
memory = { value = "16 GB", source = "s" }
mem_bw = { value = "500 GB/s", source = "s" }

[peak]
bf16 = { value = "100 TFLOP/s", source = "s" }
"""


def test_unknown_key_is_rejected_and_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace('kind = "gpu"', 'kind = "gpu"\nflux_capacitor = 3'))
    with pytest.raises(GpuplanError, match="flux_capacitor"):
        load_device_file(path)


def test_unknown_key_in_a_value_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    bad = MINIMAL.replace('source = "s" }\nmem_bw', 'source = "s", sparse = true }\nmem_bw')
    path.write_text(bad)
    with pytest.raises(GpuplanError, match="sparse"):
        load_device_file(path)


def test_missing_required_field_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace('vendor = "Test"\n', ""))
    with pytest.raises(GpuplanError, match="vendor"):
        load_device_file(path)


def test_zero_peak_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "zero.toml"
    path.write_text(MINIMAL + 'fp8 = { value = "0 TFLOP/s", source = "s" }\n')
    with pytest.raises(GpuplanError, match="fp8"):
        load_device_file(path)


def test_value_naming_an_undeclared_source_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace('bf16 = { value = "100 TFLOP/s", source = "s" }',
                                    'bf16 = { value = "100 TFLOP/s", source = "nope" }'))
    with pytest.raises(GpuplanError, match="nope"):
        load_device_file(path)


def test_peak_given_as_zero_is_rejected_in_a_record() -> None:
    raw = {
        "name": "Z", "vendor": "Test", "kind": "gpu", "year": 2024, "form_factor": "PCIe",
        "memory_type": "GDDR6", "sources": {"s": {"title": "t", "date": "2024"}},
        "values": {"memory": {"value": "16 GB", "source": "s"},
                   "mem_bw": {"value": "500 GB/s", "source": "s"}},
        "peak": {"bf16": {"value": 0, "source": "s"}},
    }
    with pytest.raises(GpuplanError, match="never zero"):
        device_from_record(raw, "test")


def test_user_device_file_via_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "test-gpu.toml"
    path.write_text(MINIMAL)
    monkeypatch.setenv("GPUPLAN_DEVICES", str(tmp_path))
    cat = device_catalog()
    assert "Test-GPU" in cat.devices
    assert cat.get("test gpu").peak("bf16") == 100 * TFLOPS
    assert len(cat) == len(DEVICES) + 1


# --------------------------------------------------------------------------------------------
# Usable memory: what a PyTorch process can allocate, which the memory planner fills
# --------------------------------------------------------------------------------------------

MiB, GiB = 2**20, 2**30

# Devices whose usable memory was found in public logs (torch total_memory, CUDA deviceQuery
# totalGlobalMem, PyTorch OOM "total capacity"); each carries its own source in the catalog.
WITH_USABLE = [
    "A100-SXM-40GB", "A100-SXM-80GB", "A100-PCIE-40GB", "A100-PCIE-80GB", "H100-SXM",
    "H100-PCIE", "H100-NVL", "H200", "B200", "V100-SXM2-32GB", "L4", "L40S", "A10", "A10G", "T4",
    "RTX-3090", "RTX-4090", "RTX-5090", "RTX-A6000", "MI300X",
]

# nvidia-smi "Total" (MiB) as published: modal-labs/modal-client PR #2797 (2025-01: H100
# 81559, A100 80GB 81920, A100 40GB 40960, A10 23028, L40S 46068, L4 23034, T4 15360) and
# thamada/nvidia-smi gls/*_smi.py (2024-11: RTX 3090 24576, RTX 4090 24564, H100 NVL 95830);
# B200 183359 (NVIDIA/TensorRT-LLM#10278); A100 80GB PCIe 81920 (stas00/ml-engineering).
# The driver keeps a few hundred MiB of that total for itself, so what PyTorch sees is a
# little less: never more, and not more than 3% less.
NVIDIA_SMI_TOTAL_MIB = {
    "H100-SXM": 81559, "A100-SXM-80GB": 81920, "A100-SXM-40GB": 40960, "A10": 23028,
    "L40S": 46068, "L4": 23034, "T4": 15360, "RTX-3090": 24576, "RTX-4090": 24564,
    "H100-NVL": 95830, "B200": 183359, "A100-PCIE-80GB": 81920,
}


@pytest.mark.parametrize("name", WITH_USABLE)
def test_usable_memory_present_and_sourced(catalog, name: str) -> None:
    d = catalog.get(name)
    assert d.usable_memory_bytes is not None, f"{name}: usable_memory missing"
    prov = d.provenance["usable_memory_bytes"]
    assert prov.source.strip() and DATE_RE.match(prov.date)
    assert prov.note, f"{name}: say which number it is (torch total_memory, deviceQuery, ...)"


@pytest.mark.parametrize("device", DEVICES, ids=_ids(DEVICES))
def test_usable_memory_within_bounds(device: Device) -> None:
    if device.usable_memory_bytes is None:
        assert device.capacity_bytes == device.memory_bytes
        return
    assert 0.85 * device.memory_bytes <= device.usable_memory_bytes <= 1.1 * device.memory_bytes
    assert device.capacity_bytes == device.usable_memory_bytes


@pytest.mark.parametrize("name", list(NVIDIA_SMI_TOTAL_MIB))
def test_usable_memory_just_below_the_nvidia_smi_total(catalog, name: str) -> None:
    """Catches the nvidia-smi total, or a GB/GiB slip, entered as the usable figure."""
    smi = NVIDIA_SMI_TOTAL_MIB[name] * MiB
    usable = catalog.get(name).usable_memory_bytes
    assert 0.97 * smi <= usable < smi, f"{name}: {usable / MiB:.0f} MiB vs nvidia-smi {smi / MiB}"


def test_usable_memory_follows_binary_units_on_hbm_parts(catalog) -> None:
    """HBM parts sold as "80 GB" hold 80 GiB: software sees more than 80e9 bytes. GDDR6 parts
    with ECC on (T4, L4, A10, L40S) give up a slice and show less than the vendor's GB."""
    for name in ("H100-SXM", "A100-SXM-80GB", "H200", "B200", "MI300X", "V100-SXM2-32GB"):
        d = catalog.get(name)
        assert d.usable_memory_bytes > d.memory_bytes, name
    for name in ("T4", "L4", "A10", "A10G", "L40S"):
        d = catalog.get(name)
        assert d.usable_memory_bytes < d.memory_bytes, name
    h100 = catalog.get("H100-SXM").usable_memory_bytes
    assert 79.0 * GiB < h100 < 79.3 * GiB  # torch total_memory 79.11-79.20 GiB in the sources


def test_usable_memory_parsed_from_a_record(tmp_path: Path) -> None:
    path = tmp_path / "u.toml"
    path.write_text(MINIMAL.replace(
        'memory = { value = "16 GB", source = "s" }',
        'memory = { value = "16 GB", source = "s" }\n'
        'usable_memory = { value = "15360 MiB", source = "s", note = "nvidia-smi total" }'))
    d = load_device_file(path)
    assert d.usable_memory_bytes == 15360 * MiB
    assert d.capacity_bytes == 15360 * MiB
    assert d.memory_bytes == 16 * GB
    assert d.provenance["usable_memory_bytes"].note == "nvidia-smi total"


def test_capacity_falls_back_to_the_vendor_figure(tmp_path: Path) -> None:
    path = tmp_path / "v.toml"
    path.write_text(MINIMAL)
    d = load_device_file(path)
    assert d.usable_memory_bytes is None and d.capacity_bytes == d.memory_bytes == 16 * GB


@pytest.mark.parametrize("value", ["13 GB", "18 GB", "16 TB"])
def test_usable_memory_out_of_bounds_is_rejected(tmp_path: Path, value: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace(
        'memory = { value = "16 GB", source = "s" }',
        'memory = { value = "16 GB", source = "s" }\n'
        f'usable_memory = {{ value = "{value}", source = "s" }}'))
    with pytest.raises(GpuplanError, match="usable_memory_bytes"):
        load_device_file(path)


def test_usable_memory_needs_a_declared_source(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(MINIMAL.replace(
        'memory = { value = "16 GB", source = "s" }',
        'memory = { value = "16 GB", source = "s" }\nusable_memory = { value = "15 GiB", source = "smi" }'))
    with pytest.raises(GpuplanError, match="smi"):
        load_device_file(path)


def test_usable_memory_without_provenance_is_rejected() -> None:
    d = get_device("h100")
    fields = d.model_dump()
    fields["provenance"] = {k: v for k, v in d.provenance.items() if k != "usable_memory_bytes"}
    with pytest.raises(ValueError, match="usable_memory_bytes"):
        Device.model_validate(fields)


def test_planner_uses_the_usable_capacity() -> None:
    from gpuplan.estimate.inference import InferConfig, infer_memory
    from gpuplan.specs.catalog import get_model

    d = get_device("h100")
    r = infer_memory(get_model("llama-3-8b"), d, InferConfig(batch=1, context=4096))
    assert r.capacity_bytes == d.usable_memory_bytes != d.memory_bytes
    assert "usable" in str(r.assumptions["capacity"])


def test_hardware_command_shows_usable_memory(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from gpuplan.cli.main import main

    assert main(["hardware", "h100", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["memory_bytes"] == 80_000_000_000  # the vendor's figure, unchanged
    assert r["usable_memory_bytes"] == r["capacity_bytes"] == 85_045_477_376
    assert r["sources"]["usable_memory_bytes"]["note"]
    assert main(["hardware", "tpu-v5e", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["usable_memory_bytes"] is None and r["capacity_bytes"] == r["memory_bytes"]
    assert main(["hardware", "t4"]) == 0
    assert "usable memory" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# Agreement with the verified rows of shared/data/gpus.csv
# --------------------------------------------------------------------------------------------

# Copied from shared/data/gpus.csv (rows tagged VERIFIED-*), so the comparison runs without it.
# csv name -> (catalog name, memory_GB, mem_bw_TBps, bf16 dense, fp16 dense, csv source column)
REFERENCE: dict[str, tuple[str, float, float, float | None, float | None, str]] = {
    "V100 SXM2 32GB": ("V100-SXM2-32GB", 32, 0.9, None, 125,
                       "ml-engineering; llm-analysis v100-sxm-32gb.json; LLM-Viewer"),
    "A100 SXM 40GB": ("A100-SXM-40GB", 40, 1.555, 312, 312,
                      "ml-engineering TFLOPS table (nvidia.com/a100); llm-analysis"),
    "A100 SXM 80GB": ("A100-SXM-80GB", 80, 2.039, 312, 312,
                      "ml-engineering; llm-analysis a100-sxm-80gb.json; LLM-Viewer"),
    "A100 PCIe 80GB": ("A100-PCIE-80GB", 80, 1.935, 312, 312,
                       "ml-engineering; llm-analysis a100-pcie-80gb.json"),
    "H100 SXM 80GB": ("H100-SXM", 80, 3.35, 989, 989,
                      "ml-engineering (nvidia.com/h100); glennklockwood.com H100"),
    "H100 PCIe 80GB": ("H100-PCIE", 80, 2.0, 756, 756,
                       "ml-engineering; NVIDIA H100 PCIe product brief; llm-analysis"),
    "H200 SXM 141GB": ("H200", 141, 4.8, 989, 989, "ml-engineering (nvidia.com/h200)"),
    "B200 (HGX/DGX, 1000W)": ("B200", 180, 8.0, 2250, 2250,
                              "ml-engineering (DGX B200 datasheet); glennklockwood.com B200"),
    "GB200 (per Blackwell GPU in NVL72)": (
        "GB200", 186, 8.0, 2500, 2500, "ml-engineering (nvidia.com/gb200-nvl72); glennklockwood"
    ),
    "L40S": ("L40S", 48, 0.864, 362, 362, "ml-engineering (nvidia.com/l40s); retailer spec copy"),
    "L4": ("L4", 24, 0.3, 121, 121, "retailer copy of datasheet; grokipedia; fpsbench"),
    "A10": ("A10", 24, 0.6, 125, 125, "llm-analysis a10-pcie-28gb.json; sysrqmts; baseten"),
    "T4": ("T4", 16, 0.32, None, 65, "geektopia.es launch article; sysrqmts; HF gpu_catalog"),
    "RTX 4090": ("RTX-4090", 24, 1.008, 165.2, 165.2,
                 "waredb.com (Ada whitepaper); Tom's Hardware"),
    "MI250X": ("MI250X", 128, 3.28, 383, 383, "ml-engineering (amd.com mi250x); llm-analysis"),
    "MI300X": ("MI300X", 192, 5.3, 1300, 1300, "ml-engineering (amd.com mi300x)"),
    "MI325X": ("MI325X", 256, 6.0, 1300, 1300, "ml-engineering (amd.com mi325x)"),
    "TPU v4": ("TPU-v4", 32, 1.2, 275, None, "scaling-book tpus.md; ml-engineering"),
    "TPU v5e": ("TPU-v5e", 16, 0.81, 197, None, "scaling-book tpus.md; ml-engineering"),
    "TPU v5p": ("TPU-v5p", 95, 2.76, 459, None, "scaling-book tpus.md; ml-engineering"),
    "TPU v6e (Trillium)": ("TPU-v6e", 32, 1.6, 918, 918, "scaling-book tpus.md; ml-engineering"),
}

# (catalog name, field) -> why the catalog deliberately differs from gpus.csv by more than 3%.
KNOWN_DIFFERENCES = {
    ("B200", "mem_bw"): "HGX B200 datasheet gives 7.7 TB/s per GPU; gpus.csv uses DGX B200's 8.0",
    ("TPU-v4", "memory"): "Google states 32 GiB (34.4 GB); gpus.csv writes 32",
    ("TPU-v5p", "memory"): "Google's current page states 95 GiB (102 GB); gpus.csv writes 95",
}

TOLERANCE = 0.03


def _compare(catalog_name: str, field: str, expected: float | None, actual: float | None) -> None:
    if expected is None:
        return
    assert actual is not None, f"{catalog_name}: {field} missing"
    if (catalog_name, field) in KNOWN_DIFFERENCES:
        return
    err = abs(actual - expected) / expected
    assert err <= TOLERANCE, (
        f"{catalog_name}: {field} {actual:g} vs gpus.csv {expected:g} ({err:.1%})"
    )


@pytest.mark.parametrize("csv_name", list(REFERENCE), ids=list(REFERENCE))
def test_catalog_agrees_with_verified_reference_rows(catalog, csv_name: str) -> None:
    name, mem_gb, bw_tbps, bf16, fp16, _source = REFERENCE[csv_name]
    d = catalog.get(name)
    _compare(name, "memory", mem_gb, d.memory_bytes / GB)
    _compare(name, "mem_bw", bw_tbps, d.mem_bw_bytes_per_s / TB)
    _compare(name, "bf16", bf16, (d.peak("bf16") or 0) / TFLOPS or None)
    _compare(name, "fp16", fp16, (d.peak("fp16") or d.peak("bf16") or 0) / TFLOPS or None)


def test_known_differences_really_differ(catalog) -> None:
    """Keep KNOWN_DIFFERENCES honest: drop an entry once the two sources agree."""
    for (name, field), _why in KNOWN_DIFFERENCES.items():
        row = next(r for r in REFERENCE.values() if r[0] == name)
        d = catalog.get(name)
        expected = {"memory": row[1], "mem_bw": row[2]}[field]
        actual = {"memory": d.memory_bytes / GB, "mem_bw": d.mem_bw_bytes_per_s / TB}[field]
        assert abs(actual - expected) / expected > TOLERANCE, (name, field)


SHARED_CSV = Path(__file__).resolve().parents[2] / "shared" / "data" / "gpus.csv"


def _leading_number(cell: str) -> float | None:
    m = re.match(r"\s*~?\s*([0-9]+(?:\.[0-9]+)?)", cell)
    return float(m.group(1)) if m else None


@pytest.mark.skipif(not SHARED_CSV.is_file(), reason="shared/data/gpus.csv not available")
def test_reference_table_matches_shared_csv() -> None:
    """The literal REFERENCE table is a faithful copy of every VERIFIED row of gpus.csv."""
    with SHARED_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    verified = {n for n, r in rows.items() if r["verification"].startswith("VERIFIED")}
    assert verified == set(REFERENCE), f"REFERENCE vs verified rows: {verified ^ set(REFERENCE)}"
    for csv_name, (_name, mem_gb, bw_tbps, bf16, fp16, _src) in REFERENCE.items():
        r = rows[csv_name]
        assert _leading_number(r["memory_GB"]) == mem_gb, csv_name
        assert _leading_number(r["mem_bw_TBps"]) == bw_tbps, csv_name
        assert _leading_number(r["bf16_dense_TFLOPS"]) == bf16, csv_name
        assert _leading_number(r["fp16_dense_TFLOPS"]) == fp16, csv_name
