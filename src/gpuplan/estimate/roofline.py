"""Roofline time of an op list on a device (Williams, Waterman & Patterson 2009, CACM 52(4)).

For each op: time = max(FLOPs / (peak[dtype] x compute efficiency),
                        bytes / (bandwidth x memory efficiency)) + kernels x launch overhead;
bound = whichever term is larger; the ridge point is peak / bandwidth. Matmul-class ops use the
tensor peak of their dtype; element-wise, norm, softmax and loss ops the vector (fp32) peak.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpuplan.estimate.efficiency import Efficiency, default_efficiency
from gpuplan.estimate.efficiency_attention import length_factor
from gpuplan.estimate.efficiency_gemm import output_elements
from gpuplan.ops.op import MATMUL_KINDS, Op, OpList
from gpuplan.specs.device import Device
from gpuplan.units import DTYPE_BYTES


@dataclass(frozen=True)
class OpTime:
    """One op placed on the roofline; times are totals over `op.count` executions."""

    op: Op
    compute_s: float
    memory_s: float
    overhead_s: float
    peak_flops_per_s: float

    @property
    def time_s(self) -> float:
        return max(self.compute_s, self.memory_s) + self.overhead_s

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"

    @property
    def attained_flops_per_s(self) -> float:
        return self.op.executed_flops * self.op.count / self.time_s if self.time_s else 0.0


@dataclass(frozen=True)
class Roofline:
    device: Device
    efficiency: Efficiency
    rows: tuple[OpTime, ...]

    @property
    def total_time_s(self) -> float:
        return sum(r.time_s for r in self.rows)

    def time_by(self, key: str) -> dict[str, float]:
        """Seconds per phase / component / kind / bound."""
        out: dict[str, float] = defaultdict(float)
        for r in self.rows:
            k = r.bound if key == "bound" else str(getattr(r.op, key))
            out[k] += r.time_s
        return dict(out)

    @property
    def memory_bound_share(self) -> float:
        total = self.total_time_s
        return self.time_by("bound").get("memory", 0.0) / total if total else 0.0

    def sorted(self) -> list[OpTime]:
        return sorted(self.rows, key=lambda r: r.time_s, reverse=True)


def vector_peak(device: Device) -> float:
    """Peak for element-wise work: the fp32 vector rate (TPUs: their bf16 rate)."""
    return device.peak("fp32") or device.matmul_peak("bf16")


def epilogue_time(op: Op, bw: float, eff: Efficiency) -> float:
    """Seconds one GEMM spends writing its M x N output after its math (at least 16-bit:
    fp8 GEMMs write bf16; estimate/efficiency_gemm.py)."""
    n = output_elements(op.shape)
    if not n:
        return 0.0
    nbytes = n * max(2, DTYPE_BYTES.get(op.dtype, 2))
    return nbytes / (bw * eff.memory(nbytes))


def op_time(op: Op, device: Device, eff: Efficiency) -> OpTime:
    if op.kind in MATMUL_KINDS:
        measured = op.dtype in eff.measured
        peak = eff.measured_rate(op.dtype, op.executed_flops) if measured \
            else device.matmul_peak(op.dtype)
        share = 1.0 if measured else eff.matmul_share(op)
        if op.kind == "attention" and "attention" in eff.measured:  # measured fused kernel
            peak, share = eff.measured["attention"], 1.0
        elif op.kind == "attention":
            ceiling = eff.attention_ceiling
            if eff.attention_length and "kernel_keys" in op.meta:
                ceiling *= length_factor(op.meta["kernel_keys"], op.meta.get("causal", 0) > 0,
                                         op.phase == "backward")
            share = min(share, ceiling)
        share *= eff.end_to_end
    else:
        peak = vector_peak(device)
        share = eff.vector_ceiling
    bw = eff.measured.get("memory") or device.mem_bw_bytes_per_s
    mem_share = 1.0 if "memory" in eff.measured else eff.memory(op.bytes)
    compute = op.executed_flops / (peak * share) if op.executed_flops else 0.0
    memory = op.bytes / (bw * mem_share) if op.bytes else 0.0
    if eff.gemm_epilogue and op.kind == "matmul" and op.dtype not in eff.measured:
        compute += epilogue_time(op, bw, eff)
    return OpTime(op, compute * op.count, memory * op.count,
                  op.kernels * op.count * eff.kernel_overhead_s, peak)


def roofline(ops: OpList, device: Device, efficiency: Efficiency | None = None,
             cache: dict[tuple[object, ...], OpTime] | None = None) -> Roofline:
    """Place every op of `ops` on `device`'s roofline. `cache` (for searches that time many
    similar op lists) reuses the time of an op with the same kind, dtype, work and bytes."""
    eff = efficiency or default_efficiency(device)
    if cache is None:
        return Roofline(device, eff, tuple(op_time(o, device, eff) for o in ops))
    rows = []
    for o in ops:
        key = (o.kind, o.dtype, o.executed_flops, o.bytes_read, o.bytes_written, o.count,
               o.kernels, o.shape, o.meta.get("kernel_keys"), o.phase)
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = op_time(o, device, eff)
        rows.append(hit if hit.op is o else OpTime(o, hit.compute_s, hit.memory_s,
                                                   hit.overhead_s, hit.peak_flops_per_s))
    return Roofline(device, eff, tuple(rows))
