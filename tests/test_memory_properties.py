"""Properties of the memory planner that hold for every valid configuration (hypothesis).

Small random transformers (1-8 layers, 1-16 heads, GQA, Llama- or GPT-2-style, optionally MoE)
on random catalog devices: memory grows with batch and sequence; ZeRO-3 model states fall as the
data-parallel group grows; higher ZeRO stages and more recomputation never cost memory; the
breakdown sums exactly to the total; TP and PP split the weights; mixed precision and fp32 keep
the same 16 bytes per parameter with AdamW (ZeRO §3.1). Inference: the KV cache is exactly
linear in batch and context and TP splits it; quantization shrinks the weights; `max_batch` is
the largest batch that keeps the safety margin.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.estimate.inference import InferConfig, infer_memory
from gpuplan.estimate.memory import (
    STEP_COUNTER_BYTES,
    TrainConfig,
    train_memory,
)
from gpuplan.specs.catalog import device_catalog
from gpuplan.specs.model import ModelSpec

DEVICE = {d.name: d for d in device_catalog()}
"""drawn by name, so that a failing example prints one word, not the whole record"""

FAST = settings(max_examples=int(os.environ.get("PROP_EXAMPLES", 50)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def models(draw: st.DrawFn, moe: bool | None = None) -> ModelSpec:
    """A small but valid transformer: hidden = heads x head_dim, kv heads divide heads."""
    heads = draw(st.integers(1, 16))
    kv = draw(st.sampled_from([k for k in range(1, heads + 1) if heads % k == 0]))
    head_dim = draw(st.sampled_from([8, 16, 32, 64]))
    hidden = heads * head_dim
    inter = draw(st.integers(1, 32)) * 8
    family = draw(st.sampled_from(["llama", "gpt2"]))
    is_moe = draw(st.booleans()) if moe is None else moe
    experts = draw(st.integers(2, 8)) if is_moe else 0
    kw: dict[str, object] = dict(
        name="prop", vocab_size=draw(st.integers(64, 4096)), hidden_size=hidden,
        num_layers=draw(st.integers(1, 8)), num_heads=heads, num_kv_heads=kv,
        head_dim=head_dim, intermediate_size=inter,
        max_position_embeddings=4096,
        num_experts=experts,
        experts_per_token=draw(st.integers(1, experts)) if is_moe else 0,
        moe_intermediate_size=draw(st.integers(1, 16)) * 8 if is_moe else None,
    )
    if family == "llama":
        kw.update(family="llama", mlp="gated", activation="silu", norm="rmsnorm",
                  position="rope", tie_embeddings=draw(st.booleans()))
    else:
        kw.update(family="gpt2", mlp="plain", activation="gelu_tanh", norm="layernorm",
                  position="learned", tie_embeddings=True, qkv_bias=True, out_bias=True,
                  mlp_bias=True, hidden_dropout=draw(st.sampled_from([0.0, 0.1])))
    return ModelSpec(**kw)  # type: ignore[arg-type]


@st.composite
def train_cfgs(draw: st.DrawFn) -> TrainConfig:
    dp = draw(st.integers(1, 8))
    return TrainConfig(
        micro_batch=draw(st.integers(1, 4)), seq_len=draw(st.sampled_from([16, 64, 128, 256])),
        precision=draw(st.sampled_from(["fp32", "fp16-mixed", "bf16-mixed", "fp8-mixed"])),
        optimizer=draw(st.sampled_from(["adamw", "sgd", "adam8bit", "adafactor"])),
        zero=draw(st.integers(0, 3)), dp=dp,
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        attention=draw(st.sampled_from(["flash", "naive"])))


devices = st.sampled_from(sorted(DEVICE))
gpus = st.sampled_from(sorted(n for n, d in DEVICE.items() if d.kind == "gpu"))


def states(r) -> int:  # type: ignore[no-untyped-def]
    return r.per_gpu["weights"] + r.per_gpu["gradients"] + r.per_gpu["optimizer"]


# ---- training -------------------------------------------------------------------------------

@FAST
@given(models(), devices, train_cfgs(), st.integers(1, 4))
def test_memory_grows_with_micro_batch(m, dev, cfg, extra):
    d = DEVICE[dev]
    small = train_memory(m, d, cfg)
    big = train_memory(m, d, replace(cfg, micro_batch=cfg.micro_batch + extra))
    assert big.per_gpu["activations"] >= small.per_gpu["activations"]
    assert big.total_bytes >= small.total_bytes


@FAST
@given(models(), devices, train_cfgs(), st.sampled_from([2, 3, 4]))
def test_memory_grows_with_sequence(m, dev, cfg, factor):
    d = DEVICE[dev]
    short = train_memory(m, d, cfg)
    long = train_memory(m, d, replace(cfg, seq_len=cfg.seq_len * factor))
    assert long.per_gpu["activations"] >= short.per_gpu["activations"]
    assert long.total_bytes >= short.total_bytes


@FAST
@given(models(), gpus, train_cfgs(), st.integers(1, 64), st.booleans())
def test_zero3_states_fall_as_dp_doubles(m, dev, cfg, dp, fsdp):
    d = DEVICE[dev]
    z3 = replace(cfg, dp=dp, fsdp="full" if fsdp else "none", zero=3)
    a = train_memory(m, d, z3)
    b = train_memory(m, d, replace(z3, dp=2 * dp))
    assert states(b) < states(a)
    # each of the three is sharded: halving, up to integer rounding
    for k in ("weights", "gradients", "optimizer"):
        assert abs(2 * b.per_gpu[k] - a.per_gpu[k]) <= 2


@FAST
@given(models(), gpus, train_cfgs(), st.integers(2, 64))
def test_higher_zero_stage_never_costs_model_states(m, dev, cfg, dp):
    d = DEVICE[dev]
    by_stage = [states(train_memory(m, d, replace(cfg, dp=dp, zero=z))) for z in range(4)]
    assert by_stage == sorted(by_stage, reverse=True)
    assert by_stage[3] < by_stage[0]


@FAST
@given(models(), devices, train_cfgs())
def test_recompute_never_increases_activations(m, dev, cfg):
    d = DEVICE[dev]
    acts = [train_memory(m, d, replace(cfg, recompute=r)).per_gpu["activations"]
            for r in ("none", "selective", "full")]
    assert acts[0] >= acts[1] >= acts[2]


def valid_tp(m: ModelSpec, tp: int) -> int:
    """tp if it splits the heads and the kv heads (divisor or multiple), else 1."""
    ok = m.num_heads % tp == 0 and (m.kv_heads % tp == 0 or tp % m.kv_heads == 0)
    return tp if ok else 1


@FAST
@given(models(), devices, train_cfgs(), st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4]),
       st.sampled_from([1, 2]), st.booleans(), st.floats(0.0, 0.5))
def test_train_breakdown_sums_exactly(m, dev, cfg, tp, pp, v, offload, frag):
    d = DEVICE[dev]
    pp = pp if pp <= m.num_layers else 1
    cfg = replace(cfg, tp=valid_tp(m, tp), pp=pp, virtual_stages=v if pp > 1 else 1,
                  offload_optimizer=offload, fragmentation=frag)
    r = train_memory(m, d, cfg)
    assert set(r.per_gpu) == {"weights", "gradients", "optimizer", "activations", "other"}
    assert all(isinstance(v, int) and v >= 0 for v in r.per_gpu.values())
    assert all(isinstance(v, int) and v >= 0 for v in r.other_items.values())
    assert sum(r.per_gpu.values()) == r.total_bytes
    assert r.per_gpu["other"] == sum(r.other_items.values())
    assert r.fits == (r.total_bytes <= r.capacity_bytes)
    # the requirement is the fullest pipeline stage's
    assert max(s["total_bytes"] for s in r.details["stages"]) == r.total_bytes


@FAST
@given(models(), gpus, train_cfgs())
def test_tensor_parallel_splits_weights(m, dev, cfg):
    d = DEVICE[dev]
    if m.num_heads % 2 or (m.kv_heads % 2 and 2 % m.kv_heads):
        m = m.model_copy(update={"num_heads": 2 * m.num_heads, "num_kv_heads": 2 * m.kv_heads,
                                 "hidden_size": 2 * m.hidden_size})
    one = train_memory(m, d, cfg)
    two = train_memory(m, d, replace(cfg, tp=2))
    assert two.per_gpu["weights"] < one.per_gpu["weights"]
    # matrices halve, norms are replicated: never less than half
    assert 2 * two.per_gpu["weights"] >= one.per_gpu["weights"] - 2


@FAST
@given(models(), gpus, train_cfgs())
def test_pipeline_parallel_splits_weights_of_fullest_stage(m, dev, cfg):
    d = DEVICE[dev]
    if m.num_layers < 2:
        m = m.model_copy(update={"num_layers": 2})
    one = train_memory(m, d, cfg)
    two = train_memory(m, d, replace(cfg, pp=2))
    assert two.per_gpu["weights"] < one.per_gpu["weights"]
    assert max(s["total_bytes"] for s in two.details["stages"]) == two.total_bytes


@FAST
@given(models(), devices, st.integers(1, 4), st.sampled_from([64, 256]))
def test_adamw_sixteen_bytes_per_parameter_in_both_precisions(m, dev, mb, seq):
    """bf16-mixed 2 + 2 + (4 master + 8 moments) = fp32 4 + 4 + 8 = 16 bytes per parameter,
    plus torch's 4-byte step counter per parameter tensor (ZeRO §3.1)."""
    d = DEVICE[dev]
    expected = 16 * m.params() + STEP_COUNTER_BYTES * m.param_tensors()
    for prec in ("bf16-mixed", "fp32"):
        r = train_memory(m, d, TrainConfig(micro_batch=mb, seq_len=seq, precision=prec,
                                           optimizer="adamw"))
        assert abs(states(r) - expected) <= 3  # three int() truncations
        assert r.details["params_per_gpu"] == m.params()


