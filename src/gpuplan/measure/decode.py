"""Measured decode on the machine at hand: a ~100M-parameter Llama-style decoder built from a
`transformers` config (random weights, nothing downloaded), a prompt prefilled, then tokens
decoded one at a time against its KV cache (greedy), each step timed with a device sync."""

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


def measure_decode(device: str = "cpu", prompt: int = 128, output: int = 64, batch: int = 1,
                   dtype: str = "fp32", repeats: int = 3, seed: int = 0) -> dict[str, Any]:
    """Median TTFT (prefill + first token) and TPOT (mean later step) over `repeats` runs."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    tdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    cfg = LlamaConfig(**{k: v for k, v in DECODER_CONFIG.items()
                         if k not in ("model_type", "architectures")})
    model = LlamaForCausalLM(cfg).to(device=device, dtype=tdt).eval()  # type: ignore[call-arg]
    params = sum(p.numel() for p in model.parameters())
    ids = torch.randint(0, cfg.vocab_size, (batch, prompt), device=device)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def run(n_out: int, ids: Any) -> tuple[float, list[float]]:
        with torch.inference_mode():
            sync()
            t0 = time.perf_counter()
            out = model(input_ids=ids, use_cache=True)
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
            sync()
            ttft = time.perf_counter() - t0
            past, steps = out.past_key_values, []
            for _ in range(n_out - 1):
                t0 = time.perf_counter()
                out = model(input_ids=nxt, past_key_values=past, use_cache=True)
                nxt = out.logits[:, -1].argmax(-1, keepdim=True)
                past = out.past_key_values
                sync()
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
