"""Serving answers built on the latency model and the simulator: the KV capacity an engine gets
from the inference memory planner, the metrics of a simulated run (percentiles, queueing, KV
utilization, goodput under SLOs), the saturating throughput engines' benchmarks measure, and the
throughput-versus-p99 curve as the load grows."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpuplan.errors import InputError
from gpuplan.estimate.inference import infer_memory
from gpuplan.estimate.latency import StepModel
from gpuplan.estimate.memory import MemoryResult
from gpuplan.estimate.request_stream import Workload, poisson_workload
from gpuplan.estimate.serving_sim import Engine, SimResult, simulate
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.serving import ServeConfig
from gpuplan.specs.workload import InferConfig

KV_MEMORY_FRACTION = 0.90
"""Share of the memory left after weights and workspace that engines give the KV cache
(vLLM gpu_memory_utilization 0.9; TensorRT-LLM kv_cache_free_gpu_mem_fraction 0.9)."""


def kv_capacity(m: ModelSpec, device: Device, cfg: ServeConfig, block_size: int,
                max_tokens: int, cuda_context_bytes: int,
                fraction: float = KV_MEMORY_FRACTION) -> tuple[int, MemoryResult]:
    """(KV blocks per GPU, the planner's memory object for one block-sized sequence): the free
    memory after weights, prefill workspace and runtime overheads, times `fraction`."""
    icfg = InferConfig(batch=1, context=block_size, weight_dtype=cfg.weight_dtype,
                       kv_dtype=cfg.kv_dtype, tp=cfg.tp, prefill_chunk=max_tokens,
                       block_size=block_size, margin=0.0, cuda_context_bytes=cuda_context_bytes)
    mem = infer_memory(m, device, icfg)
    fixed = mem.total_bytes - mem.per_gpu["kv_cache"]
    free = (device.capacity_bytes - fixed) * fraction
    per_block = float(mem.details["kv_bytes_per_token"]) * block_size  # type: ignore[arg-type]
    blocks = int(free // per_block) if free > 0 and per_block > 0 else 0
    if blocks < 1:
        raise InputError("gpu", device.name, f"a device (or --tp) with room for the KV cache: "
                         f"{m.name} needs {fixed / 1e9:.1f} GB per GPU before any KV cache, "
                         f"{device.capacity_bytes / 1e9:.1f} GB available")
    return blocks, mem


def _pct(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else 0.0


def summarize(r: SimResult, slo_ttft_s: float | None = None,
              slo_tpot_s: float | None = None) -> dict[str, object]:
    """The contract keys of `gpuplan serve --rate` plus means, e2e percentiles and the run's
    assumptions. Goodput counts requests meeting every SLO given (Zhong et al. 2024,
    DistServe, §2)."""
    span = r.makespan_s
    ttft, tpot, queue = r.ttft_s, r.tpot_s, r.queue_s
    e2e = r.finish_s - r.arrival_s
    ok = np.ones(len(ttft), dtype=bool)
    if slo_ttft_s is not None:
        ok &= ttft <= slo_ttft_s
    if slo_tpot_s is not None:
        ok &= tpot <= slo_tpot_s
    out: dict[str, object] = {
        "completed_requests": int((r.completions == 1).sum()),
        "requests_per_s": len(ttft) / span if span > 0 else 0.0,
        "output_tokens_per_s": float(r.output.sum()) / span if span > 0 else 0.0,
        "input_tokens_per_s": float(r.prompt.sum()) / span if span > 0 else 0.0,
    }
    for name, arr in (("ttft", ttft), ("tpot", tpot), ("e2e_latency", e2e), ("queue", queue)):
        for q in (50, 90, 99):
            out[f"{name}_p{q}_s"] = _pct(arr, q)
        out[f"{name}_mean_s"] = float(arr.mean())
    out["kv_utilization"] = r.kv_block_seconds / (r.kv_blocks * span) if span > 0 else 0.0
    out["kv_peak_blocks"] = r.kv_peak_blocks
    out["kv_capacity_blocks"] = r.kv_blocks
    out["slo_attainment"] = float(ok.mean())
    out["goodput_requests_per_s"] = float(ok.sum()) / span if span > 0 else 0.0
    out["makespan_s"] = span
    out["iterations"] = r.steps
    e = r.engine
    out["engine"] = {"scheduler": e.scheduler, "chunked_prefill": e.chunked_prefill,
                     "max_batch": e.max_batch, "max_tokens_per_step": e.max_tokens,
                     "kv_block_size": e.block_size, "kv_blocks": e.kv_blocks}
    out["workload"] = r.source
    out["slo"] = {"ttft_s": slo_ttft_s, "tpot_s": slo_tpot_s}
    return out


def saturating_requests(engine: Engine, prompt: int, output: int) -> int:
    """Requests for a steady-state offline benchmark: enough for several full batches (the
    concurrency the KV cache or max_batch allows), between 500 and 30,000 (TensorRT-LLM's
    perf-overview used 1,000-30,000)."""
    need = -(-(prompt + output) // engine.block_size)
    conc = min(engine.max_batch, engine.kv_blocks // max(need, 1))
    return int(min(30000, max(500, 4 * conc)))


def max_throughput(sm: StepModel, engine: Engine, prompt: int, output: int,
                   requests: int | None = None, seed: int = 0) -> tuple[SimResult, int]:
    """All requests arrive at once (infinite rate, as trtllm-bench and vLLM's
    benchmark_throughput measure); returns the run and the concurrency reached."""
    n = requests or saturating_requests(engine, prompt, output)
    w = poisson_workload(n, None, prompt, output, seed)
    res = simulate(sm, w, engine)
    return res, res.peak_concurrency


def load_curve(sm: StepModel, engine: Engine, workload_at: object, peak_rps: float,
               fractions: tuple[float, ...] = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.25, 1.5),
               schedulers: tuple[str, ...] = ("continuous", "static")) -> list[dict[str, object]]:
    """Throughput and p99 latencies as the arrival rate grows to past saturation, per
    scheduler. `workload_at(rate)` returns the request stream at that rate."""
    rows: list[dict[str, object]] = []
    for sched in schedulers:
        eng = replace(engine, scheduler=sched)
        for f in fractions:
            rate = peak_rps * f
            w: Workload = workload_at(rate)  # type: ignore[operator]
            s = summarize(simulate(sm, w, eng))
            rows.append({"scheduler": sched, "rate_requests_per_s": rate,
                         **{k: s[k] for k in ("requests_per_s", "output_tokens_per_s",
                                              "ttft_p99_s", "tpot_p99_s", "e2e_latency_p99_s",
                                              "queue_p99_s")}})
    return rows
