"""Kernel fusion and fused attention, measured next to what gpuplan's roofline predicts.

Element-wise chains (bias + GELU + dropout; residual + LayerNorm) run eager and under
torch.compile; attention runs naive (QKᵀ, softmax, ·V with the scores in memory) and as
F.scaled_dot_product_attention. Each gets its median time and the peak bytes allocated during
one call: torch.cuda.max_memory_allocated on a GPU; on the CPU the allocator's events from
torch.profiler (profile_memory), an allocation counted from the start of its op and a free
from its end, so the figure is an upper bound. The prediction traces the same module on the
meta device (gpuplan.trace), fuses element-wise chains for the compiled case
(gpuplan.ops.passes) and places the ops on the measured roofline (estimate.roofline).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from gpuplan.estimate.efficiency import Efficiency
from gpuplan.estimate.roofline import roofline
from gpuplan.measure.timing import Clock, measure, random_tensor
from gpuplan.ops.op import OpList
from gpuplan.ops.passes import fuse_elementwise
from gpuplan.specs.device import Device

Progress = Callable[[str], None]


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The profiler's native code prints start/stop lines to fd 2; hide them."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (captured)
        yield
        return
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def peak_bytes(fn: Callable[[], Any], device: str) -> int:
    """Peak bytes allocated during one call of fn (its output included)."""
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        del out
        return int(peak)
    from torch.profiler import ProfilerActivity, profile

    with _quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = fn()
    del out
    steps = []
    for e in prof.events():
        m = int(e.self_cpu_memory_usage)
        if m > 0:
            steps.append((e.time_range.start, 0, m))
        elif m < 0:
            steps.append((e.time_range.end, 1, m))
    cur = peak = 0
    for _, _, m in sorted(steps):
        cur += m
        peak = max(peak, cur)
    return peak


def as_module(fn: Callable[..., Any]) -> Any:
    """A plain function as a torch.nn.Module, so the tracer can run it."""
    import torch

    class Fn(torch.nn.Module):
        def forward(self, *args: Any) -> Any:
            return fn(*args)

    return Fn()


def predict(fn: Callable[..., Any], args: tuple[Any, ...], device: str, spec: Device,
            eff: Efficiency, fused: bool = False) -> dict[str, Any]:
    """Roofline time and bytes of fn(*args) as gpuplan models it."""
    from gpuplan.ops.tracer import trace

    ops: OpList = trace(as_module(fn), *args, train=False,
                        target="cuda" if device == "cuda" else "cpu").ops
    if fused:
        ops, _ = fuse_elementwise(ops)
    r = roofline(ops, spec, eff)
    return {"predicted_time_s": r.total_time_s, "predicted_bytes": ops.bytes(),
            "predicted_kernels": sum(o.kernels * o.count for o in ops)}


def _timed(fn: Callable[[], Any], clock: Clock, device: str, budget_s: float) -> dict[str, Any]:
    st = measure(fn, clock, budget_s=budget_s, min_samples=5, max_samples=40)
    return {"time_s": st.median_s, "stats": st.to_json(), "peak_bytes": peak_bytes(fn, device)}


def _chains(device: str, quick: bool) -> list[tuple[str, Callable[..., Any], tuple[Any, ...]]]:
    import torch
    import torch.nn.functional as F

    dt = torch.float32 if device == "cpu" else torch.bfloat16
    rows, d = (2048, 1024) if device == "cpu" and quick else (8192, 2048) if device == "cpu" \
        else (16384, 4096)
    x, r = random_tensor((rows, d), dt, device), random_tensor((rows, d), dt, device)
    bias, w, b = (random_tensor((d,), dt, device) for _ in range(3))

    def bias_gelu_dropout(x: Any, bias: Any) -> Any:
        return F.dropout(F.gelu(x + bias), p=0.1, training=True)

    def residual_layernorm(x: Any, r: Any, w: Any, b: Any) -> Any:
        return F.layer_norm(x + r, (x.shape[-1],), w, b)

    return [("bias + GELU + dropout", bias_gelu_dropout, (x, bias)),
            ("residual + LayerNorm", residual_layernorm, (x, r, w, b))]


def measure_fusion(device: str, clock: Clock, spec: Device, eff: Efficiency, quick: bool,
                   compile_: bool = True, progress: Progress | None = None) -> list[dict[str, Any]]:
    """Eager vs torch.compile for each chain; compile failures are reported, not raised."""
    import torch

    budget = 0.3 if quick else 1.0
    out = []
    for name, fn, args in _chains(device, quick):
        if progress:
            progress(f"fusion: {name}")
        row: dict[str, Any] = {"name": name, "shape": list(args[0].shape),
                               "dtype": str(args[0].dtype).removeprefix("torch.")}
        row["eager"] = {**_timed(lambda fn=fn, a=args: fn(*a), clock, device, budget),
                        **predict(fn, args, device, spec, eff)}
        if not compile_:
            row["compiled"] = {"skipped": "torch.compile not requested"}
        else:
            try:
                t0 = time.perf_counter()
                cfn = torch.compile(fn, dynamic=False)
                cfn(*args)
                compile_s = time.perf_counter() - t0
                row["compiled"] = {**_timed(lambda c=cfn, a=args: c(*a), clock, device, budget),
                                   "compile_s": compile_s,
                                   **predict(fn, args, device, spec, eff, fused=True)}
            except Exception as e:  # no compiler, unsupported backend...
                row["compiled"] = {"skipped": f"torch.compile failed here: {type(e).__name__}: "
                                              f"{' '.join(str(e).split())[:200]}"}
        _speedups(row, "eager", "compiled")
        out.append(row)
    return out


def _speedups(row: dict[str, Any], a: str, b: str) -> None:
    x, y = row[a], row[b]
    if "time_s" in x and "time_s" in y:
        row["speedup_measured"] = x["time_s"] / y["time_s"]
        row["speedup_predicted"] = x["predicted_time_s"] / y["predicted_time_s"]


def attention_shape(device: str, quick: bool) -> tuple[int, int, int, int]:
    """(batch, heads, seq, head_dim)."""
    if device == "cpu":
        return (2, 8, 512, 64) if quick else (4, 8, 1024, 64)
    return (8, 16, 2048, 128) if quick else (8, 16, 4096, 128)


def measure_attention(device: str, clock: Clock, spec: Device, eff: Efficiency, quick: bool,
                      progress: Progress | None = None) -> dict[str, Any]:
    """Naive attention vs F.scaled_dot_product_attention on the same q, k, v (and the same
    result: checked)."""
    import torch
    import torch.nn.functional as F

    b, h, s, d = attention_shape(device, quick)
    dt = torch.float32 if device == "cpu" else torch.bfloat16
    q, k, v = (random_tensor((b, h, s, d), dt, device) for _ in range(3))

    def naive(q: Any, k: Any, v: Any) -> Any:
        scores = q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5
        return torch.softmax(scores, dim=-1) @ v

    def sdpa(q: Any, k: Any, v: Any) -> Any:
        return F.scaled_dot_product_attention(q, k, v)

    tol = 1e-3 if dt == torch.float32 else 3e-2
    agree = bool(torch.allclose(naive(q, k, v).float(), sdpa(q, k, v).float(), atol=tol, rtol=tol))
    budget = 0.3 if quick else 1.0
    row: dict[str, Any] = {"shape": {"batch": b, "heads": h, "seq": s, "head_dim": d},
                           "dtype": str(dt).removeprefix("torch."), "results_agree": agree}
    for name, fn in (("naive", naive), ("sdpa", sdpa)):
        if progress:
            progress(f"attention: {name}")
        row[name] = {**_timed(lambda fn=fn: fn(q, k, v), clock, device, budget),
                     **predict(fn, (q, k, v), device, spec, eff)}
    _speedups(row, "naive", "sdpa")
    row["scores_bytes"] = b * h * s * s * q.element_size()
    return row
