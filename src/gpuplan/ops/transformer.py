"""Analytic op builders for every architecture a ModelSpec describes: training (forward and
backward, op by op), prefill, and decode against a KV cache.

Per-layer ops are emitted once with `count` = number of layers, so the cost of building the op
list does not depend on depth. What each op saves for backward mirrors eager PyTorch (and the
Hugging Face implementations) so that builder and tracer agree; `fused=True` models an
implementation whose norms, activations and RoPE are single kernels.
"""

from __future__ import annotations

from dataclasses import replace

from gpuplan.errors import InputError
from gpuplan.ops import blocks
from gpuplan.ops.blocks import FP32, INDEX, Ctx
from gpuplan.ops.impl import Impl, Local, check_positive, local_sizes
from gpuplan.ops.op import Op, OpList, Phase
from gpuplan.specs.model import ModelSpec
from gpuplan.units import DTYPE_BYTES


def phase_ctx(impl: Impl, phase: Phase, train: bool) -> Ctx:
    e = DTYPE_BYTES[impl.dtype]
    if impl.dtype not in DTYPE_BYTES:
        raise InputError("dtype", impl.dtype, f"one of {', '.join(DTYPE_BYTES)}")
    return Ctx(phase=phase, dtype=impl.matmul_dtype or impl.dtype, e=e, train=train,
               mask_bytes=1 if impl.target == "cuda" else e,
               grad_bytes=DTYPE_BYTES[impl.grad_dtype or impl.dtype],
               weight_bytes=impl.weight_bytes() if not train else e, fused=impl.fused,
               cpu=impl.target == "cpu", fp8_inputs=impl.fp8_quantized_inputs,
               fp8_weights_cached=impl.fp8_weights_cached, fp8_norm_casts=impl.fp8_norm_casts,
               fp8_rowwise=impl.fp8_rowwise,
               head_dtype=impl.dtype if train and impl.fp8_blocks_only else None)


def _useful_keys(s: int, window: int | None, causal: bool) -> float:
    """Average keys a query attends to: (s+1)/2 when causal, capped by a sliding window."""
    if not causal:
        return float(s if window is None else min(s, window))
    w = s if window is None else min(s, window)
    # sum_{i=1..s} min(i, w) / s
    return (w * (w + 1) / 2 + (s - w) * w) / s


# Op.layer tags of the per-layer blocks (each op's count = number of layers of that kind)
BLOCK_ATTN = "layer.attention"
BLOCK_ATTN_WINDOW = "layer.attention.window"
BLOCK_MLP = "layer.mlp"
BLOCK_MOE = "layer.moe"


# ---- blocks of a layer -------------------------------------------------------------------

