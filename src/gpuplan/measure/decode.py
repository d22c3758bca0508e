"""Measured decode on the machine at hand: a ~100M-parameter Llama-style decoder built from a
`transformers` config (random weights, nothing downloaded), a prompt prefilled, then tokens
decoded one at a time against its KV cache (greedy), each step timed with a device sync.

Also measured: the ops one eager decode step really dispatches (counted with a
TorchDispatchMode on the same Hugging Face code) and the host cost of each (a decode step of
the same architecture shrunk to widths where the arithmetic is negligible, divided by its op
count): the per-op price of eager Hugging Face / PyTorch on this machine, which the serving
model's eager execution mode charges (estimate/latency.py)."""

from __future__ import annotations

import statistics
import time
from typing import Any

DECODER_CONFIG: dict[str, Any] = {
    "model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 16384,
    "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12,
    "num_attention_heads": 12, "num_key_value_heads": 4, "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "rope_theta": 10000.0,
    "hidden_act": "silu",
}
"""About 104M parameters: Llama architecture (GQA 12/4 heads, SwiGLU), Llama-2 vocabulary
halved. Random weights: speed does not depend on their values."""
OVERHEAD_CONFIG: dict[str, Any] = {**DECODER_CONFIG, "vocab_size": 256, "hidden_size": 48,
                                   "intermediate_size": 64}
"""The same architecture (layers, heads, GQA, SwiGLU, RoPE, cache) at widths where a step's
arithmetic takes microseconds: its step time is the framework's per-op cost."""


def _model(config: dict[str, Any], device: str, dtype: str, seed: int) -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    cfg = LlamaConfig(**{k: v for k, v in config.items()
                         if k not in ("model_type", "architectures")})
    return LlamaForCausalLM(cfg).to(device=device, dtype=tdt).eval()  # type: ignore[call-arg]


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _prefill(model: Any, ids: Any) -> tuple[Any, Any]:
    out = model(input_ids=ids, use_cache=True)
    return out.logits[:, -1].argmax(-1, keepdim=True), out.past_key_values


def _step(model: Any, nxt: Any, past: Any) -> tuple[Any, Any]:
    out = model(input_ids=nxt, past_key_values=past, use_cache=True)
    return out.logits[:, -1].argmax(-1, keepdim=True), out.past_key_values