# ---- inference ------------------------------------------------------------------------------

@st.composite
def infer_cfgs(draw: st.DrawFn) -> InferConfig:
    return InferConfig(batch=draw(st.integers(1, 64)), context=draw(st.integers(1, 8192)),
                       weight_dtype=draw(st.sampled_from(["bf16", "fp16", "fp8", "int8",
                                                          "int4"])),
                       kv_dtype=draw(st.sampled_from(["bf16", "fp8"])),
                       margin=draw(st.sampled_from([0.0, 0.05, 0.1, 0.2])))


@FAST
@given(models(), gpus, infer_cfgs(), st.integers(1, 16), st.integers(1, 16))
def test_kv_cache_exactly_linear_in_batch_and_context(m, dev, cfg, kb, kc):
    d = DEVICE[dev]
    kv = infer_memory(m, d, cfg).per_gpu["kv_cache"]
    assert infer_memory(m, d, replace(cfg, batch=cfg.batch * kb)).per_gpu["kv_cache"] == kb * kv
    assert infer_memory(m, d, replace(cfg, context=cfg.context * kc)).per_gpu["kv_cache"] == \
        kc * kv
    unit = infer_memory(m, d, replace(cfg, batch=1, context=1)).per_gpu["kv_cache"]
    assert kv == cfg.batch * cfg.context * unit