def _attention(c: Ctx, m: ModelSpec, impl: Impl, b: int, seq_len: int, window: int | None,
               p_attn: float, loc: Local) -> None:
    """Projections, RoPE, attention core, output projection (and MLA's compression), on one
    GPU's share: loc.heads query heads, loc.seq of the seq_len tokens (keys: all seq_len)."""
    s = loc.seq
    t = b * s
    h, hkv, dqk, dv = loc.heads, loc.kv_heads, m.head_size, m.v_head_size
    e = c.e
    saved_rows = t * loc.rep
    # the fused QKV projection reads norm1's output; in Megatron-Core's MLA spec the two down
    # projections are plain linears after a separate norm and the up projections are
    # LayerNormLinear over q_a_norm / kv_a_norm (gpt_layer_specs.py @d98e8a6)
    pre = m.arch == "decoder"
    if m.is_mla:
        r_q, r_kv, rope = m.q_lora_rank, m.kv_lora_rank or 0, m.qk_rope_head_dim or 0
        if r_q:
            blocks.linear(c, "attn.q_a", t, m.hidden_size, r_q, saved_rows=saved_rows)
            blocks.rmsnorm(c, "attn.q_a_norm", t, r_q)
            blocks.linear(c, "attn.q_b", t, r_q, h * dqk, after_norm=True)
        else:
            blocks.linear(c, "attn.q", t, m.hidden_size, h * dqk, saves_input=False)
        blocks.linear(c, "attn.kv_a", t, m.hidden_size, r_kv + rope, saves_input=not r_q,
                      saved_rows=saved_rows)
        blocks.rmsnorm(c, "attn.kv_a_norm", t, r_kv)
        blocks.linear(c, "attn.kv_b", t, r_kv, h * ((m.qk_nope_head_dim or 0) + dv),
                      after_norm=True)
        hkv = h  # decompressed K/V have every head
    else:
        n_qkv = h * dqk + hkv * dqk + hkv * dv
        blocks.linear(c, "attn.qkv", t, m.hidden_size, n_qkv, bias=m.qkv_bias,
                      saved_rows=saved_rows, after_norm=pre)
        qk_norms(c, m, t, h, hkv)
    if m.position == "rope":
        rot = t * (h + hkv) * m.rope_dim
        blocks.elementwise(c, "attn.rope", rot, rot, kernels=1 if c.fused else 5,
                           flops_per_elem=3.0)
    # packed documents (varlen FlashAttention): a query's keys are its document's, so the
    # average span is that of a sequence of document_len tokens; the kernel skips the
    # cross-document tiles as it skips causally masked ones (a naive masked attention does not)
    span = min(seq_len, impl.document_len) if impl.document_len else seq_len
    useful = _useful_keys(span, window, m.causal)
    cpu_math = impl.attention == "flash" and impl.target == "cpu" and (p_attn > 0 or dqk != dv)
    if impl.attention == "naive" or cpu_math:
        start = len(c.fwd)
        # HF repeat_kv expands K/V to every query head; torch.matmul folds (b, heads) into one
        # batch dimension, a view (no copy) only when b == 1 and there is one KV head
        kv_view = hkv if (b == 1 and hkv == 1 and h > 1 and not cpu_math) else None
        blocks.attention_naive(c, b, s, h, dqk, dv, m.causal, useful, p_attn,
                               softmax_fp32=m.softmax_fp32,
                               internal_bytes=FP32 if cpu_math else None, sk=seq_len,
                               selective=impl.recompute == "selective", kv_view_heads=kv_view)
        if b == 1 and m.fused_qkv and m.position != "rope" and not cpu_math:
            # at batch 1 the eager matmul reshapes q without a copy: q stays a view of the
            # fused QKV output, which is then kept whole
            i = next(i for i in range(start, len(c.fwd)) if c.fwd[i].name.endswith("scores"))
            c.fwd[i] = replace(c.fwd[i], saved_bytes=c.fwd[i].saved_bytes
                               + t * hkv * (dqk + dv) * e)
        # output (b, h, s, d) transposed to (b, s, h·d): a copy the output projection keeps
        blocks.elementwise(c, "attn.transpose", t * h * dv, t * h * dv, kind="copy",
                           flops_per_elem=0.0)
        blocks.linear(c, "attn.out", t, h * dv, m.hidden_size, bias=m.out_bias)
    else:
        selective = impl.recompute == "selective" and c.train
        blocks.attention_flash(c, b, s, seq_len, h, hkv, dqk, dv, m.causal, useful,
                               qkv_saved=_flash_qkv_saved(m, impl, t, h, hkv) * e,
                               recomputed=selective, calls=impl.cp)
        # flash kernels write their output in q's layout, (b, s, h, d) after a RoPE computed
        # on the transposed projection: the output projection reads it without a copy and
        # keeps it itself only when the core does not (selective recompute). A RoPE rebuilt
        # by torch.cat leaves q head-major, so the transpose back is a copy it keeps.
        if m.rope_concat:
            blocks.elementwise(c, "attn.transpose", t * h * dv, t * h * dv, kind="copy",
                               flops_per_elem=0.0)
        blocks.linear(c, "attn.out", t, h * dv, m.hidden_size, bias=m.out_bias,
                      saves_input=selective or m.rope_concat)




def qk_norms(c: Ctx, m: ModelSpec, t: float, h: int, hkv: int) -> None:
    """Query and key norms (weight only) before RoPE on this GPU's h and hkv heads: over each
    head's head_dim (Qwen3 q_norm/k_norm, transformers models/qwen3/modeling_qwen3.py; Cohere,
    StableLM) or over the whole projection (OLMo 2, models/olmo2/modeling_olmo2.py): the same
    elements and FLOPs, statistics per head or per token."""
    if m.qk_norm == "none":
        return
    dqk = m.head_size
    per_head = not m.qk_norm_over_projection  # statistics per head, or per token (OLMo 2)
    for name, heads in (("attn.q_norm", h), ("attn.k_norm", hkv)):
        rows, width = (t * heads, dqk) if per_head else (t, heads * dqk)
        blocks.norm(c, m.norm, name, rows, width, bias=False, plus_one=m.norm_plus_one,
                    fp32_weight=m.norm_weight_fp32, kernel=m.layernorm_kernel)


