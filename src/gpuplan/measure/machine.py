"""What machine this is: device choice, identity (names, versions, clocks), cache sizes."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from gpuplan.errors import GpuplanError

DEFAULT_LLC_BYTES = 32 * 2**20


def torch_module() -> Any:
    try:
        import torch
    except ImportError:
        raise GpuplanError("measuring needs PyTorch: pip install 'gpuplan[torch]'") from None
    return torch


def resolve_device(device: str | None) -> str:
    """'cpu' or 'cuda'; None picks cuda when a GPU is visible. A missing GPU is a user error."""
    torch = torch_module()
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device not in ("cpu", "cuda"):
        raise GpuplanError(f"--device: {device!r} is not valid; expected cpu or cuda")
    if device == "cuda" and not torch.cuda.is_available():
        build = torch.version.cuda or "a CPU-only build"
        raise GpuplanError(f"--device cuda: no CUDA GPU is visible to PyTorch {torch.__version__}"
                           f" ({build}); use --device cpu")
    return device


def sync_fn(device: str) -> Any:
    return torch_module().cuda.synchronize if device == "cuda" else None


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_cache_bytes() -> dict[str, int]:
    """Per-level cache sizes of CPU 0 from sysfs: {'L1d': ..., 'L2': ..., 'L3': ...}."""
    out: dict[str, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")) if base.is_dir() else []:
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
        num = size[:-1] if size[-1:] in "KMG" else size
        out[f"L{level}{'d' if kind == 'Data' else ''}"] = int(num) * mult
    return out


def host_memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover
        return None


def last_level_cache_bytes(device: str) -> int:
    if device == "cuda":
        props = torch_module().cuda.get_device_properties(0)
        return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
    caches = cpu_cache_bytes()
    return max(caches.values()) if caches else DEFAULT_LLC_BYTES


def nvidia_smi() -> dict[str, str]:
    """Clocks, power, temperature and driver of GPU 0 when nvidia-smi is present; else {}."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = ["name", "driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem",
              "power.draw", "power.limit", "temperature.gpu", "pstate"]
    try:
        res = subprocess.run([exe, f"--query-gpu={','.join(fields)}",
                              "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return {}
    values = [v.strip() for v in res.stdout.strip().split(",")]
    return {k: v for k, v in zip(fields, values, strict=False) if v and "N/A" not in v}


def identity(device: str) -> dict[str, Any]:
    """Names and versions of this machine; what is not readable is omitted."""
    torch = torch_module()
    out: dict[str, Any] = {
        "kind": device, "host": socket.gethostname(), "platform": platform.platform(),
        "python": platform.python_version(), "torch": torch.__version__,
        "cpu_model": cpu_model(), "cpu_cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "cpu_caches_bytes": cpu_cache_bytes(),
        "host_memory_bytes": host_memory_bytes(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        out.update(name=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   gpu_count=torch.cuda.device_count(),
                   gpu_memory_bytes=int(props.total_memory),
                   capability=".".join(map(str, torch.cuda.get_device_capability(0))),
                   l2_cache_bytes=last_level_cache_bytes("cuda"))
        smi = nvidia_smi()
        if smi:
            out["nvidia_smi"] = smi
            if "driver_version" in smi:
                out["driver"] = smi["driver_version"]
    else:
        out["name"] = out["cpu_model"]
    return out
