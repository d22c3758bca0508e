"""Measured operators next to their FLOPs, bytes and roofline, and the planner's prediction for
the traced model next to the measured phases (pure)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.roofline import op_time, roofline
from gpuplan.estimate.step import OPTIMIZER_BYTES_PER_PARAM
from gpuplan.ops.op import Op, OpList
from gpuplan.specs.device import Device


def aten_name(op: Op) -> str:
    """'h.*.attn.c_attn.addmm.grad' -> 'addmm' (the tracer names ops path.aten[.grad])."""
    name = op.name[:-5] if op.name.endswith(".grad") else op.name
    return name.rsplit(".", 1)[-1]


def by_aten(ops: OpList, device: Device, eff: Efficiency, scale: float
            ) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (aten op name, phase): kind, FLOPs, bytes and roofline seconds, times `scale` (model
    calls per step)."""
    out: dict[tuple[str, str], dict[str, Any]] = defaultdict(
        lambda: {"flops": 0.0, "bytes": 0.0, "roofline_s": 0.0, "kind": ""})
    for op in ops:
        row = out[(aten_name(op), op.phase)]
        row["flops"] += op.total_flops * scale
        row["bytes"] += op.total_bytes * scale
        row["roofline_s"] += op_time(op, device, eff).time_s * scale
        row["kind"] = row["kind"] or op.kind
    return dict(out)


def op_rows(measured: list[dict[str, Any]], steps: int,
            counted: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per measured operator, slowest first: time per step and, where the counting
    pass saw the op, its FLOPs, bytes, achieved rates and share of the attainable roofline."""
    rows = []
    for m in measured:
        t = m["time_s"] / steps
        if t <= 0:
            continue
        phase = m.get("phase", "forward")
        c = counted.get((m["name"].split("::", 1)[-1], phase))
        kind = "communication" if m.get("communication") else (
            c["kind"] if c else "optimizer" if phase == "optimizer" else "other")
        row: dict[str, Any] = {
            "name": m["name"], "phase": phase, "kind": kind,
            "calls_per_step": m["calls"] / steps, "time_s": t,
            "flops": c["flops"] if c else None, "bytes": int(c["bytes"]) if c else None,
            "flops_per_s": c["flops"] / t if c else None,
            "bytes_per_s": c["bytes"] / t if c else None,
            "attainable_time_s": c["roofline_s"] if c else None,
            "roofline_share": min(c["roofline_s"] / t, 1.0) if c else None,
        }
        rows.append(row)
    return sorted(rows, key=lambda r: -r["time_s"])


def attainable(eff: Efficiency) -> Efficiency:
    """The bound: the ceilings themselves, no size curves, no launch overhead."""
    return replace(eff, size_dependent=False, kernel_overhead_s=0.0, end_to_end=1.0,
                   matmul_ceiling=1.0, memory_ceiling=1.0, vector_ceiling=1.0,
                   attention_ceiling=1.0, attention_length=False)


OPTIMIZER_KINDS = {"adamw": "adamw", "adam": "adam", "sgd": "sgd", "adafactor": "adafactor"}


def predicted(ops: OpList, params: int, optimizer: str | None, device: Device, eff: Efficiency,
              measured: dict[str, float], calls_per_step: float) -> dict[str, Any]:
    """The planner's roofline for the traced model's forward and backward ops and its
    memory-bound optimizer pass (estimate.training), next to the measured phases."""
    r = roofline(ops, device, eff)
    by_phase = r.time_by("phase")
    opt = OPTIMIZER_KINDS.get((optimizer or "").lower())
    bw = eff.measured.get("memory") or device.mem_bw_bytes_per_s * eff.memory(params * 4.0)
    comps = {
        "forward": by_phase.get("forward", 0.0) * calls_per_step,
        "backward": by_phase.get("backward", 0.0) * calls_per_step,
        "optimizer": params * OPTIMIZER_BYTES_PER_PARAM[opt] / bw if opt else None,
    }
    rows: dict[str, dict[str, Any]] = {}
    for k, p in comps.items():
        m = measured.get(k, 0.0)
        rows[k] = {"predicted_s": p, "measured_s": m,
                   "error": (p - m) / m if p is not None and m > 0 else None}
    both = [k for k in rows if comps[k] is not None]
    p_tot = sum(comps[k] or 0.0 for k in both)
    m_tot = sum(measured.get(k, 0.0) for k in both)
    rows["total"] = {"predicted_s": p_tot, "measured_s": m_tot,
                     "error": (p_tot - m_tot) / m_tot if m_tot > 0 else None,
                     "covers": both}
    return {"components": rows, "device": device.name,
            "optimizer": opt or f"{optimizer} (no planner model; not predicted)",
            "model_calls_per_step": calls_per_step,
            "efficiency": eff.source,
            "note": "forward and backward: roofline of the traced model's ops (gpuplan roofline);"
                    " optimizer: a memory-bound pass of "
                    f"{OPTIMIZER_BYTES_PER_PARAM.get(opt or '', 0):g} bytes per parameter "
                    "(gpuplan train's figure) over this machine's bandwidth; the measured forward "
                    "also holds loss modules called "
                    "outside the model"}