def _flash_qkv_saved(m: ModelSpec, impl: Impl, t: int, h: int, hkv: int) -> float:
    """Elements of the distinct storages behind the q, k, v that fused attention keeps.

    With a fused QKV projection the three are views of one output, which stays alive whole
    unless RoPE (q, k) or a training-time KV cache (k, v) replaced them by copies."""
    dqk, dv = m.head_size, m.v_head_size
    q, k, v = t * h * dqk, t * hkv * dqk, t * hkv * dv
    if m.is_mla or not m.fused_qkv:
        return q + k + v
    rope = m.position == "rope"
    copies = impl.training_kv_cache
    fused_alive = not (rope and copies)  # some view of the fused output is still saved
    return (q + k + v if fused_alive else 0) + (q if rope else 0) + (k + v if copies else 0) \
        + (k if rope and not copies else 0)


def mlp_block(c: Ctx, m: ModelSpec, t: float, inner: int, name: str = "mlp",
              saved_rows: float | None = None, after_norm: bool = False) -> None:
    d = m.hidden_size
    if m.mlp == "gated":
        blocks.linear(c, f"{name}.gate_up", t, d, 2 * inner, bias=m.mlp_bias,
                      saved_rows=saved_rows, after_norm=after_norm)
        blocks.gated_unit(c, name, m.activation, t * inner)
        blocks.linear(c, f"{name}.down", t, inner, d, bias=m.mlp_bias)
    else:
        blocks.linear(c, f"{name}.up", t, d, inner, bias=m.mlp_bias, saved_rows=saved_rows,
                      after_norm=after_norm)
        blocks.activation(c, f"{name}.act", m.activation, t * inner)
        blocks.linear(c, f"{name}.down", t, inner, d, bias=m.mlp_bias)


def experts_touched(tokens: float, k: int, experts: int) -> float:
    """Expected distinct experts hit by `tokens` tokens choosing k of E uniformly:
    E x (1 - (1 - k/E)^tokens) (each expert is missed by one token with probability 1 - k/E)."""
    return float(experts * (1.0 - (1.0 - k / experts) ** tokens))


def moe_block(c: Ctx, m: ModelSpec, t: float, loc: Local | None = None) -> None:
    """Router, dispatch, routed experts (grouped GEMM over t·k rows), combine; shared experts.
    Mixture-of-experts as in Mixtral (Jiang et al. 2024) and DeepSeek-V3 (§2.1.2). With expert
    parallelism each GPU holds E/ep experts and, balanced, still computes t·k rows. With an
    expert tensor-parallel degree below tp (Local.expert_rep) the experts see only their
    expert-tensor group's sequence shards, t·expert_rep tokens, at expert_size/etp wide."""
    d, n_e, k = m.hidden_size, m.num_experts, m.experts_per_token
    ff = loc.expert_ff if loc else m.expert_size
    shared_ff = loc.shared_expert_ff if loc else m.expert_size
    local_experts = loc.experts if loc else n_e
    t_all, t = t, t * (loc.expert_rep if loc else 1.0)
    e, rows = c.e, t * k
    touched = local_experts if c.train else min(local_experts, experts_touched(t, k, n_e))
    blocks.linear(c, "moe.router", t, d, n_e)
    router_saved = t * (n_e * FP32 + k * (INDEX + FP32) + FP32) + 3 * rows * INDEX + n_e * FP32
    c.op("moe.topk", "softmax", 5 * t * n_e, t * n_e * e, t * k * (INDEX + FP32),
         saved=router_saved, dtype="fp32", shape=f"{int(t)}x{n_e} top{k}")
    c.op("moe.dispatch", "copy", 0.0, rows * d * e, rows * d * e, saved=rows * d * e,
         shape=f"{int(rows)}x{d}")
    if c.train:
        c.op("moe.dispatch", "copy", 0.0, rows * d * e, rows * d * e, backward=True)
    blocks.linear(c, "moe.experts.gate_up", rows, d, 2 * ff, saves_input=False,
                  weight_rows=d * touched)
    blocks.gated_unit(c, "moe.experts", m.activation, rows * ff)
    blocks.linear(c, "moe.experts.down", rows, ff, d, weight_rows=ff * touched)
    # combine: expert outputs x routing weights (both kept), scattered back to tokens
    blocks.elementwise(c, "moe.combine", rows * d, rows * d + rows,
                       saved=rows * d * e + rows * FP32, kind="elementwise")
    if m.num_shared_experts:
        mlp_block(c, m, t_all, shared_ff * m.num_shared_experts, name="moe.shared",
                  saved_rows=0)


