"""Advice for a profiled training step, ranked by expected time saved per step (pure).

Each rule states its evidence (measured) and its expected saving; savings are upper bounds of
what the named change can remove, derived as follows:
- input_pipeline: loader workers that prefetch hide loading behind compute (PyTorch data
  loading docs), so up to all of the input wait goes; workers needed = time to load one batch
  / compute time per step.
- host_sync: a host read waits for the device and leaves it idle until the host launches
  again; saved: the device idle time that starts during reads (CUDA), the reads' own time
  (CPU).
- pageable_copy: pinned memory + non_blocking=True lets the copy overlap compute (CUDA
  programming guide, "Asynchronous concurrent execution"); saved: the blocking copies' time.
- fusion: element-wise and norm ops are memory-bound; fused they read and write each tensor
  once (ops.passes.fuse_elementwise); saved: measured element-wise time x the roofline's
  predicted fraction saved.
- attention: a naive softmax(QK^T)V writes the S x S scores; fused SDPA kernels never do
  (Dao et al. 2022); saved: the measured softmax time on the score matrix.
- precision: bf16 autocast runs matmuls at the bf16 tensor rate; saved: fp32 matmul time x
  (1 - fp32 rate / bf16 rate).
- batch_size: device idle not explained by input wait or reads means launch-bound small
  kernels; a larger micro-batch amortises them; saved: that idle time per step's samples.
- memory: peak allocated > 90% of capacity; no time saved, the memory planner's fix chain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.roofline import roofline
from gpuplan.ops.op import MATMUL_KINDS, OpList
from gpuplan.ops.passes import fuse_elementwise
from gpuplan.specs.device import Device
from gpuplan.units import format_bytes, format_seconds

FUSABLE = ("elementwise", "norm", "softmax")
MIN_SHARE = 0.01
"""Advice saving less than 1% of the step is noise on a shared machine and is not given
(host reads are always reported: they are counted exactly)."""
MEMORY_NEAR = 0.9


@dataclass
class AdviceInput:
    device_kind: str
    device: Device
    eff: Efficiency
    step_time_s: float
    breakdown: dict[str, float]
    loaders: list[dict[str, Any]]
    reads: dict[str, Any]
    copies: dict[str, Any]
    rows: list[dict[str, Any]]
    idle: dict[str, Any] | None = None
    ops: OpList | None = None
    calls_per_step: float = 1.0
    peak_memory_bytes: int | None = None
    capacity_bytes: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _pct(x: float, step: float) -> str:
    return f"{x / step:.0%}" if step > 0 else "-"


def _advice(kind: str, text: str, saving: float, evidence: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "text": text, "expected_saving_s": max(saving, 0.0),
            "evidence": evidence}


def input_pipeline(a: AdviceInput) -> dict[str, Any] | None:
    wait, step = a.breakdown["input_wait"], a.step_time_s
    if step <= 0 or wait < MIN_SHARE * step:
        return None
    workers = max((lo["num_workers"] for lo in a.loaders), default=0)
    compute = max(step - wait, 1e-9)
    load = wait * max(workers, 1) + (compute if workers else 0.0)  # one batch, one worker
    need = max(math.ceil(load / compute), workers + 1)
    pin = "" if a.device_kind == "cpu" else ", pin_memory=True"
    text = (f"The step waits {format_seconds(wait)} ({_pct(wait, step)}) for the data loader "
            f"(num_workers={workers}); loading one batch takes about {format_seconds(load)} against "
            f"{format_seconds(compute)} of compute: use DataLoader(num_workers={need}{pin}, "
            f"persistent_workers=True, prefetch_factor=2) so loading overlaps compute.")
    return _advice("input_pipeline", text, wait, {"input_wait_s": wait, "num_workers": workers,
                                                   "suggested_workers": need,
                                                   "batch_load_s": load})


def host_sync(a: AdviceInput) -> dict[str, Any] | None:
    n = a.reads["per_step"]
    if n <= 0:
        return None
    sites = ", ".join(f"{s['call']}() at {s['file'].rsplit('/', 1)[-1]}:{s['line']} "
                      f"({s['per_step']:g}/step)" for s in a.reads["sites"][:3])
    if a.idle is not None:
        saving = a.idle["after_host_read_s"]
        cost = f"the device then idles {format_seconds(saving)} per step"
    else:
        saving = a.reads["time_s"]
        cost = (f"on this CPU a read costs its call ({format_seconds(saving)} per step); on a GPU "
                f"each one drains the launch queue and idles the device")
    text = (f"{n:g} host read(s) per step: {sites}; {cost}. Keep values on the device "
            f"(running_loss += loss.detach()) and read them every k steps (e.g. 50).")
    return _advice("host_sync", text, saving, {"reads_per_step": n, "sites": a.reads["sites"]})


def pageable_copy(a: AdviceInput) -> dict[str, Any] | None:
    pg = a.copies["pageable"]
    if pg["bytes"] <= 0:
        return None
    bw = pg["bw_bytes_per_s"]
    text = (f"{format_bytes(pg['bytes'])} per step copied to the device from pageable memory "
            f"({pg['copies_per_step']:g} copies, {format_seconds(pg['time_s'])}"
            f"{f', {bw / 1e9:.3g} GB/s' if bw else ''}): DataLoader(pin_memory=True) and "
            f".to(device, non_blocking=True) let the copies overlap compute.")
    return _advice("pageable_copy", text, pg["time_s"], {"pageable": pg,
                                                          "pinned": a.copies["pinned"]})


def _measured(a: AdviceInput, kinds: tuple[str, ...] | frozenset[str]) -> float:
    return float(sum(r["time_s"] for r in a.rows if r["kind"] in kinds))


def fusion(a: AdviceInput) -> dict[str, Any] | None:
    if a.ops is None:
        return None
    measured = _measured(a, FUSABLE)
    fusable = a.ops.filter(lambda o: o.kind in FUSABLE)
    unfused = roofline(fusable, a.device, a.eff).total_time_s * a.calls_per_step
    fused_ops, chains = fuse_elementwise(a.ops)
    delta = (roofline(a.ops, a.device, a.eff).total_time_s
             - roofline(fused_ops, a.device, a.eff).total_time_s) * a.calls_per_step
    if unfused <= 0 or not chains:
        return None
    saving = min(measured, measured * delta / unfused)
    if saving < MIN_SHARE * a.step_time_s:
        return None
    kernels = sum(r["calls_per_step"] for r in a.rows if r["kind"] in FUSABLE)
    text = (f"{kernels:g} element-wise/norm kernels per step take {format_seconds(measured)} "
            f"({_pct(measured, a.step_time_s)} of the step): torch.compile(model) fuses them "
            f"into {len(chains)} chains; the roofline predicts {format_seconds(unfused - delta)} "
            f"fused vs {format_seconds(unfused)} unfused for them.")
    return _advice("fusion", text, saving, {"elementwise_s": measured, "kernels_per_step":
                                            kernels, "predicted_unfused_s": unfused,
                                            "predicted_fused_s": unfused - delta})


def attention(a: AdviceInput) -> dict[str, Any] | None:
    if a.ops is None or any(o.kind == "attention" for o in a.ops):
        return None
    square = [o for o in a.ops if o.kind == "softmax" and _square_scores(o.shape)]
    if not square:
        return None
    saving = _measured(a, ("softmax",))
    if saving < MIN_SHARE * a.step_time_s:
        return None
    text = (f"Attention is computed naively (softmax over an S x S score matrix, "
            f"{square[0].shape.split(',')[0]}): torch.nn.functional.scaled_dot_product_attention "
            f"never writes the scores; the softmax passes alone take {format_seconds(saving)}.")
    return _advice("attention", text, saving, {"softmax_s": saving})


def _square_scores(shape: str) -> bool:
    dims = shape.split(",")[0].strip().split("x")
    return len(dims) >= 3 and dims[-1] == dims[-2] and dims[-1] not in ("", "1")


def precision(a: AdviceInput) -> dict[str, Any] | None:
    if a.device_kind != "cuda" or a.ops is None:
        return None
    if not any(o.kind in MATMUL_KINDS and o.dtype == "fp32" for o in a.ops):
        return None
    r32 = a.eff.measured.get("fp32") or a.device.peak("fp32")
    r16 = a.eff.measured.get("bf16") or a.device.matmul_peak("bf16")
    if not r32 or not r16 or r16 < 1.5 * r32:
        return None
    mm = _measured(a, MATMUL_KINDS)
    saving = mm * (1 - r32 / r16)
    if saving < MIN_SHARE * a.step_time_s:
        return None
    text = (f"Matmuls run in fp32 ({format_seconds(mm)} per step) on a device whose bf16 tensor "
            f"rate is {r16 / r32:.1f}x its fp32 rate: torch.autocast('cuda', dtype=torch.bfloat16)"
            f" around forward and loss.")
    return _advice("precision", text, saving, {"matmul_s": mm, "fp32_flops_per_s": r32,
                                               "bf16_flops_per_s": r16})


def batch_size(a: AdviceInput) -> dict[str, Any] | None:
    if a.idle is None or a.step_time_s <= 0:
        return None
    unexplained = (a.idle["idle_s"] - a.breakdown["input_wait"] - a.idle["after_host_read_s"]
                   - a.breakdown["host_to_device"])
    if a.idle["busy_fraction"] >= 0.5 or unexplained < 0.2 * a.step_time_s:
        return None
    text = (f"The device is busy only {a.idle['busy_fraction']:.0%} of the step and idles "
            f"{format_seconds(unexplained)} between small kernels: a larger micro-batch (or "
            f"gradient accumulation over larger micro-batches) amortises the launches.")
    return _advice("batch_size", text, unexplained, {"idle": a.idle})


def memory(a: AdviceInput) -> dict[str, Any] | None:
    if not a.peak_memory_bytes or not a.capacity_bytes:
        return None
    share = a.peak_memory_bytes / a.capacity_bytes
    if share < MEMORY_NEAR:
        return None
    text = (f"Peak allocated memory {format_bytes(a.peak_memory_bytes)} is {share:.0%} of "
            f"{format_bytes(a.capacity_bytes)}: see `gpuplan memory MODEL --gpu ... --mode train` "
            f"for the cheapest fix chain (recompute, ZeRO, micro-batch).")
    return _advice("memory", text, 0.0, {"peak_bytes": a.peak_memory_bytes,
                                         "capacity_bytes": a.capacity_bytes})


RULES = (input_pipeline, host_sync, pageable_copy, fusion, attention, precision, batch_size,
         memory)


def advise(a: AdviceInput) -> list[dict[str, Any]]:
    """Every rule that applies, ranked by expected saving per step (largest first)."""
    out = [x for rule in RULES if (x := rule(a)) is not None]
    return sorted(out, key=lambda x: -x["expected_saving_s"])
