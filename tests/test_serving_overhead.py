"""Serving latency mechanisms added for decode overhead and long context: execution modes
(CUDA-graph replay, eager host dispatch on a GPU, eager on a CPU), NCCL's LL all-reduce for
small messages, serial dequantization, the serving attention kernel, and the measured decode
check's pieces (`gpuplan bench --only decode`)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.estimate.latency import (
    FLOPS_PER_INSTRUCTION,
    GRAPH_KERNEL_GAP_S,
    KERNELS_PER_LAYER,
    _allreduce_ll,
    decode_s,
    latency,
    serving_efficiency,
    step_model,
)
from gpuplan.measure.bench import parse_only
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.serving import ServeConfig

H100, A100 = get_device("h100"), get_device("a100-sxm-80gb")
LLAMA8 = get_model("llama-3-8b")


def test_graph_mode_pays_a_gap_per_kernel_not_a_launch():
    sm = step_model(LLAMA8, H100, ServeConfig())
    assert sm.execution == "graph" and sm.dispatch_s == 0.0
    # tp 1: no all-reduce; 32 layers x 9 kernels x 0.5 µs = 144 µs
    assert sm.overhead_s(1) == pytest.approx(32 * KERNELS_PER_LAYER * GRAPH_KERNEL_GAP_S)
    assert sm.overhead_s(1) == pytest.approx(144e-6)


def test_eager_gpu_step_is_the_longer_of_gpu_work_and_host_dispatch():
    sm = step_model(LLAMA8, H100, ServeConfig(fused=False))
    assert sm.execution == "eager-gpu"
    slow_host = replace(sm, eff=replace(sm.eff, kernel_overhead_s=1e-3))
    # 1 ms per op: the host's dispatch is far longer than the GPU's work, the step equals it
    assert decode_s(slow_host, 1, 128) == pytest.approx(32 * sm.kernels_per_layer * 1e-3)
    fast_host = replace(sm, eff=replace(sm.eff, kernel_overhead_s=0.0))
    assert decode_s(sm, 1, 128) == pytest.approx(
        max(decode_s(fast_host, 1, 128), sm.dispatch_s))


@settings(max_examples=20, deadline=None)
@given(per_op=st.floats(1e-7, 1e-3), ops=st.floats(5, 200))
def test_eager_cpu_dispatch_adds_to_the_work(per_op, ops):
    cpu = get_device("epyc-9654")
    cfg = ServeConfig(weight_dtype="fp32", kv_dtype="fp32", act_dtype="fp32", fused=False)
    sm = step_model(LLAMA8, cpu, cfg, ops_per_layer=ops)
    assert sm.execution == "eager-cpu" and sm.kernels_per_layer == ops
    with_cost = replace(sm, eff=replace(sm.eff, kernel_overhead_s=per_op))
    free = replace(sm, eff=replace(sm.eff, kernel_overhead_s=0.0))
    extra = decode_s(with_cost, 1, 64) - decode_s(free, 1, 64)
    assert extra == pytest.approx(32 * ops * per_op, rel=1e-9)


def test_nccl_ll_all_reduce_latency_is_nccls_model():
    # NCCL tuning.cc: Ring/LL baseLat 6.6 µs + 2(n-1) x 0.6 µs on NVLink; 2 all-reduces a layer
    lat, per_token = _allreduce_ll(H100, 8, 8192)
    assert lat == pytest.approx(2 * (6.6e-6 + 14 * 0.6e-6))
    assert per_token > 0
    assert _allreduce_ll(H100, 1, 8192) == (0.0, 0.0)


def test_tp_comm_takes_the_faster_protocol_per_message():
    sm = step_model(get_model("llama-3-70b"), H100, ServeConfig(tp=8))
    (a, b), (c, d) = sm.allreduce_s, sm.allreduce_ll_s
    assert c < a and d > b  # LL: less latency, less bandwidth
    for tokens in (1, 64, 4096, 65536):
        assert sm.comm_s(tokens) == pytest.approx(
            sm.layers * min(a + b * tokens, c + d * tokens))
    assert sm.comm_s(1) == pytest.approx(sm.layers * (c + d))  # small: LL
    assert sm.comm_s(65536) == pytest.approx(sm.layers * (a + b * 65536))  # large: Simple


def test_weight_only_dequantization_adds_to_the_weight_reads():
    cfg = ServeConfig(weight_dtype="int4", weight_only=True)
    sm = step_model(LLAMA8, A100, cfg)
    plain = replace(sm, dequant_ops_per_weight_byte=0.0)
    rate = A100.peak("fp32") * sm.eff.vector_ceiling / FLOPS_PER_INSTRUCTION
    dequant = sm.weights_touched(1) * sm.dequant_ops_per_weight_byte / rate
    comp, mem = sm.linear_s(1, 1)
    comp0, mem0 = plain.linear_s(1, 1)
    assert mem == pytest.approx(mem0 + dequant) and comp == pytest.approx(comp0 + dequant)
    # so a weight-only int4 step sits above its (smaller) weight-read floor by more than bf16
    r4 = latency(sm, 1, 8, 64)
    r16 = latency(step_model(LLAMA8, A100, ServeConfig()), 1, 8, 64)
    assert r4.tpot_s / r4.weight_read_floor_s > r16.tpot_s / r16.weight_read_floor_s


def test_serving_attention_is_the_devices_fastest_measured_kernel():
    h = serving_efficiency(H100, "fp8")
    assert h.attention_kernel == "fa3" and h.attention_ceiling == pytest.approx(0.52)
    a = serving_efficiency(A100, "bf16")  # no FA3 on Ampere: falls back to FA2
    assert a.attention_ceiling == pytest.approx(0.55)


def test_fp4_factor_applies_to_gemms_not_to_attention():
    b200 = get_device("b200")
    fp4 = step_model(LLAMA8, b200, ServeConfig(weight_dtype="fp4", kv_dtype="fp8"))
    fp8 = step_model(LLAMA8, b200, ServeConfig(weight_dtype="fp8", kv_dtype="fp8"))
    assert fp4.eff.end_to_end < fp8.eff.end_to_end
    assert fp4.attention_rates == pytest.approx(fp8.attention_rates)


def test_bench_decode_brings_the_profile_it_predicts_from():
    assert parse_only("decode", None) == ("matmul", "memory", "decode")
    assert "decode" not in parse_only(None, None)  # opt-in: it needs transformers and time


def test_eager_ops_counted_from_the_real_model_scale_with_layers():
    pytest.importorskip("transformers")
    from gpuplan.measure.decode import OVERHEAD_CONFIG, count_step_ops

    two = count_step_ops(config={**OVERHEAD_CONFIG, "num_hidden_layers": 2})
    four = count_step_ops(config={**OVERHEAD_CONFIG, "num_hidden_layers": 4})
    per_layer = (four - two) / 2
    # a Llama layer dispatches at least its 7 linears, 2 norms, RoPE, attention and the cache
    assert per_layer >= 20 and per_layer == int(per_layer)
    assert two - 2 * per_layer > 0  # embedding, final norm, head outside the layers


def test_hf_prefill_computes_the_head_for_every_prompt_position():
    cpu = get_device("epyc-9654")
    cfg = ServeConfig(weight_dtype="fp32", kv_dtype="fp32", act_dtype="fp32", fused=False)
    last = step_model(LLAMA8, cpu, cfg)
    every = step_model(LLAMA8, cpu, replace(cfg, logits_all_positions=True))
    from gpuplan.estimate.latency import _linear_cached, prefill_s

    _, _, rate = _linear_cached(last, 2 * 128)
    # 2 prompts of 128: 255 more head rows, 2 x 4096 x 128256 FLOPs each, at the linear rate
    extra = (2 * 128 - 2) * last.head_flops_per_logit / rate
    assert prefill_s(every, 2, 128) - prefill_s(last, 2, 128) == pytest.approx(extra, rel=1e-9)
    assert last.head_flops_per_logit == 2 * 4096 * 128256


def test_eager_matmul_count_follows_the_checkpoint_layout():
    from gpuplan.estimate.latency import matmuls_per_step

    assert matmuls_per_step(LLAMA8, fused=True) == 4 * 32 + 1  # an engine's fused QKV, gate/up
    assert matmuls_per_step(LLAMA8, fused=False) == 7 * 32 + 1  # q, k, v, o, gate, up, down
    gpt2 = get_model("gpt2")  # c_attn (fused QKV), c_proj, c_fc, mlp c_proj
    assert matmuls_per_step(gpt2, fused=False) == 4 * 12 + 1


def test_per_op_cost_amid_weight_streams_is_measured_and_hooks_removed():
    pytest.importorskip("transformers")
    from gpuplan.measure.decode import OVERHEAD_CONFIG, eager_op_overhead

    stream = {**OVERHEAD_CONFIG, "hidden_size": 96, "intermediate_size": 192}
    r = eager_op_overhead(steps=3, repeats=2, stream_config=stream)
    assert len(r["per_op_runs_s"]) == 2 and all(x >= 0 for x in r["per_op_runs_s"])
    assert r["time_s"] >= 0 and r["quiet_time_s"] > 0 and r["ops_per_step"] > 0
    assert "streaming" in r["what"]
