"""Training performance model: collectives against nccl-tests, pipeline arithmetic, scaling
story, run totals, search agreement with the reference step model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuplan.errors import InputError
from gpuplan.estimate.comm import bus_factor, collective_time
from gpuplan.estimate.memory import TrainConfig
from gpuplan.estimate.runs import run_totals, scaling_curve
from gpuplan.estimate.search import search
from gpuplan.estimate.training import step_time
from gpuplan.specs import get_device, get_model
from gpuplan.specs.cluster import default_cluster

GiB = 2**30


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 8) == 2 * 7 / 8
    assert bus_factor("all_gather", 8) == bus_factor("reduce_scatter", 8) == 7 / 8
    assert bus_factor("broadcast", 8) == 1 and bus_factor("all_reduce", 1) == 1


def test_allreduce_large_message_matches_nccl_tests_h200():
    # nccl-tests ring all-reduce, 8x H200, 16 GiB: 367 GB/s busbw (kernel_cases.csv)
    c = default_cluster(get_device("h200"), 8)
    t = collective_time("all_reduce", 16 * GiB, 8, c)
    assert t.busbw_bytes_per_s == pytest.approx(367e9, rel=0.05)


@pytest.mark.parametrize("size, measured_busbw", [
    (32 * 2**10, 1.44e9), (2**20, 39.93e9), (16 * 2**20, 219.89e9),
])
def test_small_messages_are_latency_bound(size, measured_busbw):
    # same source: busbw falls with the message size; we stay within 2x of each measurement
    c = default_cluster(get_device("h200"), 8)
    busbw = collective_time("all_reduce", size, 8, c).busbw_bytes_per_s
    assert measured_busbw / 2 < busbw < measured_busbw * 2


def test_hierarchical_allreduce_across_nodes_is_slower_per_gpu():
    c = default_cluster(get_device("h100"), 32)
    intra = collective_time("all_reduce", GiB, 8, c)
    inter = collective_time("all_reduce", GiB, 32, c)
    assert inter.time_s > intra.time_s
    # the inter-node stage moves 1/8 of the data per GPU over a 50 GB/s NIC
    assert inter.busbw_bytes_per_s < intra.busbw_bytes_per_s


def test_pipeline_bubble_is_p_minus_1_over_m_plus_p_minus_1():
    m, c = get_model("llama-2-13b"), default_cluster(get_device("a100"), 16)
    cfg = TrainConfig(micro_batch=1, seq_len=2048, tp=2, pp=4, dp=2, global_batch=32,
                      fused=True, dropout=False, zero=1, sp=True)
    r = step_time(m, c, cfg)
    n_micro, p = 16, 4
    assert r.bubble_fraction == pytest.approx((p - 1) / (n_micro + p - 1))
    inter = step_time(m, c, replace(cfg, virtual_stages=2))
    assert inter.bubble_fraction < r.bubble_fraction
    assert inter.step_time_s < r.step_time_s


def test_breakdown_and_contract():
    m, c = get_model("llama-3-8b"), default_cluster(get_device("h100"), 8)
    r = step_time(m, c, TrainConfig(micro_batch=1, seq_len=4096, dp=8, zero=1,
                                    global_batch=64, fused=True, dropout=False))
    j = r.to_json()
    for key in ("step_time_s", "tokens_per_s", "model_flops_per_s_per_gpu", "mfu",
                "comm_time_s", "bubble_fraction"):
        assert j[key] is not None
    assert r.step_time_s == pytest.approx(sum(r.breakdown.values()), rel=1e-9)
    assert r.tokens_per_s == pytest.approx(64 * 4096 / r.step_time_s)
    assert 0 < r.mfu < 1 and r.hfu >= r.mfu
    assert r.comm_exposed_s <= r.comm_time_s + 1e-12


def test_full_recompute_costs_a_forward():
    m, c = get_model("llama-3-8b"), default_cluster(get_device("h100"), 8)
    base = TrainConfig(micro_batch=1, seq_len=4096, dp=8, zero=3, global_batch=8, fused=True,
                       dropout=False)
    a, b = step_time(m, c, base), step_time(m, c, replace(base, recompute="full"))
    assert b.step_time_s > a.step_time_s
    assert b.hfu > b.mfu  # recomputation counts as hardware, not model, FLOPs
    assert b.hardware_flops_per_step == pytest.approx(4 / 3 * a.hardware_flops_per_step,
                                                      rel=0.03)


def test_layout_that_does_not_fit_is_still_timed():
    m, c = get_model("llama-2-70b"), default_cluster(get_device("a100"), 8)
    r = step_time(m, c, TrainConfig(micro_batch=1, seq_len=4096, dp=8, zero=0))
    assert not r.fits and r.step_time_s and r.mfu and r.tokens_per_s
    assert "would need" in r.assumptions["memory_verdict"]


def test_bad_layout_is_a_clear_error():
    m, c = get_model("llama-3-8b"), default_cluster(get_device("h100"), 8)
    with pytest.raises(InputError, match="gpus"):
        step_time(m, c, TrainConfig(micro_batch=1, seq_len=4096, dp=3))


def test_pcie_small_batch_scales_poorly_and_batch_or_nvlink_recovers():
    """The seeds' story: a large model with a small per-GPU batch on PCIe GPUs scales poorly;
    a bigger per-GPU batch (gradient accumulation) or NVLink recovers it."""
    m = get_model("gpt2-large")
    pcie = default_cluster(get_device("rtx-4090"), 8)
    small = TrainConfig(micro_batch=1, seq_len=1024, zero=0, fused=True, dropout=False)
    curve = scaling_curve(m, pcie, small, 8, overlap=False)
    eff8 = curve[-1]["efficiency"]
    assert curve[-1]["gpus"] == 8 and eff8 < 0.6
    assert "dp comm" in curve[-1]["why"]
    accum = replace(small, global_batch=16)  # 16 micro-batches per optimizer step per GPU
    assert scaling_curve(m, pcie, accum, 8, overlap=False)[-1]["efficiency"] > eff8 + 0.2
    nvlink = default_cluster(get_device("a100"), 8)
    assert scaling_curve(m, nvlink, small, 8, overlap=False)[-1]["efficiency"] > eff8 + 0.2


def test_run_totals_chinchilla_default_and_cost():
    m, c = get_model("llama-3-8b"), default_cluster(get_device("h100"), 8)
    r = step_time(m, c, TrainConfig(micro_batch=1, seq_len=4096, dp=8, zero=1,
                                    global_batch=64, fused=True, dropout=False))
    t = run_totals(m, r, c)
    assert t.tokens == 20 * m.params()
    assert t.gpu_hours == pytest.approx(t.tokens / r.tokens_per_s * 8 / 3600)
    assert t.cost_usd == pytest.approx(t.gpu_hours * c.device.cloud_usd_per_hour)
    assert t.energy_kwh == pytest.approx(t.gpu_hours * 700 * 0.8 * 1.2 / 1000)
    assert run_totals(m, r, c, tokens=1e9, usd_per_gpu_hour=2.0).cost_usd == pytest.approx(
        1e9 / r.tokens_per_s * 8 / 3600 * 2.0)


@pytest.mark.parametrize("model, gpus, gb", [("llama-3-8b", 16, 128), ("mixtral-8x7b", 16, 64),
                                             ("llama-2-13b", 32, 128), ("llama-3-70b", 16, 32)])
def test_search_agrees_with_step_time_and_only_returns_fitting_layouts(model, gpus, gb):
    m, c = get_model(model), default_cluster(get_device("h100"), gpus)
    r = search(m, c, TrainConfig(micro_batch=1, seq_len=4096, global_batch=gb, fused=True,
                                 dropout=False), top=5)
    assert r.evaluated > 1000 and r.ranked
    for (cfg, step), fast in zip(r.ranked, r.fast_estimates, strict=True):
        assert step.fits and step.memory.fits
        assert cfg.dp * cfg.tp * cfg.pp * cfg.cp == gpus
        # the search sums the very terms step_time and train_memory sum: equal to the last digit
        assert fast[0] == step.step_time_s
        assert fast[1] == step.memory.total_bytes
    times = [s.step_time_s for _, s in r.ranked]
    assert times == sorted(times)
    # tight layouts (within the memory model's band of capacity) are feasible, flagged;
    # 70B on 16 GPUs that fast fits for sure only with full recomputation
    if model == "llama-3-70b":
        assert all(cfg.recompute == "full" or s.memory.verdict == "tight" for cfg, s in r.ranked)
