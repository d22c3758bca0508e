"""Analytic op builders (gpuplan.ops.transformer): against the meta tracer, against hand-derived
FLOP counts, and their scaling properties.

The tracer side of (a) runs the real Hugging Face implementation on the meta device and is
itself checked against real CPU training steps in test_tracer.py.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.ops.decode import build_decode
from gpuplan.ops.op import OpList
from gpuplan.ops.transformer import (
    Impl,
    build_forward,
    build_training,
    forward_flops,
    kv_bytes_per_token,
)
from gpuplan.specs.catalog import get_model
from gpuplan.specs.model import ModelSpec

VOCAB = 1000


def total(ops: OpList, attr: str) -> float:
    return float(sum(getattr(o, attr) * o.count for o in ops))


def ops_named(ops: OpList, name: str, phase: str = "forward") -> OpList:
    """The ops called `name` in `phase` (backward ops carry a '.grad' suffix)."""
    return ops.filter(lambda o: o.name.removesuffix(".grad") == name and o.phase == phase)


# ---- a) analytic == tracer on tiny HF models --------------------------------------------------


def _hf_config(name: str) -> Any:
    transformers = pytest.importorskip("transformers")
    small = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": VOCAB}
    gpt2 = {"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": VOCAB, "n_positions": 128,
            "bos_token_id": 0, "eos_token_id": 0}
    no_drop = {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    return {
        "gpt2": lambda: transformers.GPT2Config(**gpt2),
        "gpt2-nodrop": lambda: transformers.GPT2Config(**gpt2, **no_drop),
        "llama-gqa": lambda: transformers.LlamaConfig(**small),
        "qwen2": lambda: transformers.Qwen2Config(**small),
        "mixtral": lambda: transformers.MixtralConfig(**small, num_local_experts=4,
                                                      num_experts_per_tok=2),
        "bert": lambda: transformers.BertConfig(num_hidden_layers=2, hidden_size=64,
                                                num_attention_heads=4, intermediate_size=256,
                                                vocab_size=VOCAB),
    }[name]()


@cache
def _meta_model(name: str, attn: str, dtype: str) -> Any:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()
    cfg = _hf_config(name)
    torch_dtype = torch.float32 if dtype == "fp32" else torch.bfloat16
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "bert":
            return transformers.BertForMaskedLM._from_config(cfg, attn_implementation=attn,
                                                             dtype=torch_dtype)
        return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation=attn,
                                                             dtype=torch_dtype)


MODELS = ["gpt2", "gpt2-nodrop", "llama-gqa", "qwen2", "mixtral", "bert"]
CASES = [(n, a, d) for n in MODELS for a in ("eager", "sdpa") for d in ("fp32", "bf16")]


@pytest.mark.parametrize(("name", "attn", "dtype"), CASES,
                         ids=[f"{n}-{a}-{d}" for n, a, d in CASES])
def test_analytic_matches_tracer(name: str, attn: str, dtype: str) -> None:
    torch = pytest.importorskip("torch")
    from gpuplan.ops.tracer import trace

    model = _meta_model(name, attn, dtype)
    spec = spec_from_hf(_hf_config(name))
    # HF eager attention = naive (scores in memory); HF sdpa on the CPU = the CPU flash kernel
    impl = Impl(attention="naive" if attn == "eager" else "flash", target="cpu", dtype=dtype)
    for batch, seq in ((2, 32), (3, 64)):
        ids = torch.randint(0, VOCAB, (batch, seq))
        tr = trace(model, input_ids=ids, labels=ids.clone())
        ops = build_training(spec, batch, seq, impl)
        assert forward_flops(ops) == pytest.approx(tr.forward_flops, rel=1e-2)
        assert ops.phase("backward").flops(matmul_only=True) == pytest.approx(
            tr.backward_flops, rel=1e-2)
        assert ops.saved_bytes() == pytest.approx(tr.saved_activation_bytes, rel=1e-2)
        # in practice both are exact
        assert forward_flops(ops) == tr.forward_flops
        assert ops.phase("backward").flops(matmul_only=True) == tr.backward_flops
        assert ops.saved_bytes() == tr.saved_activation_bytes


def spec_from_hf(cfg: Any) -> ModelSpec:
    from gpuplan.specs.hf_config import spec_from_hf_dict

    return spec_from_hf_dict(cfg.to_dict(), "x")


# ---- b) exact hand-derived FLOPs ---------------------------------------------------------------

TINY = ModelSpec(name="tiny", family="llama", vocab_size=100, hidden_size=32, num_layers=3,
                 num_heads=4, num_kv_heads=2, intermediate_size=64, mlp="gated",
                 activation="silu", norm="rmsnorm", position="rope")
B, S = 2, 8
T = B * S  # 16 tokens


def test_mlp_layer_flops() -> None:
    ops = build_training(TINY, B, S, Impl(attention="naive"))
    (gate_up,) = ops_named(ops, "layers.mlp.gate_up")
    (down,) = ops_named(ops, "layers.mlp.down")
    # SwiGLU: gate and up projections fused, [T, d] @ [d, 2*ff] = 2*T*d*2ff = 2*16*32*128
    assert gate_up.flops == 2 * 16 * 32 * 128 == 131072
    # down projection [T, ff] @ [ff, d] = 2*16*64*32
    assert down.flops == 2 * 16 * 64 * 32 == 65536
    assert gate_up.count == down.count == 3  # once per layer
    # backward: dX = dY W^T and dW = X^T dY, each as costly as the forward
    bwd = ops.filter(lambda o: o.phase == "backward" and o.name.startswith("layers.mlp.")
                     and o.kind == "matmul")
    assert total(bwd, "flops") == 2 * 3 * (131072 + 65536)


def test_attention_layer_flops() -> None:
    h, dh = 4, 8
    ops = build_training(TINY, B, S, Impl(attention="naive"))
    (qkv,) = ops_named(ops, "layers.attn.qkv")
    # q: h*dh = 32 columns, k and v: kv_heads*dh = 16 each -> [16, 32] @ [32, 64]
    assert qkv.flops == 2 * 16 * 32 * 64
    (scores,) = ops_named(ops, "layers.attn.scores")
    (pv,) = ops_named(ops, "layers.attn.pv")
    # S = Q K^T: b*h*s*s dot products of length dh -> 2*b*h*s^2*dh = 2*2*4*64*8
    assert scores.flops == pv.flops == 2 * B * h * S * S * dh == 8192
    # causal: query i sees i+1 keys, on average (s+1)/2 -> useful = 2*b*h*s*(s+1)/2*dh,
    # a little more than half
    assert scores.useful_flops == pv.useful_flops == 2 * B * h * S * (S + 1) / 2 * dh == 4608

    flash = build_training(TINY, B, S, Impl(attention="flash"))
    (core,) = ops_named(flash, "layers.attn.core")
    # fused: both products in one kernel, 2*b*h*s^2*(dh + dh)
    assert core.flops == 2 * B * h * S * S * 2 * dh == 16384
    assert core.useful_flops == 2 * B * h * S * (S + 1) / 2 * 2 * dh == 9216
    assert core.skips_masked and core.executed_flops == core.useful_flops
    (core_bwd,) = ops_named(flash, "layers.attn.core", "backward")
    assert core_bwd.flops == 2.5 * core.flops  # 2*b*h*s^2*(3dh + 2dh)

    # an encoder attends to every key: full == useful
    enc = TINY.model_copy(update={"arch": "encoder", "family": "bert"})
    (core,) = ops_named(build_training(enc, B, S, Impl()), "layers.attn.core")
    assert core.useful_flops == core.flops == 16384


def test_lm_head_flops() -> None:
    ops = build_training(TINY, B, S)
    (head,) = ops_named(ops, "lm_head")
    assert head.flops == 2 * T * 32 * 100  # 2*T*d*V
    assert head.count == 1


def test_gpt2_124m_forward_flops() -> None:
    g = get_model("gpt2")
    d, layers, heads, vocab, ff = 768, 12, 12, 50257, 3072
    t = 1024  # batch 1, seq 1024
    # non-embedding matmul weights per layer: c_attn d x 3d, c_proj d x d, c_fc d x 4d,
    # c_proj 4d x d = 12 d^2; the tied LM head d x V
    layer = d * 3 * d + d * d + d * ff + ff * d
    assert layer == 12 * d * d == 7_077_888
    matmul_params = layers * layer + d * vocab
    assert matmul_params == 123_532_032
    # attention (flash, full score matrix): 2*b*h*s^2*(dh + dh) per layer
    attention = layers * 2 * 1 * heads * t * t * (64 + 64)
    assert attention == 38_654_705_664
    expected = 2 * matmul_params * t + attention
    assert expected == 291_648_307_200
    assert forward_flops(build_training(g, 1, 1024)) == expected
    assert forward_flops(build_forward(g, 1, 1024)) == expected
    # causal: useful attention = (s+1)/(2s) of it
    assert forward_flops(build_forward(g, 1, 1024), useful=True) == \
        2 * matmul_params * t + attention * (t + 1) / (2 * t)


# ---- c) naive O(s^2) vs flash O(s) ---------------------------------------------------------


def test_attention_bytes_scaling() -> None:
    m = get_model("llama-2-7b")
    s1, s2 = 1024, 2048

    def attn_ops(impl: Impl, s: int) -> OpList:
        return build_training(m, 1, s, impl).filter(lambda o: o.name.startswith("layers.attn.")
                                                    and o.kind != "matmul"
                                                    and o.name != "layers.attn.rope"
                                                    and o.name != "layers.attn.transpose")

    naive = Impl(attention="naive")
    a, b = attn_ops(naive, s1), attn_ops(naive, s2)
    # the score/softmax ops move b*h*s^2 elements: exactly 4x when s doubles
    for name in ("layers.attn.mask_scale", "layers.attn.softmax"):
        assert total(ops_named(b, name), "bytes") == 4 * total(ops_named(a, name), "bytes")
    # all of them (scores and PV also read q, k, v: O(s)) roughly quadruple
    assert 3.5 < total(b.phase("forward"), "bytes") / total(a.phase("forward"), "bytes") < 4
    # and so do the bytes they keep for backward (probabilities: O(s^2); q, k, v: O(s))
    assert 3.5 < total(b, "saved_bytes") / total(a, "saved_bytes") < 4

    flash = Impl(attention="flash")
    a, b = attn_ops(flash, s1), attn_ops(flash, s2)
    (core_a,), (core_b,) = ops_named(a, "layers.attn.core"), ops_named(b, "layers.attn.core")
    # q, k, v, out and the per-row log-sum-exp: all O(s), exactly 2x
    assert core_b.bytes == 2 * core_a.bytes
    assert core_b.saved_bytes == 2 * core_a.saved_bytes
    # at s = 2048, naive keeps far more per layer than flash
    naive_saved = total(attn_ops(naive, s2), "saved_bytes")
    assert naive_saved > 10 * core_b.total_saved_bytes


# ---- d) decode -----------------------------------------------------------------------------


_SHAPE = re.compile(r"^(\d+)x(\d+) @")


def matmul_weight_bytes(ops: OpList, act_bytes: float) -> float:
    """Weight bytes read by the matmuls: bytes read minus the [m, k] activation input."""
    out = 0.0
    for o in ops.filter(lambda o: o.kind == "matmul"):
        m, k = map(int, _SHAPE.match(o.shape).groups())  # type: ignore[union-attr]
        out += (o.bytes_read - m * k * act_bytes) * o.count
    return out


def test_decode_llama_2_7b() -> None:
    m = get_model("llama-2-7b")
    ops = build_decode(m, 1, 1024, Impl(dtype="bf16"))
    weights = matmul_weight_bytes(ops, 2)
    # every matmul weight is read once per step: all parameters but the embedding table
    # (decode gathers one row of it) and the norm weights; bf16 = 2 bytes each
    norms = (2 * m.num_layers + 1) * m.hidden_size
    assert weights == 2 * (m.params() - m.embedding_params() - norms)
    assert weights == pytest.approx(2 * (m.params() - m.embedding_params()), rel=1e-2)
    # the embedding table is 1.9% of the parameters: within 2.5% of 2 x params
    assert weights == pytest.approx(2 * m.params(), rel=2.5e-2)
    # KV cache: (context + 1 new) tokens of K and V per layer
    kv = total(ops.filter(lambda o: o.name == "layers.attn.core"), "bytes_read")
    assert kv == pytest.approx(1024 * kv_bytes_per_token(m, "bf16"), rel=1e-2)
    assert kv_bytes_per_token(m, "bf16") == 2 * 32 * 32 * 128 * 2  # K+V, layers, heads, dh
    # decode is memory-bound: well under 1 FLOP per byte
    assert ops.flops() / ops.bytes() < 2


def test_kv_bytes_per_token() -> None:
    # Llama-2-70B: 80 layers x 8 KV heads x (128 + 128) x 2 bytes
    assert kv_bytes_per_token(get_model("llama-2-70b"), "bf16") == 327_680
    assert kv_bytes_per_token(get_model("llama-2-70b"), "fp8") == 163_840
    # DeepSeek-V3 MLA: 61 layers x (kv_lora_rank 512 + rope dim 64) x 2 bytes
    assert kv_bytes_per_token(get_model("deepseek-v3"), "bf16") == 61 * (512 + 64) * 2 == 70_272


# ---- e) properties -----------------------------------------------------------------------------


@st.composite
def specs(draw: Any) -> ModelSpec:
    heads = draw(st.integers(1, 8))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    head_dim = draw(st.sampled_from([4, 8, 16]))
    style = draw(st.sampled_from(["llama", "gpt2", "bert", "gemma2", "mla"]))
    common: dict[str, Any] = {
        "name": "h", "vocab_size": draw(st.integers(8, 300)), "hidden_size": heads * head_dim,
        "num_layers": draw(st.integers(1, 4)), "num_heads": heads,
        "intermediate_size": draw(st.integers(4, 96)), "max_position_embeddings": 64,
    }
    drop = draw(st.sampled_from([0.0, 0.1]))
    if style == "gpt2":
        return ModelSpec(**common, family="gpt2", activation="gelu_new", position="learned",
                         tie_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                         hidden_dropout=drop, attention_dropout=drop, embedding_dropout=drop)
    if style == "bert":
        return ModelSpec(**common, family="bert", arch="encoder", position="learned",
                         tie_embeddings=True, qkv_bias=True, out_bias=True, mlp_bias=True,
                         final_norm=False, type_vocab_size=2, embedding_norm=True,
                         mlm_head=True, hidden_dropout=drop, attention_dropout=drop,
                         embedding_dropout=drop)
    experts = draw(st.sampled_from([0, 0, 4, 8]))
    moe = {"num_experts": experts,
           "experts_per_token": draw(st.integers(1, experts)),
           "moe_intermediate_size": draw(st.integers(4, 32))} if experts else {}
    if style == "mla":  # DeepSeek-V3 style: latent attention, shared expert, dense first layers
        if experts:
            moe |= {"num_shared_experts": draw(st.integers(0, 2)),
                    "first_dense_layers": draw(st.integers(0, common["num_layers"]))}
        return ModelSpec(**common, family="deepseek_v3", mlp="gated", activation="silu",
                         norm="rmsnorm", position="rope",
                         q_lora_rank=draw(st.sampled_from([None, 8, 24])),
                         kv_lora_rank=draw(st.sampled_from([4, 16])),
                         qk_nope_head_dim=draw(st.sampled_from([4, 8])),
                         qk_rope_head_dim=draw(st.sampled_from([2, 4])),
                         v_head_dim=draw(st.sampled_from([4, 8, 12])), **moe)
    window = draw(st.sampled_from([None, 4, 16]))
    return ModelSpec(**common, family="mixtral" if experts else style, num_kv_heads=kv,
                     mlp="gated", activation="silu" if style == "llama" else "gelu_tanh",
                     norm="rmsnorm", position="rope", sliding_window=window,
                     sliding_window_every=2 if style == "gemma2" else 1,
                     norms_per_layer=4 if style == "gemma2" else 2,
                     qkv_bias=draw(st.booleans()), **moe)


PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _attention_fwd(ops: OpList) -> float:
    return ops.phase("forward").filter(lambda o: o.kind == "attention").flops()


@PROPS
@given(specs(), st.integers(1, 4), st.integers(1, 64), st.sampled_from(["fp32", "bf16"]))
def test_train_flops_three_times_forward(spec: ModelSpec, batch: int, seq: int,
                                         dtype: str) -> None:
    # naive attention: every matmul-class op (linears, QK^T, PV) costs 2x forward backward
    ops = build_training(spec, batch, seq, Impl(attention="naive", dtype=dtype))
    fwd = forward_flops(ops)
    assert ops.flops(matmul_only=True) == pytest.approx(3 * fwd, rel=1e-12)
    # flash attention: its backward recomputes QK^T: 2*b*h*s^2*(3 d_qk + 2 d_v) against
    # 2*b*h*s^2*(d_qk + d_v) forward, 2.5x when d_qk = d_v (MLA: d_v differs)
    ops = build_training(spec, batch, seq, Impl(attention="flash", dtype=dtype))
    fwd, attn = forward_flops(ops), _attention_fwd(ops)
    dqk, dv = spec.head_size, spec.v_head_size
    attn_bwd = attn * (3 * dqk + 2 * dv) / (dqk + dv)
    assert ops.flops(matmul_only=True) == pytest.approx(3 * (fwd - attn) + attn + attn_bwd,
                                                        rel=1e-12)
    if dqk == dv:
        assert attn_bwd == pytest.approx(2.5 * attn, rel=1e-12)


@PROPS
@given(specs(), st.integers(1, 4), st.integers(1, 32),
       st.sampled_from([Impl(), Impl(attention="naive"), Impl(target="cpu", dtype="fp32"),
                        Impl(fused=True), Impl(attention="naive", target="cpu", dtype="fp32")]))
def test_scaling_properties(spec: ModelSpec, batch: int, seq: int, impl: Impl) -> None:
    ops = build_training(spec, batch, seq, impl)  # never raises for a valid spec
    assert all(o.flops >= 0 and o.bytes_read >= 0 and o.bytes_written >= 0
               and o.saved_bytes >= 0 and o.count >= 1 for o in ops)
    saved = ops.saved_bytes()
    assert saved > 0
    # more sequences or longer ones keep more activations
    assert build_training(spec, batch + 1, seq, impl).saved_bytes() > saved
    assert build_training(spec, batch, seq + 1, impl).saved_bytes() > saved
    # forward FLOPs are linear in batch (every op is per token or per sequence)
    double = build_training(spec, 2 * batch, seq, impl)
    assert forward_flops(double) == pytest.approx(2 * forward_flops(ops), rel=1e-12)
    assert forward_flops(ops) > 0
    build_forward(spec, batch, seq, impl, phase="prefill")
    if spec.arch == "decoder":
        build_decode(spec, batch, seq, impl)
    else:  # an encoder has no decode step: a clear error, not a made-up op list
        with pytest.raises(InputError, match="encoder"):
            build_decode(spec, batch, seq, impl)


@pytest.mark.parametrize("field", ["batch", "seq_len"])
@pytest.mark.parametrize("value", [0, -1])
def test_invalid_sizes_raise(field: str, value: int) -> None:
    args = {"batch": 1, "seq_len": 8, field: value}
    with pytest.raises(InputError, match=field):
        build_training(TINY, args["batch"], args["seq_len"])
    with pytest.raises(InputError):
        build_decode(TINY, 0, 8)


# ---- f) mixture of experts ---------------------------------------------------------------------


def test_moe_forward_flops_per_token() -> None:
    m = get_model("mixtral-8x7b")
    seq = 128
    ops = build_forward(m, 1, seq)
    # each token runs the router, its top-2 experts, attention and the LM head: 2 FLOPs per
    # active parameter (the embedding gather is free, attention is small at s = 128)
    per_token = forward_flops(ops) / seq
    assert per_token == pytest.approx(2 * m.active_params(), rel=5e-2)
    assert per_token < 0.4 * 2 * m.params()


def test_moe_decode_reads_active_experts_only() -> None:
    m = get_model("mixtral-8x7b")
    ops = build_decode(m, 1, 1024, Impl(dtype="bf16"))
    weights = matmul_weight_bytes(ops, 2)
    # batch 1: one token touches top-2 of 8 experts per layer, so it reads the active weights
    # only (the embedding table aside: one row is gathered)
    norms = (2 * m.num_layers + 1) * m.hidden_size
    assert weights == 2 * (m.active_params() - m.embedding_params() - norms)
    assert 2 * (m.active_params() - m.embedding_params() - norms) <= weights
    assert weights <= 2 * m.params() * 0.35
    assert weights == pytest.approx(2 * m.active_params(), rel=2e-2)
    # a large batch touches every expert: all the weights
    big = matmul_weight_bytes(build_decode(m, 256, 1024, Impl(dtype="bf16")), 2)
    assert big == pytest.approx(2 * (m.params() - m.embedding_params()), rel=1e-2)