# ---- whole model ---------------------------------------------------------------------------

def attention_kinds(m: ModelSpec) -> list[tuple[int | None, int]]:
    """(sliding window or None, number of layers) for the model's attention layer kinds."""
    n = m.num_sliding_layers
    return [(w, c) for w, c in ((m.sliding_window, n), (None, m.num_layers - n)) if c]


def mlp_kinds(m: ModelSpec) -> list[tuple[bool, int]]:
    """(is MoE, number of layers) for the model's MLP layer kinds."""
    return [(moe, c) for moe, c in ((False, m.num_dense_layers), (True, m.num_moe_layers)) if c]


def _layers(ctx: Ctx, m: ModelSpec, impl: Impl, b: int, s: int, p_hidden: float,
            p_attn: float) -> None:
    """All transformer layers: attention part per window class, MLP part per dense/MoE."""
    loc = local_sizes(m, impl, s)
    t = b * loc.seq
    tr = t * loc.rep  # tokens whose norm/dropout/residual work this GPU does
    d = m.hidden_size
    pre = m.arch == "decoder"
    gemma = m.norm_plus_one
    # parallel attention and MLP (GPT-J, GPT-NeoX, Falcon, Phi-2; Wang & Komatsuzaki 2021):
    # both read the layer input. One shared norm: no second norm, and the MLP's first linear
    # keeps the tensor the QKV projection already keeps; two norms: the second keeps no
    # second copy of the input
    shared_norm = m.norms_per_layer == 1
    for window, count in attention_kinds(m):
        c = replace_ctx(ctx, count, BLOCK_ATTN_WINDOW if window else BLOCK_ATTN)
        c.component = "norm"
        if pre:
            blocks.norm(c, m.norm, "norm1", tr, d, bias=m.norm_bias, plus_one=gemma,
                        fp32_weight=m.norm_weight_fp32, kernel=m.layernorm_kernel)
        c.component = "attention"
        _attention(c, m, impl, b, s, window, p_attn, loc)
        blocks.dropout(c, "attn.resid_dropout", tr * d, p_hidden)
        if m.norms_per_layer == 4:
            c.component = "norm"
            blocks.rmsnorm(c, "norm_post_attn", tr, d, plus_one=True)
        c.component = "attention"
        blocks.elementwise(c, "residual1", tr * d, 2 * tr * d, grad_inputs=0)
        if not pre:
            c.component = "norm"
            blocks.layernorm(c, "norm1", tr, d)
        _recompute(c, impl, checkpoint=tr * d * c.e)
        flush_into(ctx, c)
    for moe, count in mlp_kinds(m):
        c = replace_ctx(ctx, count, BLOCK_MOE if moe else BLOCK_MLP)
        c.component = "norm"
        if pre and not shared_norm:
            blocks.norm(c, m.norm, "norm2", tr, d, bias=m.norm_bias, plus_one=gemma,
                        fp32_weight=m.norm_weight_fp32, input_kept=m.parallel_residual,
                        kernel=m.layernorm_kernel)
        c.component = "moe" if moe else "mlp"
        if moe:
            moe_block(c, m, t, loc)  # tokens gathered across TP; each GPU computes ff/tp of them
        else:
            mlp_block(c, m, t, loc.ff, saved_rows=0 if shared_norm else tr, after_norm=pre)
        blocks.dropout(c, "mlp.resid_dropout", tr * d, p_hidden)
        if m.norms_per_layer == 4:
            c.component = "norm"
            blocks.rmsnorm(c, "norm_post_mlp", tr, d, plus_one=True)
        c.component = "moe" if moe else "mlp"
        blocks.elementwise(c, "residual2", tr * d, 2 * tr * d, grad_inputs=0)
        if not pre:
            c.component = "norm"
            blocks.layernorm(c, "norm2", tr, d)
        _mark_recompute_tail(c)
        _recompute(c, impl, checkpoint=0.0)
        flush_into(ctx, c)


