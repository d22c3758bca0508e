"""The separate counting pass and the roofline to compare with.

FLOPs and bytes come from gpuplan's tracer run on the trained model after the timed steps
(counting modes distort timing, so they never run during them). The roofline is this machine's
measured profile (`gpuplan bench`, newest saved one for this device), else the catalog entry of
this device, else a quick measurement made now (fp32 matmul and memory bandwidth); the result
says which."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import torch

from gpuplan.measure.workload import WorkloadSession
from gpuplan.ops.tracer import Trace, trace
from gpuplan.specs.device import Device


def count_pass(session: WorkloadSession) -> tuple[Trace | None, str]:
    """Trace the trained model on the meta device with the inputs of its first measured call."""
    model, inputs = session.model, session.model_inputs
    if model is None or inputs is None:
        return None, "no nn.Module with parameters was called during the measured steps"
    args, kwargs = inputs
    inner = getattr(model, "module", None)  # DistributedDataParallel / DataParallel wrap it
    if isinstance(inner, torch.nn.Module):
        model = inner
    try:
        return trace(model, *args, train=True, **kwargs), type(model).__name__
    except Exception as e:  # a model the tracer cannot follow: measured numbers still stand
        return None, f"the tracer could not follow {type(model).__name__}: {type(e).__name__}: {e}"


def _saved_profile(ident: dict[str, Any]) -> dict[str, Any] | None:
    from gpuplan.measure.profile import load_profile, profile_dir

    d = profile_dir()
    if not d.is_dir():
        return None
    for p in sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        same = data.get("identity", {}).get("name") == ident.get("name") and \
            data.get("identity", {}).get("kind", "cpu") == ident.get("kind")
        if same and data.get("matmul_flops_per_s") and data.get("memory_bw_bytes_per_s"):
            return load_profile(p)
    return None


def _quick_profile(device: str, ident: dict[str, Any]) -> dict[str, Any]:
    """One large square matmul per dtype (fp32; bf16 too on CUDA), STREAM copy/triad and the
    launch overhead: the roofline's ceilings in seconds (`gpuplan bench` measures them
    properly)."""
    import torch

    from gpuplan.measure import memory
    from gpuplan.measure.compute import matmul_flops
    from gpuplan.measure.machine import last_level_cache_bytes
    from gpuplan.measure.profile import today
    from gpuplan.measure.timing import clock_for, measure, random_tensor

    clock = clock_for(device)
    t0 = time.perf_counter()
    n = 1024 if device == "cpu" else 8192
    rates = {}
    for name, dt in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        if name == "bf16" and device == "cpu":
            continue
        a, b = random_tensor((n, n), dt, device), random_tensor((n, n), dt, device)

        def mm(a: Any = a, b: Any = b) -> Any:
            return torch.mm(a, b)

        st = measure(mm, clock, budget_s=0.2, min_samples=3)
        rates[name] = st.rate(matmul_flops(n, n, n))
    buf = memory.stream_buffer_bytes(last_level_cache_bytes(device), device, True)
    mem = memory.stream(device, clock, buf, 0.2)
    launch = memory.launch_overhead(device, clock, 0.1)
    return {"device": ident["name"], "identity": ident, "date": today(),
            "matmul_flops_per_s": rates, "memory_bw_bytes_per_s": mem["bw_bytes_per_s"],
            "launch_overhead_s": launch["time_s"],
            "path": f"measured now ({time.perf_counter() - t0:.1f} s quick measurement: "
                    f"{n}^3 matmul, STREAM copy/triad, launch overhead)"}


def roofline_target(device: str) -> tuple[Device, dict[str, Any] | None, str]:
    """(device, measured profile or None, which source) for the roofline and predictions."""
    from gpuplan.measure.machine import identity
    from gpuplan.measure.profile import match_catalog, measured_device

    ident = identity(device)
    prof = _saved_profile(ident)
    if prof is not None:
        dev = match_catalog(ident) or measured_device(prof)
        return dev, prof, f"measured profile {prof.get('path')} ({prof['date']})"
    dev_cat = match_catalog(ident)
    if dev_cat is not None:
        return dev_cat, None, f"catalog entry {dev_cat.name} (no saved `gpuplan bench` profile)"
    prof = _quick_profile(device, ident)
    where = prof["path"]
    prof["path"] = str(_save_quick(prof))
    return (measured_device(prof), prof,
            f"{where} of {ident['name']} (not in the catalog, no saved `gpuplan bench` "
            f"profile); saved as {prof['path']} for the next runs")


def _save_quick(prof: dict[str, Any]) -> Path:
    from gpuplan.measure.profile import profile_path, save_profile

    path = profile_path(prof)
    saved = {k: v for k, v in prof.items() if k != "path"}  # the file's own path on loading
    return save_profile({**saved, "quick": True}, path.with_name(path.stem + "-quick.json"))
