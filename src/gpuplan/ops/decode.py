"""One decode step against a KV cache: every sequence of the batch adds one token."""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.ops import blocks
from gpuplan.ops.blocks import Ctx
from gpuplan.ops.impl import Impl, check_positive
from gpuplan.ops.op import OpList
from gpuplan.ops.transformer import (
    BLOCK_ATTN,
    BLOCK_ATTN_WINDOW,
    BLOCK_MLP,
    BLOCK_MOE,
    attention_kinds,
    flush_into,
    head_block,
    mlp_block,
    mlp_kinds,
    moe_block,
    phase_ctx,
    qk_norms,
    replace_ctx,
)
from gpuplan.specs.model import ModelSpec
from gpuplan.units import DTYPE_BYTES


def build_decode(m: ModelSpec, batch: int, context: int, impl: Impl | None = None) -> OpList:
    """One decode step: `batch` sequences each add one token after `context` cached tokens."""
    check_positive("batch", batch)
    check_positive("context", context)
    if m.arch == "encoder":
        raise InputError("phase", "decode", "train or prefill: an encoder-only model "
                         f"({m.name}) has no decode step and no KV cache")
    impl = impl or Impl()
    c = phase_ctx(impl, "decode", train=False)
    t, d = batch, m.hidden_size
    kv_e = DTYPE_BYTES[impl.kv_dtype or impl.dtype]
    c.component = "embedding"
    blocks.embedding(c, "embed.tokens", t, m.vocab_size, d, t)
    for window, count in attention_kinds(m):
        lc = replace_ctx(c, count, BLOCK_ATTN_WINDOW if window else BLOCK_ATTN)
        lc.component = "norm"
        blocks.norm(lc, m.norm, "norm1", t, d, bias=m.norm_bias)
        lc.component = "attention"
        keys = context + 1 if window is None else min(context + 1, window)
        _decode_attention(lc, m, batch, keys, kv_e)
        blocks.elementwise(lc, "residual1", t * d, 2 * t * d)
        flush_into(c, lc)
    for moe, count in mlp_kinds(m):
        lc = replace_ctx(c, count, BLOCK_MOE if moe else BLOCK_MLP)
        lc.component = "norm"
        if m.norms_per_layer != 1:  # parallel attention + MLP share norm1
            blocks.norm(lc, m.norm, "norm2", t, d, bias=m.norm_bias)
        lc.component = "moe" if moe else "mlp"
        if moe:
            moe_block(lc, m, t)
        else:
            mlp_block(lc, m, t, m.intermediate_size)
        blocks.elementwise(lc, "residual2", t * d, 2 * t * d)
        flush_into(c, lc)
    head_block(c, m, t, t, loss=False)
    return OpList(tuple(c.fwd))


def _decode_attention(c: Ctx, m: ModelSpec, b: int, keys: int, kv_e: float) -> None:
    """Projections for one new token, append to the cache, attend over `keys` cached tokens."""
    h, hkv, dqk, dv, d = m.num_heads, m.kv_heads, m.head_size, m.v_head_size, m.hidden_size
    e = c.e
    if m.is_mla:
        # Absorbed MLA decode (DeepSeek-V2 §2.1.3): attend in the compressed latent space.
        r_q, r_kv, rope, nope = (m.q_lora_rank, m.kv_lora_rank or 0, m.qk_rope_head_dim or 0,
                                 m.qk_nope_head_dim or 0)
        if r_q:
            blocks.linear(c, "attn.q_a", b, d, r_q)
            blocks.linear(c, "attn.q_b", b, r_q, h * dqk)
        else:
            blocks.linear(c, "attn.q", b, d, h * dqk)
        blocks.linear(c, "attn.kv_a", b, d, r_kv + rope)
        blocks.linear(c, "attn.q_absorb", b, h * nope, r_kv, weight_rows=h * nope)
        latent = b * keys * (r_kv + rope) * kv_e
        flops = 2 * b * h * keys * (r_kv + rope) + 2 * b * h * keys * r_kv
        c.op("attn.core", "attention", flops, latent + b * h * (r_kv + rope) * e,
             b * h * r_kv * e + b * (r_kv + rope) * kv_e, shape=f"b{b} h{h} ctx{keys} latent")
        blocks.linear(c, "attn.v_absorb", b, r_kv, h * dv, weight_rows=h * r_kv / h)
    else:
        blocks.linear(c, "attn.qkv", b, d, h * dqk + hkv * (dqk + dv), bias=m.qkv_bias)
        qk_norms(c, m, b, h, hkv)
        if m.position == "rope":
            rot = b * (h + hkv) * m.rope_dim
            blocks.elementwise(c, "attn.rope", rot, rot, kernels=1 if c.fused else 5)
        cache = b * keys * hkv * (dqk + dv) * kv_e
        flops = 2 * b * h * keys * (dqk + dv)
        c.op("attn.core", "attention", flops, cache + b * h * dqk * e,
             b * h * dv * e + b * hkv * (dqk + dv) * kv_e,
             shape=f"b{b} h{h}/{hkv} ctx{keys} d{dqk}")
    blocks.linear(c, "attn.out", b, h * dv, d, bias=m.out_bias)
