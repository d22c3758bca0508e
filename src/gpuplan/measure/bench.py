"""`gpuplan bench` without the command line: run the chosen sections, return one dict that is
both the command's JSON and the machine profile (measure/profile.py)."""

from __future__ import annotations

import datetime as _dt
import os
import time
from collections.abc import Callable
from typing import Any

from gpuplan.errors import GpuplanError

SECTIONS = ("matmul", "memory", "launch", "fusion", "attention", "collectives", "decode")
DEFAULT_SECTIONS = ("matmul", "memory", "launch", "fusion", "attention")

Progress = Callable[[str], None]


def parse_only(text: str | None, nproc: int | None) -> tuple[str, ...]:
    """--only a,b,c; without it the default sections, plus collectives when --nproc > 1."""
    if text is None:
        return DEFAULT_SECTIONS + (("collectives",) if nproc and nproc > 1 else ())
    parts = tuple(p.strip() for p in text.split(","))
    bad = [p for p in parts if p not in SECTIONS]
    if bad or not parts:  # an empty item ('matmul,,memory', a trailing comma) is a typo too
        raise GpuplanError(f"--only: {text!r} is not valid; expected a comma-separated list of "
                           f"{', '.join(SECTIONS)}")
    if nproc is not None and "collectives" not in parts:
        raise GpuplanError(f"--nproc: cannot be used with --only {text!r} (it sets the "
                           "processes of the collectives section; add collectives to --only)")
    if "decode" in parts:  # its prediction uses the profile measured in the same run
        from gpuplan.measure.decode_check import DECODE_NEEDS

        parts += DECODE_NEEDS
    return tuple(s for s in SECTIONS if s in parts)


