"""Serving: the latency model's bounds and formulas, the simulator's invariants, cost arithmetic,
and the `gpuplan serve` JSON contract."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import main
from gpuplan.errors import GpuplanError, InputError
from gpuplan.estimate.latency import (
    compute_bound_batch,
    decode_s,
    latency,
    step_model,
)
from gpuplan.estimate.request_stream import parse_lengths, poisson_workload, trace_workload
from gpuplan.estimate.serving import kv_capacity, max_throughput, summarize
from gpuplan.estimate.serving_cost import api_comparison, gpu_cost
from gpuplan.estimate.serving_sim import Engine, simulate
from gpuplan.specs.api_prices import ApiPrice, builtin_api_prices, parse_api_prices
from gpuplan.specs.catalog import device_catalog, get_device, get_model
from gpuplan.specs.serving import ServeConfig

H100 = get_device("h100")
LLAMA8 = get_model("llama-3-8b")
SM = step_model(LLAMA8, H100, ServeConfig(weight_dtype="fp8"))
BLOCKS, _ = kv_capacity(LLAMA8, H100, ServeConfig(weight_dtype="fp8"), 32, 8192, 537_000_000)


# ---- latency model ----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 4096), context=st.integers(1, 32768),
       dev=st.sampled_from(["h100", "a100-sxm-80gb", "b200", "mi300x", "l4", "epyc-9654"]),
       wd=st.sampled_from(["fp32", "bf16", "fp8", "int8", "int4", "fp4"]))
def test_decode_never_faster_than_bytes_over_bandwidth(batch, context, dev, wd):
    d = get_device(dev)
    sm = step_model(LLAMA8, d, ServeConfig(weight_dtype=wd, kv_dtype="fp8"))
    t = decode_s(sm, batch, context)
    floor = (sm.weights_touched(batch) + batch * context * sm.kv_bytes_per_token) \
        / d.mem_bw_bytes_per_s
    assert t >= floor


def test_fp32_weights_are_read_at_4_bytes():
    sm = step_model(LLAMA8, H100, ServeConfig(weight_dtype="fp32", act_dtype="fp32"))
    untied_embedding = LLAMA8.vocab_size * LLAMA8.hidden_size
    assert sm.weight_read_bytes == pytest.approx(4 * (LLAMA8.params() - untied_embedding))


@pytest.mark.parametrize("dev", [d.name for d in device_catalog()
                                 if d.kind == "gpu" and d.capacity_bytes > 20e9])
def test_batch1_decode_between_weight_floor_and_1_8x(dev):
    """Single-GPU batch-1 decode of an 8B model: read-bound, within 1.8x of the floor."""
    sm = step_model(LLAMA8, get_device(dev), ServeConfig())
    lat = latency(sm, 1, 128, 128)
    assert lat.weight_read_floor_s <= lat.tpot_s <= 1.8 * lat.weight_read_floor_s


def test_moe_decode_reads_the_experts_the_batch_touches():
    m = get_model("mixtral-8x7b")
    sm = step_model(m, H100, ServeConfig())
    e, k = m.num_experts, m.experts_per_token
    # 1 token reads exactly its top-k experts; 4 tokens E(1-(1-k/E)^4) = 8(1-0.75^4) = 5.46875
    assert sm.weights_touched(1) == pytest.approx(
        sm.dense_weight_bytes + m.num_moe_layers * k * sm.expert_bytes)
    assert sm.weights_touched(4) == pytest.approx(
        sm.dense_weight_bytes + m.num_moe_layers * 5.46875 * sm.expert_bytes)
    assert sm.weights_touched(10_000) == pytest.approx(sm.weight_read_bytes)
    assert e * (1 - (1 - k / e) ** 4) == pytest.approx(5.46875)


def test_native_or_dequantized_weights_per_device():
    assert step_model(LLAMA8, H100, ServeConfig(weight_dtype="fp8")).compute_dtype == "fp8"
    a100 = get_device("a100-sxm-80gb")
    sm = step_model(LLAMA8, a100, ServeConfig(weight_dtype="fp8"))  # no fp8 tensor cores
    assert sm.compute_dtype == "bf16" and sm.dequant_ops_per_weight_byte > 0
    assert step_model(LLAMA8, get_device("b200"),
                      ServeConfig(weight_dtype="fp4")).compute_dtype == "fp4"
    assert step_model(LLAMA8, H100, ServeConfig(weight_dtype="int4")).compute_dtype == "bf16"
    wo = step_model(LLAMA8, H100, ServeConfig(weight_dtype="fp8", weight_only=True))
    assert wo.compute_dtype == "bf16"


def test_quantization_and_fp8_kv_cut_bytes():
    bf = step_model(LLAMA8, H100, ServeConfig())
    q4 = step_model(LLAMA8, H100, ServeConfig(weight_dtype="int4", kv_dtype="fp8"))
    assert q4.kv_bytes_per_token == pytest.approx(bf.kv_bytes_per_token / 2)
    assert q4.weight_read_bytes < 0.4 * bf.weight_read_bytes
    assert latency(q4, 1, 128, 128).tpot_s < latency(bf, 1, 128, 128).tpot_s


def test_paged_attention_reads_slower_than_contiguous():
    flash = step_model(LLAMA8, H100, ServeConfig())
    paged = step_model(LLAMA8, H100, ServeConfig(attention="paged"))
    assert decode_s(paged, 64, 4096) > decode_s(flash, 64, 4096)


def test_tensor_parallel_splits_weights_and_pays_all_reduces():
    m = get_model("llama-3-70b")
    tp1 = step_model(m, get_device("h200"), ServeConfig())
    tp4 = step_model(m, get_device("h200"), ServeConfig(tp=4))
    assert tp4.weight_read_bytes == pytest.approx(tp1.weight_read_bytes / 4, rel=0.01)
    assert tp4.overhead_s(1) > tp1.overhead_s(1)
    assert decode_s(tp4, 1, 1000) < decode_s(tp1, 1, 1000)


def test_compute_bound_batch_is_the_decode_ridge():
    b = compute_bound_batch(SM)
    assert b is not None and b > 1
    c, m = SM.linear_s(b, b)
    c1, m1 = SM.linear_s(b - 1, b - 1)
    assert c >= m and c1 < m1


def test_latency_identities():
    lat = latency(SM, 4, 256, 100)
    assert lat.e2e_latency_s == pytest.approx(lat.ttft_s + 99 * lat.tpot_s)
    assert lat.output_tokens_per_s == pytest.approx(4 * 100 / lat.e2e_latency_s)
    assert lat.decode_first_step_s <= lat.tpot_s <= lat.decode_last_step_s


def test_bad_serving_config_names_the_field():
    with pytest.raises(InputError, match="tp"):
        step_model(LLAMA8, H100, ServeConfig(tp=3))
    with pytest.raises(InputError, match="attention"):
        step_model(LLAMA8, H100, ServeConfig(attention="naive"))
    with pytest.raises(InputError, match="decoder"):
        step_model(get_model("bert-base"), H100, ServeConfig())


# ---- simulator invariants ---------------------------------------------------------------------

def _engine(**kw: object) -> Engine:
    return replace(Engine(kv_blocks=BLOCKS), **kw)  # type: ignore[arg-type]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 300), rate=st.floats(0.5, 500), seed=st.integers(0, 10**6),
       sched=st.sampled_from(["continuous", "static"]), chunked=st.booleans(),
       blocks=st.integers(70, 400), max_batch=st.integers(1, 64),
       max_tokens=st.integers(64, 4096))
def test_every_request_completes_once_and_kv_is_never_exceeded(n, rate, seed, sched, chunked,
                                                               blocks, max_batch, max_tokens):
    w = poisson_workload(n, rate, "uniform:1:600", "uniform:1:500", seed)
    e = Engine(kv_blocks=blocks, block_size=16, max_batch=max_batch, max_tokens=max_tokens,
               scheduler=sched, chunked_prefill=chunked)
    r = simulate(SM, w, e)
    assert (r.completions == 1).all()
    assert r.kv_peak_blocks <= blocks
    assert r.peak_concurrency <= max_batch
    assert (r.arrival_s <= r.admit_s).all() and (r.admit_s <= r.first_token_s).all()
    assert (r.first_token_s <= r.finish_s).all()
    s = summarize(r)
    assert s["completed_requests"] == n
    assert 0.0 <= s["kv_utilization"] <= 1.0


def test_continuous_never_below_static_throughput():
    for rate in (None, 20.0, 60.0):
        w = poisson_workload(600, rate, "uniform:64:1024", "uniform:16:512", seed=3)
        cont = summarize(simulate(SM, w, _engine(max_batch=128)))
        stat = summarize(simulate(SM, w, _engine(max_batch=128, scheduler="static")))
        assert cont["output_tokens_per_s"] >= stat["output_tokens_per_s"] * 0.999, rate


def test_latency_grows_with_load():
    p99 = []
    for rate in (5.0, 20.0, 40.0, 80.0, 200.0):
        w = poisson_workload(1500, rate, 512, "uniform:64:512", seed=7)
        s = summarize(simulate(SM, w, _engine(max_batch=64)))
        p99.append((s["e2e_latency_p99_s"], s["ttft_p99_s"]))
    for (e0, t0), (e1, t1) in itertools.pairwise(p99):
        assert e1 >= e0 and t1 >= t0, p99


def test_same_seed_same_result_other_seed_other_result():
    def run(seed: int) -> dict:
        return summarize(simulate(SM, poisson_workload(400, 30.0, "exponential:300",
                                                       "exponential:200", seed), _engine()))
    assert run(5) == run(5)
    assert run(5)["ttft_p99_s"] != run(6)["ttft_p99_s"]


def test_saturating_throughput_is_bounded_by_kv_and_max_batch():
    res, conc = max_throughput(SM, _engine(max_batch=32), 128, 128)
    assert conc == 32
    small = _engine(kv_blocks=80, block_size=16)  # 80 blocks / 16 per request = 5 at a time
    res, conc = max_throughput(SM, small, 128, 128)
    assert conc == 5 and res.kv_peak_blocks <= 80


def test_request_too_big_for_the_cache_is_an_input_error():
    w = poisson_workload(3, 1.0, 5000, 10, seed=0)
    with pytest.raises(InputError, match="prompt\\+output"):
        simulate(SM, w, Engine(kv_blocks=10, block_size=16))


def test_goodput_counts_only_requests_meeting_the_slos():
    w = poisson_workload(500, 40.0, 512, 128, seed=1)
    r = simulate(SM, w, _engine())
    s = summarize(r, slo_ttft_s=float(np.percentile(r.ttft_s, 50)))
    assert s["goodput_requests_per_s"] == pytest.approx(
        s["requests_per_s"] * s["slo_attainment"])
    assert 0.45 <= s["slo_attainment"] <= 0.55


# ---- workloads ----------------------------------------------------------------------------------

def test_length_distributions_and_errors():
    rng = np.random.default_rng(0)
    assert (parse_lengths("p", "512", 10, rng) == 512).all()
    u = parse_lengths("p", "uniform:10:20", 1000, rng)
    assert u.min() >= 10 and u.max() <= 20
    assert abs(parse_lengths("p", "exponential:100", 20000, rng).mean() - 100) < 5
    for bad in ("0", "uniform:5", "gamma:1:2", "x", "uniform:9:3", "-4"):
        with pytest.raises(InputError, match="p"):
            parse_lengths("p", bad, 3, rng)


def test_trace_file_parsing():
    w = trace_workload("prompt_tokens,arrival_s,output_tokens\n10,2.5,3\n20,0.5,4\n")
    assert list(w.arrival_s) == [0.0, 2.0] and list(w.prompt) == [20, 10]
    with pytest.raises(InputError, match="header"):
        trace_workload("a,b\n1,2\n")
    with pytest.raises(InputError, match="line 2"):
        trace_workload("arrival_s,prompt_tokens,output_tokens\n1,x,3\n")


# ---- cost ---------------------------------------------------------------------------------------

def test_gpu_cost_per_million_tokens():
    # $2/h for 1,000 tokens/s: 2 / 3600 / 1000 x 1e6 = $0.5556 per million
    c = gpu_cost(2.0, 1, 1000.0, 0.0)
    assert c["cost_per_million_tokens_usd"] == pytest.approx(0.5555556)
    assert gpu_cost(2.0, 4, 1000.0, 0.0)["usd_per_hour"] == 8.0


def test_api_break_even_load():
    p = ApiPrice(name="x", input_usd_per_mtok=1.0, output_usd_per_mtok=3.0, source="s",
                 date="2026")
    # a request of 1000 in + 500 out costs 0.001 + 0.0015 = $0.0025; $9/h = $0.0025/s
    # -> break-even at 1 request/s
    (row,) = api_comparison([p], "m", 9.0, 1000, 500, max_requests_per_s=10.0)
    assert row["break_even_requests_per_s"] == pytest.approx(1.0)
    assert row["gpu_ever_cheaper"] is True
    (row,) = api_comparison([p], "m", 9.0, 1000, 500, max_requests_per_s=0.5)
    assert row["gpu_ever_cheaper"] is False


def test_api_price_table_is_dated_and_sourced():
    prices = builtin_api_prices()
    assert prices and all(p.date and p.source for p in prices)
    with pytest.raises(GpuplanError, match="entry 1"):
        parse_api_prices('[[api]]\nname = "a"\ninput_usd_per_mtok = -1\n')


# ---- CLI contract -------------------------------------------------------------------------------

def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(["serve", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


BATCH_KEYS = {"ttft_s", "tpot_s", "e2e_latency_s", "output_tokens_per_s", "memory",
              "cost_per_million_tokens_usd", "compute_bound_batch"}
SIM_KEYS = {"completed_requests", "requests_per_s", "output_tokens_per_s", "ttft_p50_s",
            "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "queue_p99_s",
            "kv_utilization", "goodput_requests_per_s"}


def test_cli_serve_batch_contract(capsys):
    r = _json(capsys, "llama-3-8b", "--gpu", "h100", "--prompt-len", "512", "--output-len",
              "128", "--batch", "4")
    assert set(r) >= BATCH_KEYS
    assert isinstance(r["memory"]["total_bytes"], int)
    assert r["e2e_latency_s"] == pytest.approx(r["ttft_s"] + 127 * r["tpot_s"])
    assert r["assumptions"]["weight_dtype"] == "bf16"


def test_cli_serve_max_throughput_contract(capsys):
    r = _json(capsys, "llama-3-8b", "--gpu", "h100", "--weight-dtype", "fp8", "--prompt-len",
              "256", "--output-len", "64", "--max-throughput", "--max-batch", "64")
    assert BATCH_KEYS | {"batch"} <= set(r)
    assert r["batch"] == 64


def test_cli_serve_rate_contract(capsys):
    r = _json(capsys, "llama-3-8b", "--gpu", "h100", "--rate", "5", "--requests", "200",
              "--prompt-len", "uniform:64:512", "--output-len", "exponential:100",
              "--slo-ttft", "0.5", "--slo-tpot", "0.05", "--scheduler", "static")
    assert set(r) >= SIM_KEYS
    assert r["completed_requests"] == 200
    assert r["engine"]["scheduler"] == "static"


def test_cli_serve_works_for_a_cpu(capsys):
    r = _json(capsys, "qwen2.5-0.5b", "--gpu", "epyc-9654", "--prompt-len", "64",
              "--output-len", "32", "--usd-per-gpu-hour", "1.0")
    assert r["tpot_s"] > 0 and r["cost_per_million_tokens_usd"] > 0


@pytest.mark.parametrize("argv, field", [
    (["--tp", "3"], "tp"),
    (["--prompt-len", "uniform:1:5"], "--prompt-len"),
    (["--rate", "5", "--prompt-len", "gamma:3"], "--prompt-len"),  # the option, as typed
])
def test_cli_serve_bad_input_one_line_exit_2(argv, field):
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "serve", "llama-3-8b",
                        *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in p.stderr