def count_step_ops(device: str = "cpu", dtype: str = "fp32", prompt: int = 16,
                   config: dict[str, Any] | None = None) -> int:
    """ATen ops one decode step dispatches (views and copies included: each pays dispatch)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            self.n += 1
            return func(*args, **(kwargs or {}))

    cfg = config or OVERHEAD_CONFIG
    model = _model(cfg, device, dtype, 0)
    ids = torch.randint(0, cfg["vocab_size"], (1, prompt), device=device)
    with torch.inference_mode():
        nxt, past = _prefill(model, ids)
        _step(model, nxt, past)  # the cache's first growth allocates; count a steady step
        nxt, past = _prefill(model, ids)
        with _Count() as c:
            _step(model, nxt, past)
    return c.n


def _linears(model: Any) -> list[Any]:
    import torch

    return [m for m in model.modules() if isinstance(m, torch.nn.Linear)]


def _stream_hooks(small: Any, full: Any) -> tuple[list[Any], Any]:
    """Forward pre-hooks on each Linear of `small` that first run a matrix-vector product on
    the weight of the same Linear of `full`: the shrunken step then streams the real step's
    weights through the caches between its ops, as a real decode step does. Returns the
    hooks and a function that runs the same products alone, in the same order."""
    import torch.nn.functional as F

    pairs = [(w.weight, w.weight.new_ones(1, w.in_features))
             for w in _linears(full)]
    hooks = [lin.register_forward_pre_hook(lambda _m, _i, w=w, x=x: (F.linear(x, w), None)[1])
             for lin, (w, x) in zip(_linears(small), pairs, strict=True)]

    def streams_alone() -> None:
        for w, x in pairs:
            F.linear(x, w)
    return hooks, streams_alone


def _mean_step_s(model: Any, ids: Any, steps: int, device: str) -> float:
    import torch

    with torch.inference_mode():
        nxt, past = _prefill(model, ids)
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            nxt, past = _step(model, nxt, past)
        _sync(device)
    return (time.perf_counter() - t0) / steps


def _mean_call_s(fn: Any, calls: int, device: str) -> float:
    import torch

    with torch.inference_mode():
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        _sync(device)
    return (time.perf_counter() - t0) / calls


def eager_op_overhead(device: str = "cpu", dtype: str = "fp32", steps: int = 40,
                      repeats: int = 5, stream_config: dict[str, Any] | None = None
                      ) -> dict[str, Any]:
    """Seconds per dispatched op of an eager Hugging Face decode step: OVERHEAD_CONFIG's step
    (arithmetic negligible) / the ATen ops it dispatches. With `stream_config` (the model whose
    decode is predicted), measured as that model's step meets it: each linear first streams
    the full-size weight through the caches, and the cost per op is (shrunken step with the
    streams - the streams alone) / ops. Host work after a weight stream finds its code and
    data evicted; on a 2-core VM that took the per-op cost from 3.4 to 9 µs (2026-12-01).
    Rounds alternate the two timings so both see the same machine load."""
    import torch

    model = _model(OVERHEAD_CONFIG, device, dtype, 0)
    ops = count_step_ops(device, dtype)
    ids = torch.randint(0, OVERHEAD_CONFIG["vocab_size"], (1, 16), device=device)
    quiet = statistics.median(_mean_step_s(model, ids, steps, device)
                              for _ in range(repeats))
    out = {"time_s": quiet / ops, "step_s": quiet, "ops_per_step": ops, "quiet_time_s": quiet / ops,
           "what": "eager Hugging Face Llama decode step at widths 48/64 (arithmetic "
                   "negligible) / ATen ops it dispatches"}
    if stream_config is None:
        return out
    full = _model(stream_config, device, dtype, 1)
    hooks, alone = _stream_hooks(model, full)
    _mean_step_s(model, ids, 2, device)  # warm: the streamed weights' first touch
    per_op = []
    for _ in range(repeats):
        with_streams = _mean_step_s(model, ids, steps, device)
        streams = _mean_call_s(alone, steps, device)
        per_op.append(max(with_streams - streams, 0.0) / ops)
    for h in hooks:
        h.remove()
    out.update(time_s=statistics.median(per_op), per_op_runs_s=per_op,
               what="eager Hugging Face Llama decode step at widths 48/64 with each linear "
                    "first streaming the full-size model's weight (a matrix-vector product), "
                    "minus those products alone, / ATen ops it dispatches")
    return out


def measure_decode(device: str = "cpu", prompt: int = 128, output: int = 64, batch: int = 1,
                   dtype: str = "fp32", repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """Median TTFT (prefill + first token) and TPOT (mean later step) over `repeats` runs."""
    import torch

    model = _model(DECODER_CONFIG, device, dtype, seed)
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, DECODER_CONFIG["vocab_size"], (batch, prompt), device=device)

    def run(n_out: int, ids: Any) -> tuple[float, list[float]]:
        with torch.inference_mode():
            _sync(device)
            t0 = time.perf_counter()
            nxt, past = _prefill(model, ids)
            _sync(device)
            ttft = time.perf_counter() - t0
            steps = []
            for _ in range(n_out - 1):
                t0 = time.perf_counter()
                nxt, past = _step(model, nxt, past)
                _sync(device)
                steps.append(time.perf_counter() - t0)
        return ttft, steps

    run(4, ids[:, :16])  # warm-up: allocator, kernels, thread pool
    ttfts, tpots = [], []
    for _ in range(repeats):
        ttft, steps = run(output, ids)
        ttfts.append(ttft)
        tpots.append(statistics.fmean(steps) if steps else 0.0)
    return {"device": device, "dtype": dtype, "params": params, "batch": batch,
            "prompt_len": prompt, "output_len": output, "repeats": repeats,
            "threads": torch.get_num_threads(), "ttft_s": statistics.median(ttfts),
            "tpot_s": statistics.median(tpots), "ttft_runs_s": ttfts, "tpot_runs_s": tpots,
            "config": DECODER_CONFIG}
