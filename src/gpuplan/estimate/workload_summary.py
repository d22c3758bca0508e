"""The profile result (DESIGN.md's `gpuplan profile` contract) from a session's record, the
counting pass and the roofline device (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.workload import WorkloadRecord, breakdown, copies, device_idle, host_reads
from gpuplan.estimate.workload_advice import AdviceInput, advise
from gpuplan.estimate.workload_ops import attainable, by_aten, op_rows, predicted
from gpuplan.ops.op import OpList
from gpuplan.specs.device import Device


@dataclass
class Counted:
    """The counting pass: the traced model's ops (one forward + backward) and parameters."""

    ops: OpList | None
    params: int
    model: str
    """the model's class name, or why it was not traced"""


def ceilings(device: Device, eff: Efficiency) -> dict[str, float]:
    """The roofline the ops are placed on: matmul peak of the best dtype and bandwidth."""
    peaks = {dt: eff.measured.get(dt) or device.peak(dt) for dt in ("fp32", "bf16")}
    return {"peak_flops_per_s": max(v for v in peaks.values() if v) if any(peaks.values())
            else 0.0, "fp32_flops_per_s": peaks["fp32"] or 0.0,
            "bw_bytes_per_s": eff.measured.get("memory") or device.mem_bw_bytes_per_s}


def summarize(rec: WorkloadRecord, counted: Counted, device: Device, eff: Efficiency,
              roofline_source: str) -> dict[str, Any]:
    step, parts, per_step = breakdown(rec)
    n = rec.steps
    calls = rec.model_calls / n if n else 1.0
    count = by_aten(counted.ops, device, attainable(eff), calls) if counted.ops else {}
    rows = op_rows(rec.ops, n, count)
    reads, cps, idle = host_reads(rec), copies(rec), device_idle(rec)
    pred = None
    if counted.ops is not None:
        pred = predicted(counted.ops, counted.params, rec.optimizers[0] if rec.optimizers
                         else None, device, eff, parts, calls)
    adv = advise(AdviceInput(rec.device, device, eff, step, parts, rec.loaders, reads, cps, rows,
                             idle, counted.ops, calls, rec.peak_memory_bytes,
                             rec.capacity_bytes))
    return {
        "steps": n, "step_time_s": step, "breakdown_s": parts,
        "input_wait_fraction": parts["input_wait"] / step if step else 0.0,
        "host_reads_per_step": reads["per_step"], "host_reads": reads,
        "host_to_device": cps, "device_idle": idle, "ops": rows, "predicted": pred,
        "advice": adv, "step_times_s": per_step, "device": rec.device,
        "model": counted.model, "optimizers": rec.optimizers, "data_loaders": rec.loaders,
        "peak_memory_bytes": rec.peak_memory_bytes, "capacity_bytes": rec.capacity_bytes,
        "roofline": ceilings(device, eff),
        "assumptions": {
            "roofline": roofline_source, "roofline_device": device.name,
            "efficiency": eff.source,
            "breakdown": "host-side wall time; each instant to one phase (communication > "
                         "host_to_device > input_wait > optimizer > backward > forward > other)",
            "op_time": "torch.profiler self time per op over the measured steps (device time "
                       "on CUDA); FLOPs and bytes from gpuplan's tracer in a separate pass",
            "steps": "warm-up steps skipped; the profiler's own overhead is inside the times",
        },
    }
