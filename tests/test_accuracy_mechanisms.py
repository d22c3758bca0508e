"""Step-time mechanisms of issue 10: GEMM tile/wave quantization, attention kernel ceilings by
device and implementation, framework profiles, and scale-up topology in the collective model."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.errors import InputError, UnknownNameError
from gpuplan.estimate.comm import collective_time
from gpuplan.estimate.efficiency import (
    auto_retime,
    framework_efficiency,
    stack_class,
    training_efficiency,
)
from gpuplan.estimate.efficiency_attention import (
    ATTENTION_PRIOR,
    FA1_SPEED_VS_FA2,
    attention_ceiling,
    length_factor,
)
from gpuplan.estimate.efficiency_gemm import gemm_dims, quantization_efficiency, shape_efficiency
from gpuplan.estimate.memory import TrainConfig
from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import (
    NVLINK_RING_EFFICIENCY,
    PCIE_EFFICIENCY,
    SCALE_UP_LATENCY_S,
    default_cluster,
    scale_up_group,
)
from gpuplan.specs.framework import (
    DEFAULT_FRAMEWORK,
    framework_names,
    get_framework,
    resolve_framework,
)

GB = 1e9

# ---- GEMM quantization ------------------------------------------------------------------------


def test_gemm_dims_parse_the_builders_shape_strings():
    assert gemm_dims("4096x4096 @ 4096x14336") == (4096, 14336, 4096)
    assert gemm_dims("b2 h16/4 s2048x2048 d128/128") is None
    assert shape_efficiency("b2 h16 s2048", 132) == 1.0


def test_full_waves_of_whole_tiles_waste_nothing():
    # 132 tiles of 128 x 256 = exactly one wave on 132 SMs
    assert quantization_efficiency(128 * 132, 256, 132) == 1.0


def test_wave_quantization_4096_square_on_h100():
    # 128x256 tiles: 32 x 16 = 512 tiles, ceil(512 / 132) = 4 waves -> 512 / 528 of the slots
    assert quantization_efficiency(4096, 4096, 132) == pytest.approx(512 / 528)


def test_tile_quantization_of_a_thin_matrix():
    # M = 64 rows: the best tile is 64 x 128; N = 128 -> 1 tile on 108 SMs: 1/108 of a wave
    assert quantization_efficiency(64, 128, 108) == pytest.approx(1 / 108)


@given(st.integers(1, 70000), st.integers(1, 70000), st.integers(1, 200))
def test_quantization_is_a_share(m, n, sms):
    e = quantization_efficiency(m, n, sms)
    assert 0 < e <= 1


# ---- attention kernels ------------------------------------------------------------------------


def test_attention_ceiling_by_device_and_kernel():
    h100 = get_device("h100")
    fa2, fa3, cudnn = (attention_ceiling(h100, k)[0] for k in ("fa2", "fa3", "cudnn"))
    assert fa3 > cudnn > fa2  # FlashAttention-3 paper Fig. 5 ordering at seq >= 2k
    a100 = get_device("a100")
    assert attention_ceiling(a100, "fa3")[0] == attention_ceiling(a100, "fa2")[0] == 0.55
    assert attention_ceiling(a100, "sdpa")[0] == 0.55  # SDPA dispatches to FA2 kernels
    assert attention_ceiling(get_device("b200"), "fa2") == (
        ATTENTION_PRIOR, "attention 50% prior (no fa2 measurement for B200)")
    with pytest.raises(InputError):
        attention_ceiling(h100, "fa9")


def test_flashattention1_runs_at_half_the_fa2_ceiling():
    """fa1 (FlashAttention-1 and the Triton kernel of its generation) = FA1_SPEED_VS_FA2 x the
    device's FA2 ceiling (Dao 2023: FA2 about 2x FA1), or the device's own fa1 measurement."""
    for name, fa2 in (("a100", 0.55), ("h100", 0.31)):
        share, src = attention_ceiling(get_device(name), "fa1")
        assert share == pytest.approx(FA1_SPEED_VS_FA2 * fa2) and "FA2 about 2x FA1" in src
    a100 = get_device("a100")
    measured = a100.model_copy(update={"ceilings": {**a100.ceilings, "attention_fa1": 0.3}})
    assert attention_ceiling(measured, "fa1")[0] == 0.3
    assert attention_ceiling(get_device("b200"), "fa1")[0] == FA1_SPEED_VS_FA2 * ATTENTION_PRIOR


def test_attention_length_factor_reproduces_the_sweep_it_was_fitted_to():
    """keys / (keys + overhead): the Triton tutorial's non-causal forward, 1k..16k tokens,
    relative to its 16k rate (141.4, 159.7, 160.6, 163.4, 166.6 TFLOP/s), within 4 %; causal
    calls pay the diagonal tiles; unknown lengths get 1; longer is never slower."""
    measured = {1024: 141.41, 2048: 159.68, 4096: 160.63, 8192: 163.40, 16384: 166.63}
    for n, tflops in measured.items():
        model = length_factor(n, False, False) / length_factor(16384, False, False)
        assert model == pytest.approx(tflops / measured[16384], rel=0.04)
    assert length_factor(1024, True, False) < length_factor(1024, False, False)
    assert length_factor(1024, False, True) < length_factor(1024, False, False)
    assert length_factor(0, True, True) == 1.0
    keys = [2.0**k for k in range(6, 20)]
    assert all(length_factor(a, True, True) < length_factor(b, True, True)
               for a, b in itertools.pairwise(keys))


def test_attention_ops_carry_their_kernel_key_loop_and_the_factor_is_off_by_default():
    """Each flash-attention op records the keys one call loops over (causal: about s/2; split
    over cp ring steps under context parallelism); the roofline applies the length factor only
    when asked (not kept by leave-one-family-out, stop 20)."""
    from gpuplan.estimate.efficiency import default_efficiency
    from gpuplan.estimate.roofline import roofline
    from gpuplan.estimate.training import training_ops
    from gpuplan.ops.impl import train_impl

    m, h100 = get_model("llama-3-8b"), get_device("h100")
    cfg = TrainConfig(micro_batch=1, seq_len=8192, tp=2, cp=4, sp=True)
    ops = [o for o in training_ops(m, cfg, train_impl(cfg, "gpu")) if o.kind == "attention"]
    assert ops and all(o.meta["kernel_keys"] == pytest.approx((8192 + 1) / 2 / 4) and
                       o.meta["causal"] == 1.0 for o in ops)
    eff = default_efficiency(h100)
    assert not eff.attention_length
    off = roofline(ops, h100, eff).total_time_s
    on = roofline(ops, h100, replace(eff, attention_length=True)).total_time_s
    slowest = length_factor((8192 + 1) / 8, True, True)  # the backward's, below the forward's
    assert off < on <= off / slowest * (1 + 1e-9)


def test_stated_attention_kernel_replaces_the_profiles():
    foundry = get_framework("llm-foundry")
    assert foundry.with_attention_kernel(None) == foundry == foundry.with_attention_kernel(" ")
    old = foundry.with_attention_kernel("FA1")
    assert old.attention_kernel == "fa1" and old.describe()["attention_kernel"] == "fa1"
    eff = framework_efficiency(get_device("h100"), old)
    assert eff.attention_ceiling == pytest.approx(0.155)
    with pytest.raises(InputError, match="--attention-kernel"):
        foundry.with_attention_kernel("fa9")


def test_ceilings_are_sourced_shares():
    for name in ("a100", "h100", "h200", "b200", "gb200", "mi300x"):
        d = get_device(name)
        assert d.ceilings, name
        for key, share in d.ceilings.items():
            assert 0 < share <= 1
            assert f"ceiling.{key}" in d.provenance


def test_matmul_ceiling_comes_from_the_device_file():
    assert training_efficiency(get_device("h100")).matmul_ceiling == 0.803
    assert training_efficiency(get_device("mi300x")).matmul_ceiling == 0.514


# ---- framework profiles -----------------------------------------------------------------------


def test_every_framework_profile_loads_and_is_sourced():
    assert set(framework_names()) >= {"megatron", "fsdp", "deepspeed", "llm-foundry", "hf"}
    for name in framework_names():
        fw = get_framework(name)
        assert fw.name == name and fw.source and fw.date
        assert 0 <= fw.tp_comm_overlap <= 1
    assert DEFAULT_FRAMEWORK == "auto"
    assert get_framework(None).name == "hf" and get_framework(None).chosen_by
    with pytest.raises(UnknownNameError):
        get_framework("jax")


@pytest.mark.parametrize(("layout", "stack"), [
    ({}, "hf"), ({"dp": 8, "zero": 1}, "deepspeed"), ({"dp": 8, "zero": 2}, "deepspeed"),
    ({"dp": 8, "fsdp": "full"}, "fsdp"), ({"dp": 8, "zero": 3}, "deepspeed"),
    ({"tp": 2}, "megatron"), ({"pp": 2}, "megatron"), ({"cp": 2}, "megatron"),
    ({"tp": 2, "fsdp": "full"}, "fsdp"), ({"pp": 4, "cp": 2, "fsdp": "full"}, "fsdp"),
    ({"tp": 2, "zero": 3}, "megatron"), ({"sp": True, "tp": 2}, "megatron"),
])
def test_auto_framework_follows_the_layout(layout, stack):
    cfg = TrainConfig(**layout)
    fw = resolve_framework(None, cfg)
    assert fw.name == stack and fw.chosen_by.startswith("auto")
    assert fw.describe()["chosen"] == fw.chosen_by
    assert resolve_framework("auto", cfg) == fw
    named = resolve_framework("llm-foundry", cfg)  # a named stack is never overridden
    assert named.name == "llm-foundry" and not named.chosen_by


def test_auto_retime_keeps_the_users_kernels():
    h100 = get_device("h100")
    job = TrainConfig()  # kernels not stated: each layout's stack decides
    cfg, eff = auto_retime(h100, job)(TrainConfig(tp=2, fused=False))
    assert cfg.fused and eff.attention_kernel == "cudnn"  # megatron fuses; cuDNN attention
    cfg, eff = auto_retime(h100, job)(TrainConfig(dp=8, fused=True))
    assert not cfg.fused and eff.attention_kernel == "sdpa"  # hf, with the user's kernels
    cfg, _ = auto_retime(h100, TrainConfig(fused=False))(TrainConfig(tp=2))
    assert cfg.fused is False  # --no-fused stated: eager even where megatron fuses
    cfg, _ = auto_retime(h100, TrainConfig(fused=True))(TrainConfig(dp=8))
    assert cfg.fused is True


def test_framework_sets_the_attention_kernel():
    h100 = get_device("h100")
    mega = framework_efficiency(h100, get_framework("megatron"))
    foundry = framework_efficiency(h100, get_framework("llm-foundry"))
    assert (mega.attention_kernel, mega.attention_ceiling) == ("cudnn", 0.49)
    assert (foundry.attention_kernel, foundry.attention_ceiling) == ("fa2", 0.31)
    assert mega.param_gather_overlap and not foundry.param_gather_overlap


def test_searched_layouts_keep_the_stated_overlaps():
    """gpuplan train --search with --overlap: each layout's inferred stack takes the stated
    overlaps, as `train` on that layout does (Framework.with_overlap)."""
    h100 = get_device("h100")
    _, eff = auto_retime(h100, TrainConfig(), "grad")(TrainConfig(tp=2, sp=True, zero=1))
    assert eff.grad_reduce_overlap and not eff.param_gather_overlap
    assert eff.tp_overlap(sp=True, tp=2) == 0.0
    _, same = auto_retime(h100, TrainConfig())(TrainConfig(tp=2, sp=True, zero=1))
    assert same.param_gather_overlap and same.tp_overlap(sp=True, tp=2) == pytest.approx(0.5)


def _zero1_step(eff_update: dict[str, object]):
    m, c = get_model("llama-3-8b"), default_cluster(get_device("h100"), 16)
    cfg = TrainConfig(micro_batch=1, seq_len=4096, dp=8, tp=2, zero=1, sp=True, fused=True,
                      global_batch=16, dropout=False)
    eff = replace(training_efficiency(c.device), **eff_update)
    return step_time(m, c, cfg, eff)


def test_overlaps_only_hide_communication():
    base = _zero1_step({})
    hidden = _zero1_step({"tp_comm_overlap": 1.0, "param_gather_overlap": True})
    assert base.breakdown["tp_comm"] > 0 and hidden.breakdown["tp_comm"] == 0
    assert hidden.breakdown["dp_comm_exposed"] <= base.breakdown["dp_comm_exposed"]
    assert hidden.breakdown["compute"] == pytest.approx(base.breakdown["compute"])
    assert hidden.step_time_s < base.step_time_s


def test_unoverlapped_gradient_reduction_is_exposed_in_full():
    """Megatron-LM without --overlap-grad-reduce reduces the gradients after the backward: the
    exposed DP time is then the whole reduce-scatter plus the parameter all-gather (the
    collectives' own times from the step's list), and nothing else in the step moves."""
    hidden = _zero1_step({})
    after = _zero1_step({"grad_reduce_overlap": False})
    dp = [c["time_s"] for c in after.collectives if c["op"] in ("reduce_scatter", "all_gather")
          and c["group"] == 8]
    assert len(dp) == 2
    assert after.breakdown["dp_comm_exposed"] == pytest.approx(sum(dp), rel=1e-12)
    assert hidden.breakdown["dp_comm_exposed"] < after.breakdown["dp_comm_exposed"]
    assert after.breakdown["compute"] == pytest.approx(hidden.breakdown["compute"])
    assert after.step_time_s - hidden.step_time_s == pytest.approx(
        after.breakdown["dp_comm_exposed"] - hidden.breakdown["dp_comm_exposed"]
        - hidden.breakdown["overlap_slowdown"] + after.breakdown["overlap_slowdown"], rel=1e-9)
    assert "exposed after the last micro-batch" in after.assumptions["overlap"]


def test_megatron_lm_defaults_overlap_nothing_the_recipes_overlap():
    """The megatron-lm profile is Megatron-LM's argument defaults: no --overlap-grad-reduce,
    --overlap-param-gather or --tp-comm-overlap; its kernels are the megatron profile's, and
    its end-to-end class the megatron one except on FP8 GPUs (efficiency.stack_class)."""
    h100 = get_device("h100")
    own, recipe = get_framework("megatron-lm"), get_framework("megatron")
    eff = framework_efficiency(h100, own)
    assert not eff.grad_reduce_overlap and not eff.param_gather_overlap
    assert eff.tp_overlap(sp=True, tp=8) == 0.0
    assert framework_efficiency(h100, recipe).tp_overlap(sp=True, tp=8) == pytest.approx(7 / 8)
    assert (own.fused, own.attention_kernel, own.grad_dtype, own.data_parallel) == (
        recipe.fused, recipe.attention_kernel, recipe.grad_dtype, recipe.data_parallel)
    a100 = get_device("a100-sxm-80gb")
    assert stack_class(own.end_to_end_class, a100) == stack_class(recipe.end_to_end_class, a100)
    assert stack_class(own.end_to_end_class, h100) != stack_class(recipe.end_to_end_class, h100)


# ---- topology ---------------------------------------------------------------------------------


def _ring_all_reduce(n: int, nbytes: float, bw: float, eff: float, lat: float) -> float:
    return 2 * (n - 1) * lat + 2 * (n - 1) / n * nbytes / (bw * eff)


def test_tpu_slice_stays_on_ici():
    c = default_cluster(get_device("tpu-v5p"), 16)
    assert (c.gpus_per_node, c.nodes) == (16, 1)
    t = collective_time("all_reduce", GB, 16, c)
    assert "ICI" in t.link
    assert t.time_s == pytest.approx(_ring_all_reduce(16, GB, 600e9, NVLINK_RING_EFFICIENCY,
                                                      SCALE_UP_LATENCY_S))


def test_nvl72_is_one_72_gpu_domain():
    c = default_cluster(get_device("gb200"), 144)
    assert (c.gpus_per_node, c.nodes, c.devices_per_host) == (72, 2, 4)
    t = collective_time("all_reduce", GB, 72, c)
    assert t.time_s == pytest.approx(_ring_all_reduce(72, GB, 900e9, NVLINK_RING_EFFICIENCY,
                                                      SCALE_UP_LATENCY_S))


@pytest.mark.parametrize("gpus,per_node", [(None, 64), (4, 64)])
def test_nvl72_job_of_128_gpus_gets_two_64_gpu_domains(gpus, per_node):
    """128 GB200 GPUs do not fill 72-GPU domains evenly: two NVLink domains of 64 (16 trays),
    whether --gpus-per-node is left out or names the 4-GPU tray (Megatron-Bridge recipes)."""
    c = default_cluster(get_device("gb200"), 128, gpus)
    assert (c.gpus_per_node, c.nodes, c.devices_per_host) == (per_node, 2, 4)


def test_nvl72_tensor_parallel_8_stays_on_nvlink_with_4_gpu_trays():
    c = default_cluster(get_device("gb200"), 128, 4)
    t = collective_time("all_reduce", GB, 8, c, 8)
    assert "NVLink" in t.link and "network" not in t.link.lower()
    assert t.time_s == pytest.approx(_ring_all_reduce(8, GB, 900e9, NVLINK_RING_EFFICIENCY,
                                                      SCALE_UP_LATENCY_S))


def test_a_node_size_other_than_the_host_is_taken_as_given():
    assert default_cluster(get_device("gb200"), 128, 32).gpus_per_node == 32
    assert default_cluster(get_device("h100"), 16, 4).gpus_per_node == 4


@given(st.integers(1, 4096), st.sampled_from([(72, 4), (8960, 4), (256, 4), (64, 8)]))
def test_scale_up_group_divides_the_job_within_one_domain(gpus, shape):
    domain, host = shape
    g = scale_up_group(gpus, domain, host)
    if gpus > domain and gpus % host:
        assert g == host  # not whole hosts: default_cluster refuses it as for any node size
        return
    assert gpus % g == 0 and 1 <= g <= domain
    if gpus <= domain:
        assert g == gpus
    else:
        assert g % host == 0
        assert not any(gpus % k == 0 for k in range(g + host, domain + 1, host))


def test_hgx_h100_keeps_8_gpu_nodes():
    c = default_cluster(get_device("h100"), 32)
    assert (c.gpus_per_node, c.nodes, c.domain) == (8, 4, 8)


def test_h100_nvl_bridged_pairs_then_pcie():
    c = default_cluster(get_device("h100-nvl"), 8)
    assert (c.gpus_per_node, c.domain) == (8, 2)
    pair = collective_time("all_reduce", GB, 2, c)
    assert pair.time_s == pytest.approx(_ring_all_reduce(2, GB, 300e9, NVLINK_RING_EFFICIENCY,
                                                         SCALE_UP_LATENCY_S))
    node = collective_time("all_reduce", GB, 8, c)
    assert "PCIe" in node.link
    assert node.time_s == pytest.approx(_ring_all_reduce(8, GB, 64e9, PCIE_EFFICIENCY,
                                                         2 * SCALE_UP_LATENCY_S))


def test_mi300x_mesh_one_link_per_peer():
    c = default_cluster(get_device("mi300x"), 8)
    two = collective_time("all_reduce", GB, 2, c)
    eight = collective_time("all_reduce", GB, 8, c)
    assert two.time_s == pytest.approx(_ring_all_reduce(2, GB, 64e9, NVLINK_RING_EFFICIENCY,
                                                        SCALE_UP_LATENCY_S))
    assert eight.time_s == pytest.approx(_ring_all_reduce(8, GB, 448e9, NVLINK_RING_EFFICIENCY,
                                                          SCALE_UP_LATENCY_S))
    four = collective_time("all_gather", GB, 4, c)  # 3 peers x 64 GB/s
    assert four.time_s == pytest.approx(3 * SCALE_UP_LATENCY_S
                                        + 3 / 4 * GB / (192e9 * NVLINK_RING_EFFICIENCY))


@given(st.sampled_from(["a100", "h100", "gb200", "mi300x", "h100-nvl", "tpu-v5p", "tpu-v5e"]),
       st.integers(2, 64), st.floats(1e6, 1e10))
def test_busbw_never_exceeds_the_rated_link(dev, group, nbytes):
    """Whatever the topology, ring busbw stays under the scale-up rating x ring efficiency."""
    c = default_cluster(get_device(dev), 64 if dev != "h100-nvl" else 8)
    g = min(group, c.gpus)
    t = collective_time("all_reduce", nbytes, g, c)
    assert t.busbw_bytes_per_s <= c.scale_up.bw_bytes_per_s * NVLINK_RING_EFFICIENCY * (1 + 1e-9)
