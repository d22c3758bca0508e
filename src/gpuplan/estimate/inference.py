"""Inference memory per GPU: weights at their storage dtype (group-wise scales counted), KV
cache (2 x layers x kv_heads x head_dim x bytes per token; TP splits the heads; MLA caches its
latent), the activation workspace of the largest prefill chunk, and other; the largest batch
and context that fit with a safety margin."""

from __future__ import annotations

import math
from collections.abc import Callable

from gpuplan.errors import InputError
from gpuplan.estimate.memory import NCCL_BYTES, MemoryResult, capacity_note
from gpuplan.estimate.partition import stages
from gpuplan.ops.blocks import FP32
from gpuplan.ops.transformer import Impl, kv_bytes_per_token
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import InferConfig
from gpuplan.units import DTYPE_BYTES

__all__ = ["InferConfig", "infer_memory", "kv_cache_bytes", "weight_bytes"]


def kv_cache_bytes(m: ModelSpec, cfg: InferConfig, batch: int, context: int) -> float:
    """Per GPU: TP gives each GPU ceil(kv_heads / tp) heads; MLA's latent is replicated.
    Encoder-only models run one forward over the whole sequence and keep no cache."""
    if m.arch == "encoder":
        return 0.0
    tokens = context
    if cfg.block_size:
        tokens = math.ceil(context / cfg.block_size) * cfg.block_size
    per_token = kv_bytes_per_token(m, cfg.kv_dtype)
    if not m.is_mla:
        per_token *= math.ceil(m.kv_heads / cfg.tp) / m.kv_heads
    return batch * tokens * per_token


def _workspace(m: ModelSpec, cfg: InferConfig, batch: int, context: int) -> float:
    """Live activations of the largest prefill step: the residual stream and its normed copy,
    the widest intermediate (QKV or the MLP's up/gate output and product), the logits."""
    chunk = cfg.prefill_chunk or min(batch * context, 8192)
    e = 2.0
    h, kvh = m.num_heads // cfg.tp, max(1, math.ceil(m.kv_heads / cfg.tp))
    qkv = (h + 2 * kvh) * m.head_size
    ff = math.ceil((m.expert_size if m.is_moe else m.intermediate_size) / cfg.tp)
    mlp = ff * (3 if m.mlp == "gated" else 1)
    if m.is_moe:
        mlp *= m.experts_per_token
    return chunk * (2 * m.hidden_size + max(qkv, mlp)) * e + batch * m.vocab_size / cfg.tp * FP32


def weight_bytes(m: ModelSpec, cfg: InferConfig) -> float:
    """Per GPU. Quantization (fp8/int8/int4) applies to the transformer blocks' matrices; the
    token embedding and the LM head stay 16-bit, as in the FP8 checkpoints of TensorRT Model
    Optimizer ("only the linear operators within transformer blocks"), GPTQ/AWQ and
    bitsandbytes; norms and biases too. Unquantized weights (fp32, 16-bit) are all stored at
    that dtype."""
    st = stages(m, cfg.tp, 1, 1)[0]
    wb = Impl(weight_dtype=cfg.weight_dtype).weight_bytes()
    vocab = m.vocab_size * m.hidden_size / cfg.tp * (1 if m.tie_embeddings else 2)
    blocks = st.matrix_params - vocab if m.arch == "decoder" else st.matrix_params
    return blocks * wb + (st.params - blocks) * max(2.0, DTYPE_BYTES[cfg.weight_dtype])


def infer_memory(m: ModelSpec, device: Device, cfg: InferConfig) -> MemoryResult:
    for f in ("batch", "context", "tp"):
        v = getattr(cfg, f)
        if not isinstance(v, int) or v < 1:
            raise InputError(f, v, "a whole number >= 1")
    for f, v in (("weight_dtype", cfg.weight_dtype), ("kv_dtype", cfg.kv_dtype)):
        if v not in DTYPE_BYTES:
            raise InputError(f, v, f"one of {', '.join(DTYPE_BYTES)}")
    if m.num_heads % cfg.tp:
        raise InputError("tp", cfg.tp, f"a divisor of the model's {m.num_heads} attention heads")

    def total(batch: int, context: int) -> dict[str, float]:
        w = weight_bytes(m, cfg)
        kv = kv_cache_bytes(m, cfg, batch, context)
        act = _workspace(m, cfg, batch, context)
        other = {"cuda_context": float(cfg.cuda_context_bytes),
                 "fragmentation": cfg.fragmentation * (kv + act)}
        if cfg.tp > 1:
            other["nccl_buffers"] = float(NCCL_BYTES)
        return {"weights": w, "kv_cache": kv, "activations": act, **{
            f"other.{k}": v for k, v in other.items()}}

    parts = total(cfg.batch, cfg.context)
    per_gpu = {k: int(v) for k, v in parts.items() if not k.startswith("other.")}
    other = {k[6:]: int(v) for k, v in parts.items() if k.startswith("other.")}
    per_gpu["other"] = sum(other.values())
    budget = device.capacity_bytes * (1 - cfg.margin)

    def fits(batch: int, context: int) -> bool:
        return sum(total(batch, context).values()) <= budget

    max_batch = largest_true(lambda b: fits(b, cfg.context), 1 << 20)
    max_context = largest_true(lambda c: fits(cfg.batch, c), 1 << 24)
    details: dict[str, object] = {
        "kv_bytes_per_token": kv_bytes_per_token(m, cfg.kv_dtype)
        * (1 if m.is_mla else math.ceil(m.kv_heads / cfg.tp) / m.kv_heads),
        "kv_bytes_per_token_all_gpus": kv_bytes_per_token(m, cfg.kv_dtype),
        "weight_bytes_per_param": Impl(weight_dtype=cfg.weight_dtype).weight_bytes(),
    }
    assumptions: dict[str, object] = {
        "weight_dtype": cfg.weight_dtype, "kv_dtype": cfg.kv_dtype, "tp": cfg.tp,
        "group_scales": "fp16 scale per 128 weights for int4/int8/fp4",
        "quantized": "transformer-block matrices; embedding and LM head kept 16-bit",
        "prefill_chunk": cfg.prefill_chunk or min(cfg.batch * cfg.context, 8192),
        "kv_block_size": cfg.block_size, "safety_margin": cfg.margin,
        "cuda_context_bytes": cfg.cuda_context_bytes, "fragmentation": cfg.fragmentation,
        "capacity": capacity_note(device),
    }
    return MemoryResult("infer", per_gpu, other, device.capacity_bytes, device.name, assumptions,
                        details, max_batch=max_batch, max_context=max_context,
                        margin=cfg.margin)


def largest_true(ok: Callable[[int], bool], limit: int) -> int:
    """Largest n in [1, limit] with ok(n) (ok is monotone), 0 if none."""
    if not ok(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and ok(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
