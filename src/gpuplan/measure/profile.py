"""Machine profiles: the measured ceilings of one machine as one JSON file, saved under the
user's cache (~/.cache/gpuplan/profiles/<host>-<device>-<date>.json; XDG_CACHE_HOME is
respected) and loaded by `--profile FILE` (estimate.efficiency.efficiency_from_profile)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.estimate.efficiency import Efficiency, efficiency_from_profile
from gpuplan.specs.catalog import device_catalog, normalize
from gpuplan.specs.device import DTYPES, Device, Provenance

SCHEMA = "gpuplan-profile/1"
REQUIRED = ("device", "date", "matmul_flops_per_s", "memory_bw_bytes_per_s")


def today() -> str:
    return _dt.date.today().isoformat()


def profile_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpuplan" / "profiles"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def profile_path(profile: dict[str, Any]) -> Path:
    ident = profile.get("identity", {})
    name = f"{_slug(ident.get('host', 'host'))}-{_slug(profile['device'])}-{profile['date']}.json"
    return profile_dir() / name


def save_profile(profile: dict[str, Any], path: Path | None = None) -> Path:
    """Write atomically (a temporary file, then rename): nothing is left half-written."""
    path = path or profile_path(profile)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(profile, indent=2, default=str))
        tmp.replace(path)
    except OSError as e:
        raise GpuplanError(f"profile: cannot write {path} ({e.strerror})") from None
    return path


def load_profile(path: str | Path) -> dict[str, Any]:
    """Read and check a profile file (UTF-8, size-capped, typed and range-checked by
    specs.profile_file); bad files are one clear error."""
    from gpuplan.specs.files import user_path
    from gpuplan.specs.profile_file import read_profile

    p = user_path(path)
    data = read_profile(p)
    data.setdefault("path", str(p))
    return data


def match_catalog(identity: dict[str, Any]) -> Device | None:
    """The catalog device whose name or an alias appears in the measured device's name (GPU
    name from torch.cuda.get_device_name, CPU model from /proc/cpuinfo); the longest match
    wins; with the GPU memory known, devices of another memory size are left out."""
    kind = identity.get("kind", "cpu")
    text = normalize(str(identity.get("name", "")))
    if not text:
        return None
    mem = identity.get("gpu_memory_bytes")
    best: tuple[int, Device] | None = None
    for d in device_catalog():
        if (d.kind == "cpu") != (kind == "cpu"):
            continue
        if mem and not 0.8 <= mem / d.memory_bytes <= 1.25:
            continue
        keys = [normalize(k) for k in (d.name, *d.aliases)]
        hit = max((len(k) for k in keys if len(k) >= 3 and k in text), default=0)
        if hit and (best is None or hit > best[0]):
            best = (hit, d)
    return best[1] if best else None


def measured_device(profile: dict[str, Any]) -> Device:
    """A Device built from the measured numbers alone (for machines not in the catalog)."""
    ident = profile.get("identity", {})
    date = str(profile["date"])
    src = Provenance(source=f"gpuplan bench profile of {profile['device']}", date=date)
    peaks = {dt: float(v) for dt, v in profile["matmul_flops_per_s"].items() if dt in DTYPES}
    mem = int(ident.get("gpu_memory_bytes") or ident.get("host_memory_bytes") or 2**34)
    prov = {"memory_bytes": src, "mem_bw_bytes_per_s": src,
            **{f"peak.{dt}": src for dt in peaks}}
    return Device(name=f"measured: {profile['device']}", vendor="measured",
                  kind="cpu" if ident.get("kind", "cpu") == "cpu" else "gpu",
                  year=int(date[:4]), form_factor="this machine", memory_type="measured",
                  memory_bytes=mem, mem_bw_bytes_per_s=float(profile["memory_bw_bytes_per_s"]),
                  peak_flops_per_s=peaks, provenance=prov)


def prediction_target(profile: dict[str, Any]) -> tuple[Device, Efficiency]:
    """Catalog entry of the measured device when there is one, else a measured Device; with
    the profile's ceilings as the efficiency."""
    dev = match_catalog(profile.get("identity", {})) or measured_device(profile)
    return dev, efficiency_from_profile(profile, dev)


def compare(profile: dict[str, Any]) -> dict[str, Any]:
    """Measured ceilings next to the matching catalog device's datasheet numbers."""
    dev = match_catalog(profile.get("identity", {}))
    if dev is None:
        return {"catalog_device": None,
                "note": f"no catalog entry matches {profile['device']!r}", "rows": []}
    rows = []
    for dt, v in profile["matmul_flops_per_s"].items():
        peak = dev.peak(dt)
        rows.append({"what": f"matmul {dt}", "measured": v, "catalog": peak,
                     "ratio": v / peak if peak else None, "unit": "FLOP/s"})
    bw = profile["memory_bw_bytes_per_s"]
    rows.append({"what": "memory bandwidth", "measured": bw, "catalog": dev.mem_bw_bytes_per_s,
                 "ratio": bw / dev.mem_bw_bytes_per_s, "unit": "B/s"})
    hd = profile.get("memory", {}).get("host_device", {})
    if hd.get("h2d_pinned") and dev.pcie is not None:
        m = hd["h2d_pinned"]["bw_bytes_per_s"]
        rows.append({"what": "host-to-device (pinned)", "measured": m,
                     "catalog": dev.pcie.bw_bytes_per_s, "ratio": m / dev.pcie.bw_bytes_per_s,
                     "unit": "B/s"})
    return {"catalog_device": dev.name, "note": "catalog peaks are dense datasheet figures",
            "rows": rows}