def _mark_recompute_tail(c: Ctx) -> None:
    """Tag the layer's forward ops that a non-reentrant checkpoint does not recompute: PyTorch
    stops the recomputation once the last tensor saved for backward is saved again
    (torch.utils.checkpoint set_checkpoint_early_stop, on by default since 2.1), and a linear
    saves its input before it computes, so the tail from the last saving linear on is skipped
    (from the op after the last saving op when that op saves its output, e.g. a norm)."""
    saving = [i for i, o in enumerate(c.fwd) if o.saved_bytes > 0]
    if not saving:
        return
    last = saving[-1]
    start = last if c.fwd[last].kind == "matmul" else last + 1
    c.fwd[start:] = [replace(o, recompute_tail=True) for o in c.fwd[start:]]


def _recompute(c: Ctx, impl: Impl, checkpoint: float) -> None:
    """Full recomputation: the block keeps only its checkpointed input (the layer input) and
    runs its forward again before its backward (Chen et al. 2016; +1 forward of hardware FLOPs),
    less the layer's tail under early stop (Impl.recompute_early_stop, _mark_recompute_tail)."""
    if impl.recompute != "full" or not c.train:
        return
    c.bwd.extend(reversed([blocks.recomputed(o) for o in c.fwd
                           if not (impl.recompute_early_stop and o.recompute_tail)]))
    c.fwd[:] = [replace(o, saved_bytes=0.0) for o in c.fwd]
    if checkpoint:
        c.op("checkpoint", "copy", 0.0, 0.0, 0.0, saved=checkpoint, kernels=0)  # bookkeeping


def replace_ctx(ctx: Ctx, count: int, layer: str | None) -> Ctx:
    """A fresh context for one block kind of the layers, with ctx's settings."""
    return replace(ctx, count=count, layer=layer, prefix="layers.", fwd=[], bwd=[])


def flush_into(into: Ctx, c: Ctx) -> None:
    into.fwd.extend(c.fwd)
    into.bwd.extend(c.bwd)


def _embeddings(c: Ctx, m: ModelSpec, b: int, s: int, p_emb: float,
                loc: Local | None = None) -> None:
    rep = loc.rep if loc else 1.0
    s = loc.seq if loc else s
    t, d = b * s, m.hidden_size
    c.component = "embedding"
    blocks.embedding(c, "embed.tokens", t, loc.vocab if loc else m.vocab_size, d, t)
    # HF BERT slices its registered position_ids buffer (the whole buffer stays saved);
    # GPT-2 builds position ids with arange
    buffered = m.position_ids_buffer
    if m.position == "learned":
        blocks.embedding(c, "embed.positions", s, m.max_position_embeddings, d,
                         m.max_position_embeddings if buffered else s)
        blocks.elementwise(c, "embed.add", t * d, t * d + s * d, grad_inputs=2)
    if m.type_vocab_size:
        blocks.embedding(c, "embed.token_types", t, m.type_vocab_size, d, s if buffered else t)
        blocks.elementwise(c, "embed.add_types", t * d, 2 * t * d, grad_inputs=2)
    if m.embedding_norm:
        blocks.layernorm(c, "embed.norm", t, d)
    if m.position == "rope":  # cos and sin tables, computed once, shared by every layer
        rd = m.rope_dim
        table = s * rd
        kept = FP32 if m.rope_tables_fp32 else c.e  # OLMo: q * cos with cos in fp32
        c.op("rope.tables", "elementwise", 4 * table, s * INDEX, 2 * table * FP32,
             saved=2 * table * kept, dtype="fp32", shape=f"{s}x{rd}")
    blocks.dropout(c, "embed.dropout", t * d * rep, p_emb)