@FAST
@given(models(), gpus, infer_cfgs())
def test_max_batch_is_the_largest_that_keeps_the_margin(m, dev, cfg):
    d = DEVICE[dev]
    r = infer_memory(m, d, cfg)
    assert r.max_batch is not None
    if r.max_batch == 0:
        assert not infer_memory(m, d, replace(cfg, batch=1)).fits_with_margin
        return
    at = infer_memory(m, d, replace(cfg, batch=r.max_batch))
    over = infer_memory(m, d, replace(cfg, batch=r.max_batch + 1))
    assert at.fits_with_margin and at.fits
    if r.max_batch < 1 << 20:
        assert not over.fits_with_margin


@FAST
@given(models(), gpus, infer_cfgs())
def test_max_context_is_the_largest_that_keeps_the_margin(m, dev, cfg):
    d = DEVICE[dev]
    r = infer_memory(m, d, cfg)
    if not r.max_context or r.max_context >= 1 << 24:
        return
    assert infer_memory(m, d, replace(cfg, context=r.max_context)).fits_with_margin
    assert not infer_memory(m, d, replace(cfg, context=r.max_context + 1)).fits_with_margin


@FAST
@given(models(), gpus, infer_cfgs())
def test_quantized_weights_shrink(m, dev, cfg):
    d = DEVICE[dev]
    w = [infer_memory(m, d, replace(cfg, weight_dtype=t)).per_gpu["weights"]
         for t in ("bf16", "fp8", "int4")]
    assert w[0] > w[1] > w[2]


@FAST
@given(models(), gpus, infer_cfgs())
def test_tensor_parallel_halves_kv_cache(m, dev, cfg):
    d = DEVICE[dev]
    if m.kv_heads % 2:
        m = m.model_copy(update={"num_heads": 2 * m.num_heads, "num_kv_heads": 2 * m.kv_heads,
                                 "hidden_size": 2 * m.hidden_size})
    one = infer_memory(m, d, cfg).per_gpu["kv_cache"]
    two = infer_memory(m, d, replace(cfg, tp=2)).per_gpu["kv_cache"]
    assert 2 * two == one


@FAST
@given(models(), gpus, infer_cfgs())
def test_infer_breakdown_sums_exactly(m, dev, cfg):
    d = DEVICE[dev]
    r = infer_memory(m, d, cfg)
    assert set(r.per_gpu) == {"weights", "kv_cache", "activations", "other"}
    assert sum(r.per_gpu.values()) == r.total_bytes
    assert r.per_gpu["other"] == sum(r.other_items.values())


# ---- bad input ------------------------------------------------------------------------------

@FAST
@given(models(), gpus)
def test_bad_input_raises_input_error(m, dev):
    d = DEVICE[dev]
    with pytest.raises(InputError, match="batch"):
        infer_memory(m, d, InferConfig(batch=0, context=128))
    with pytest.raises(InputError, match="micro_batch"):
        train_memory(m, d, TrainConfig(micro_batch=0, seq_len=128))
    bad_tp = next(t for t in range(2, 64) if m.num_heads % t)
    with pytest.raises(InputError, match="tp"):
        infer_memory(m, d, InferConfig(batch=1, context=128, tp=bad_tp))
    with pytest.raises(InputError, match="tp"):
        train_memory(m, d, TrainConfig(micro_batch=1, seq_len=128, tp=bad_tp))
