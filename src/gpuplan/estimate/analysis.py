"""Roofline analysis of a model workload: build the op list for a phase, place it on a device,
optionally fuse element-wise chains, and compare naive and flash attention over sequence lengths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from gpuplan.estimate.efficiency import Efficiency, default_efficiency
from gpuplan.estimate.roofline import Roofline, roofline
from gpuplan.ops.decode import build_decode
from gpuplan.ops.op import OpList
from gpuplan.ops.passes import FusedChain, fuse_elementwise
from gpuplan.ops.transformer import Impl, build_forward, build_training
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec

PhaseArg = Literal["train", "prefill", "decode", "forward"]


def build_ops(m: ModelSpec, phase: PhaseArg, batch: int, seq_len: int, impl: Impl) -> OpList:
    """Op list of one step; for decode `seq_len` is the context already in the KV cache."""
    if phase == "train":
        return build_training(m, batch, seq_len, impl)
    if phase == "decode":
        return build_decode(m, batch, seq_len, impl)
    return build_forward(m, batch, seq_len, impl, phase="prefill" if phase == "prefill"
                         else "forward", all_logits=phase == "forward")


@dataclass
class Analysis:
    model: ModelSpec
    device: Device
    phase: str
    batch: int
    seq_len: int
    impl: Impl
    result: Roofline
    unfused: Roofline | None = None
    chains: list[FusedChain] = field(default_factory=list)

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        r = self.result
        dtype = self.impl.matmul_dtype or self.impl.dtype
        rows = r.sorted()[:top] if top else r.sorted()
        total = r.total_time_s
        out: dict[str, Any] = {
            "model": self.model.name, "device": self.device.name, "phase": self.phase,
            "batch": self.batch, "seq_len": self.seq_len, "dtype": dtype,
            "attention": self.impl.attention, "fused": self.unfused is not None,
            "ridge_flops_per_byte": self.device.ridge_flops_per_byte(dtype),
            "total_time_s": total,
            "memory_bound_share": r.memory_bound_share,
            "time_by_phase": r.time_by("phase"), "time_by_component": r.time_by("component"),
            "time_by_kind": r.time_by("kind"),
            "flops": sum(x.op.total_flops for x in r.rows),
            "bytes": sum(x.op.total_bytes for x in r.rows),
            "assumptions": {"efficiency": r.efficiency.describe(),
                            "implementation": self.impl.__dict__},
            "ops": [{
                "name": x.op.name, "kind": x.op.kind, "phase": x.op.phase,
                "component": x.op.component, "dtype": x.op.dtype, "count": x.op.count,
                "flops": x.op.total_flops, "useful_flops": x.op.total_useful_flops,
                "executed_flops": x.op.executed_flops * x.op.count,
                "bytes": x.op.total_bytes, "intensity": x.op.intensity, "bound": x.bound,
                "time_s": x.time_s, "share": x.time_s / total if total else 0.0,
                "kernels": x.op.kernels * x.op.count, "shape": x.op.shape,
            } for x in rows],
        }
        if self.unfused is not None:
            out["fusion"] = {
                "unfused_time_s": self.unfused.total_time_s, "fused_time_s": total,
                "speedup": self.unfused.total_time_s / total if total else None,
                "bytes_saved": sum(c.bytes_saved for c in self.chains),
                "chains": [chain_json(c, self.device, r.efficiency) for c in
                           sorted(self.chains, key=lambda c: -c.bytes_saved)],
            }
        return out


def chain_json(c: FusedChain, device: Device, eff: Efficiency) -> dict[str, Any]:
    from gpuplan.estimate.roofline import op_time
    from gpuplan.ops.op import Op

    before_op = Op(name="before", kind=c.fused.kind, flops=c.fused.flops,
                   bytes_read=c.bytes_before, bytes_written=0.0, dtype=c.fused.dtype,
                   phase=c.fused.phase, count=c.count, kernels=c.kernels_before)
    before = op_time(before_op, device, eff).time_s
    after = op_time(c.fused, device, eff).time_s
    return {"ops": list(c.names), "phase": c.phase, "count": c.count,
            "bytes_before": c.bytes_before * c.count, "bytes_after": c.bytes_after * c.count,
            "bytes_saved": c.bytes_saved, "time_before_s": before, "time_after_s": after,
            "speedup": before / after if after else None}


def analyze(m: ModelSpec, device: Device, phase: PhaseArg, batch: int, seq_len: int,
            impl: Impl | None = None, fused: bool = False,
            efficiency: Efficiency | None = None) -> Analysis:
    """Roofline of one step. `fused`: compare eager (unfused) against compiled (fused)."""
    impl = impl or Impl()
    eff = efficiency or default_efficiency(device)
    if not fused:
        ops = build_ops(m, phase, batch, seq_len, impl)
        return Analysis(m, device, phase, batch, seq_len, impl, roofline(ops, device, eff))
    eager = build_ops(m, phase, batch, seq_len, Impl(**{**impl.__dict__, "fused": False}))
    fused_ops, chains = fuse_elementwise(eager)
    return Analysis(m, device, phase, batch, seq_len, impl, roofline(fused_ops, device, eff),
                    unfused=roofline(eager, device, eff), chains=chains)


def attention_sweep(m: ModelSpec, device: Device, batch: int, seq_lens: list[int],
                    impl: Impl | None = None, train: bool = True) -> list[dict[str, Any]]:
    """Naive vs flash attention core per sequence length: bytes moved, bytes kept for
    backward, and roofline time (all layers)."""
    impl = impl or Impl()
    eff = default_efficiency(device)
    rows = []
    for s in seq_lens:
        row: dict[str, Any] = {"seq_len": s}
        for kind in ("naive", "flash"):
            im = Impl(**{**impl.__dict__, "attention": kind})
            ops = (build_training(m, batch, s, im) if train
                   else build_forward(m, batch, s, im, phase="prefill"))
            core = ops.filter(lambda o: o.component == "attention"
                              and (o.kind in ("attention", "softmax") or "mask" in o.name
                                   or "attn.dropout" in o.name))
            rr = roofline(core, device, eff)
            row[kind] = {"bytes": core.bytes(), "saved_bytes": core.saved_bytes(),
                         "time_s": rr.total_time_s}
        rows.append(row)
    return rows