def head_block(c: Ctx, m: ModelSpec, t: float, logits_tokens: float, loss: bool,
          loc: Local | None = None, batch: int = 0) -> None:
    d = m.hidden_size
    rep = loc.rep if loc else 1.0
    vocab = loc.vocab if loc else m.vocab_size
    if m.final_norm:
        c.component = "norm"
        blocks.norm(c, m.norm, "final_norm", t * rep, d, bias=m.norm_bias,
                    plus_one=m.norm_plus_one, fp32_weight=m.norm_weight_fp32,
                    kernel=m.layernorm_kernel)
    c.component = "head"
    if m.mlm_head:
        blocks.linear(c, "mlm.transform", t, d, d, bias=True)
        blocks.activation(c, "mlm.act", m.activation, t * d)
        blocks.layernorm(c, "mlm.norm", t, d)
    # quantized checkpoints (GPTQ/AWQ, FP8) keep the LM head in 16 bits
    head = replace(c, dtype=c.head_dtype) if c.head_dtype else c
    blocks.linear(head, "lm_head", logits_tokens, d, vocab, bias=m.mlm_head or m.lm_head_bias,
                  saved_rows=logits_tokens * rep, weight_bytes=c.e)
    if loss:
        c.component = "loss"
        if m.mlm_head:  # BERT MLM loss: log_softmax in the model dtype, no upcast
            n = t * vocab
            c.op("loss.log_softmax", "softmax", 5 * n, n * c.e, n * c.e, saved=n * c.e)
            c.op("loss.nll", "loss", n, n * c.e + t * INDEX, c.e, saved=t * INDEX + c.e)
            if c.train:
                c.op("loss.nll", "loss", t, t * INDEX, n * c.e, backward=True)
                c.op("loss.log_softmax", "softmax", 3 * n, 2 * n * c.e, n * c.e, backward=True)
        else:
            blocks.cross_entropy(c, t, vocab, target_rows=t + 1 if batch == 1 else t)


def build_training(m: ModelSpec, batch: int, seq_len: int, impl: Impl | None = None) -> OpList:
    """Forward and backward ops of one training micro-batch (no optimizer step)."""
    check_positive("batch", batch)
    check_positive("seq_len", seq_len)
    impl = impl or Impl()
    c = phase_ctx(impl, "forward", train=True)
    drop = impl.dropout
    loc = local_sizes(m, impl, seq_len)
    _embeddings(c, m, batch, seq_len, m.embedding_dropout if drop else 0.0, loc)
    _layers(c, m, impl, batch, seq_len, m.hidden_dropout if drop else 0.0,
            m.attention_dropout if drop else 0.0)
    t = batch * loc.seq
    head_block(c, m, t, t, loss=True, loc=loc, batch=batch)
    return OpList(tuple(c.fwd) + tuple(reversed(c.bwd)))


def build_forward(m: ModelSpec, batch: int, seq_len: int, impl: Impl | None = None,
                  phase: Phase = "forward", all_logits: bool = True) -> OpList:
    """Forward ops without autograd: 'forward' (inference over a batch) or 'prefill' (prompt
    processing: writes the KV cache; logits only for the last token unless all_logits)."""
    check_positive("batch", batch)
    check_positive("seq_len", seq_len)
    impl = impl or Impl()
    c = phase_ctx(impl, phase, train=False)
    loc = local_sizes(m, impl, seq_len)
    _embeddings(c, m, batch, seq_len, 0.0, loc)
    _layers(c, m, impl, batch, seq_len, 0.0, 0.0)
    t = batch * loc.seq
    if phase == "prefill" and m.arch == "decoder":
        _kv_write(c, m, impl, t)
    head_block(c, m, t, t if all_logits else batch, loss=False, loc=loc)
    return OpList(tuple(c.fwd))


def kv_bytes_per_token(m: ModelSpec, kv_dtype: str) -> float:
    """KV-cache bytes per token over all layers: 2 x layers x kv_heads x head_dim x bytes;
    MLA caches the compressed latent plus the RoPE key (DeepSeek-V2 §2.1.2)."""
    b = DTYPE_BYTES[kv_dtype]
    if m.is_mla:
        return m.num_layers * ((m.kv_lora_rank or 0) + (m.qk_rope_head_dim or 0)) * b
    return m.num_layers * m.kv_heads * (m.head_size + m.v_head_size) * b


def _kv_write(c: Ctx, m: ModelSpec, impl: Impl, tokens: float) -> None:
    nbytes = tokens * kv_bytes_per_token(m, impl.kv_dtype or impl.dtype)
    c.component = "attention"
    c.op("kv_cache.write", "copy", 0.0, nbytes, nbytes, shape=f"{int(tokens)} tokens")


def forward_flops(ops: OpList, useful: bool = False) -> float:
    """Model FLOPs of the forward phase(s): matmul-class ops (the 6·N·D convention)."""
    fwd = ops.phase("forward", "prefill", "decode")
    return fwd.useful_flops(matmul_only=True) if useful else fwd.flops(matmul_only=True)


def total(ops: OpList, attr: str) -> float:
    return float(sum(float(getattr(o, attr)) * o.count for o in ops))


__all__ = ["Impl", "Local", "Op", "OpList", "build_forward", "build_training",
           "experts_touched", "forward_flops", "kv_bytes_per_token", "local_sizes"]