def _load() -> tuple[float, ...] | None:
    try:
        return tuple(round(x, 2) for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return None


def _prediction_target(r: dict[str, Any]) -> tuple[Any, Any]:
    from gpuplan.estimate.efficiency import default_efficiency
    from gpuplan.measure.profile import match_catalog, prediction_target

    if r["matmul_flops_per_s"] and r["memory_bw_bytes_per_s"]:
        return prediction_target(r)
    dev = match_catalog(r["identity"])
    if dev is None:
        raise GpuplanError("fusion/attention predictions need a catalog match for this device "
                           "or matmul and memory measured in the same run (add them to --only)")
    return dev, default_efficiency(dev)


def run_bench(device: str, quick: bool, sections: tuple[str, ...], nproc: int | None = None,
              progress: Progress | None = None, done: Callable[[], None] | None = None,
              compile_: bool = True, memory_fraction: float = 0.5,
              force: bool = False) -> dict[str, Any]:
    from gpuplan.measure import compute, memory, safety
    from gpuplan.measure.machine import identity, last_level_cache_bytes, torch_module
    from gpuplan.measure.timing import clock_for, random_tensor, sync_vs_unsync

    torch = torch_module()
    t0 = time.perf_counter()
    ident = identity(device)
    ident["load_average_start"] = _load()
    clock = clock_for(device)
    llc = last_level_cache_bytes(device)
    budget = safety.memory_budget(device, memory_fraction)  # bytes any one section may hold
    r: dict[str, Any] = {
        "schema": "gpuplan-profile/1", "device": ident["name"], "identity": ident,
        "date": _dt.date.today().isoformat(),
        "time": _dt.datetime.now().isoformat(timespec="seconds"), "quick": quick,
        "sections": list(sections), "last_level_cache_bytes": llc,
        "matmul_flops_per_s": {}, "memory_bw_bytes_per_s": None,
    }

    def step() -> None:
        if done:
            done()

    if "matmul" in sections:
        res = compute.measure_matmul(device, clock, llc, quick, progress=progress,
                                     max_bytes=budget)
        r["matmul"] = {dt: x.to_json() for dt, x in res.items()}
        r["matmul_flops_per_s"] = compute.flops_by_dtype(res)
        step()
    if "memory" in sections:
        if progress:
            progress("memory: copy and triad")
        buf = safety.fit_buffer(memory.stream_buffer_bytes(llc, device, quick), 3, budget,
                                max(2 * llc, 16 * 2**20), "bench memory (copy and triad)")
        mem = memory.stream(device, clock, buf, 0.4 if quick else 1.5)
        sizes = [s for s in memory.sweep_sizes(quick, device) if s <= budget]
        mem["sweep"] = memory.working_set_sweep(device, clock, sizes,
                                                0.08 if quick else 0.3, progress)
        if device == "cuda":
            if progress:
                progress("memory: host <-> device")
            mem["host_device"] = memory.host_device(clock, 256 * 2**20, 0.3 if quick else 1.0)
        r["memory"] = mem
        r["memory_bw_bytes_per_s"] = mem["bw_bytes_per_s"]
        step()
    if "launch" in sections:
        if progress:
            progress("launch overhead")
        r["launch"] = memory.launch_overhead(device, clock, 0.3 if quick else 1.0)
        r["launch_overhead_s"] = r["launch"]["time_s"]
        n = 1024 if device == "cpu" else 4096
        a, b = (random_tensor((n, n), torch.float32, device) for _ in range(2))
        r["sync_demo"] = {"work": f"fp32 matmul {n}x{n}x{n}",
                          **sync_vs_unsync(lambda: torch.mm(a, b), clock, inner=3 if
                                           device == "cpu" else 20)}
        step()
    if "memory" in r and "launch_overhead_s" in r:  # small sizes measure dispatch, not caches
        for row in r["memory"]["sweep"]:
            row["overhead_bound"] = row["time_s"] < 3 * r["launch_overhead_s"]
    if "fusion" in sections or "attention" in sections:
        from gpuplan.measure import fusion

        spec, eff = _prediction_target(r)
        r["prediction_device"] = spec.name
        if "fusion" in sections:
            r["fusion"] = fusion.measure_fusion(device, clock, spec, eff, quick, compile_,
                                                progress)
            step()
        if "attention" in sections:
            r["attention"] = fusion.measure_attention(device, clock, spec, eff, quick, progress)
            rate = attention_rate(r["attention"])
            if rate is not None:
                r["attention_flops_per_s"] = rate
            step()
    if "collectives" in sections:
        from gpuplan.measure import collectives as coll

        if progress:
            progress("collectives")
        r.update(_collectives(coll, device, quick, nproc, force, budget))
        step()
    if "decode" in sections:
        from gpuplan.measure.decode_check import decode_check

        if progress:
            progress("decode: transformers model, measured vs predicted")
        r["decode"] = decode_check(device, quick, r)
        step()
    ident["load_average_end"] = _load()
    r["unstable"] = unstable_measurements(r)
    r["runtime_s"] = time.perf_counter() - t0
    return r


def attention_rate(a: dict[str, Any]) -> float | None:
    """Fused attention's measured FLOP/s: QKᵀ and PV, 2 x 2·b·h·s²·d over the SDPA time."""
    if "time_s" not in a["sdpa"]:
        return None
    sh = a["shape"]
    work = 4.0 * sh["batch"] * sh["heads"] * sh["seq"] ** 2 * sh["head_dim"]
    return float(work / a["sdpa"]["time_s"])


def _collectives(coll: Any, device: str, quick: bool, nproc: int | None, force: bool,
                 budget: int) -> dict[str, Any]:
    """The collectives section: under torchrun its ranks, else `nproc` local processes."""
    from gpuplan.measure import safety
    from gpuplan.measure.machine import torch_module

    torch = torch_module()
    if coll.under_torchrun():
        return {"collectives": coll.run_torchrun(device, quick=quick),
                "collectives_launch": f"torchrun, world size {os.environ['WORLD_SIZE']}"}
    n = nproc or (torch.cuda.device_count() if device == "cuda" else 2)
    gpus = torch.cuda.device_count() if device == "cuda" else 0
    safety.check_nproc(n, device, gpus, force)
    # each rank holds ~5 buffers of the message size (input, output, expected, base)
    per_rank = budget // (n if device == "cpu" else 1)
    sizes = [s for s in coll.message_sizes(quick, device) if 5 * s <= per_rank]
    safety.fit_buffer(5 * 4 * 2**10, n if device == "cpu" else 1, budget,
                      5 * 4 * 2**10, f"bench collectives ({n} ranks)")
    return {"collectives": coll.run_local(n, device, quick=quick, sizes=sizes,
                                          timeout_s=180.0 if quick else 900.0),
            "collectives_launch": f"{n} local processes ({'nccl' if device == 'cuda' else 'gloo'})"}


def unstable_measurements(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Ceilings whose repeated rounds disagreed (measure.stability), with the reason."""
    out = []
    for dt, x in (r.get("matmul") or {}).items():
        rep = x.get("repeats")
        if rep and not rep["stable"]:
            out.append({"what": f"matmul {dt}", "reason": rep["unstable_reason"],
                        "round_flops_per_s": rep["round_flops_per_s"]})
    rep = (r.get("memory") or {}).get("repeats")
    if rep and not rep["stable"]:
        out.append({"what": "memory bandwidth", "reason": rep["unstable_reason"],
                    "round_bytes_per_s": rep["round_bytes_per_s"]})
    why = (r.get("decode") or {}).get("unstable_reason")
    if why:
        out.append({"what": "decode check", "reason": why})
    return out
