"""The fit verdict with the memory model's stated band (fits | tight | does_not_fit), the
memory behaviour inferred when no framework is named, and the validation bars of
benchmarks/validate_memory.py on the calibration evidence (issue 10)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.estimate.memory import (
    MemoryResult,
    TrainConfig,
    memory_verdict,
    not_out_of_memory,
    train_memory,
)
from gpuplan.ops.impl import train_impl
from gpuplan.specs import get_device, get_model
from gpuplan.specs.framework import get_framework
from gpuplan.specs.memory_behaviour import (
    INFER,
    MEMORY_BAND,
    MIDDLE,
    behaviour_for,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))


def test_verdict_edges_exact():
    # real peak in [total/(1+b), total/(1-b)]; b = 0.25 keeps the arithmetic exact in binary
    assert memory_verdict(75.0, 100.0, 0.25) == "fits"  # 75/0.75 = 100
    assert memory_verdict(75.5, 100.0, 0.25) == "tight"
    assert memory_verdict(125.0, 100.0, 0.25) == "tight"  # 125/1.25 = 100
    assert memory_verdict(125.5, 100.0, 0.25) == "does_not_fit"
    # band 0: the point estimate against capacity
    assert memory_verdict(100.0, 100.0, 0.0) == "fits"
    assert memory_verdict(100.5, 100.0, 0.0) == "does_not_fit"


@given(st.floats(1.0, 1e12), st.floats(1.0, 1e12), st.floats(0.0, 0.5))
def test_verdict_is_monotone_and_fits_means_not_declared_oom(total, cap, band):
    v = memory_verdict(total, cap, band)
    assert (v != "does_not_fit") == bool(not_out_of_memory(total, cap, band))
    order = ["fits", "tight", "does_not_fit"]
    assert order.index(memory_verdict(total * 1.5, cap, band)) >= order.index(v)
    r = MemoryResult("train", {"weights": int(total)}, {}, int(cap), "X", {}, band=band)
    assert r.fits == (r.verdict != "does_not_fit")
    assert r.fits_with_margin == (r.verdict == "fits")
    j = r.to_json()
    assert j["memory_verdict"] == r.verdict and j["memory_band"] == band
    assert j["fits"] == r.fits


def test_training_results_carry_the_stated_band():
    m, d = get_model("llama-3-8b"), get_device("h100")
    r = train_memory(m, d, TrainConfig(micro_batch=1, seq_len=4096))
    assert r.band == MEMORY_BAND
    assert "memory_band" in r.assumptions


def test_unnamed_framework_infers_the_behaviour_from_the_layout():
    hf = get_framework(None)
    dp_only = hf.apply(TrainConfig(micro_batch=1, seq_len=2048, dp=8), named=False)
    assert dp_only.memory_behaviour is INFER and dp_only.behaviour == MIDDLE
    tp = replace(dp_only, tp=2)  # a search or plan changing the layout re-infers
    assert tp.behaviour.loss == "vocab-parallel" and "megatron" in tp.behaviour.name
    named = get_framework("llm-foundry").apply(TrainConfig(micro_batch=1, seq_len=2048))
    assert named.behaviour.name == "llm-foundry"
    # a direct TrainConfig (the tracer comparisons) keeps PyTorch's plain loop
    assert TrainConfig(micro_batch=1, seq_len=2048).behaviour.name == "default"


def test_only_hugging_face_builds_a_training_kv_cache():
    cfg = TrainConfig(micro_batch=1, seq_len=2048)
    assert train_impl(cfg, "gpu").training_kv_cache  # TrainConfig's own default (HF models)
    for name, kv in (("hf", True), ("megatron", False), ("fsdp", False),
                     ("llm-foundry", False)):
        c = replace(cfg, memory_behaviour=behaviour_for(name))
        assert train_impl(c, "gpu").training_kv_cache is kv
    assert not train_impl(replace(cfg, memory_behaviour=MIDDLE), "gpu").training_kv_cache


def test_torchtitan_pipeline_holds_bf16_parameters_and_fp32_gradients_unsharded():
    """torchtitan under PP: reshard_after_forward=False and gradients accumulated unsharded
    across micro-batches in FSDP2's reduce dtype (mixed_precision_reduce = float32): 2 + 4
    bytes per stage parameter."""
    m, d = get_model("llama-3-70b"), get_device("h100")
    cfg = TrainConfig(micro_batch=1, seq_len=4096, fsdp="full", dp=4, tp=4, pp=4, sp=True,
                      recompute="full", global_batch=64, dropout=False)
    tt = train_memory(m, d, get_framework("fsdp").apply(cfg))
    assert tt.other_items["unsharded_stage_parameters"] == int(
        tt.details["params_per_gpu"] * (2 + 4))


@pytest.fixture(scope="module")
def vm():  # type: ignore[no-untyped-def]
    import validate_memory

    return validate_memory


def test_the_band_in_code_is_the_one_the_calibration_peaks_give(vm):  # type: ignore[no-untyped-def]
    peaks = vm.peak_rows()
    errs = [abs(r.error) for r in peaks if r.split == "calibration"]
    assert len(errs) == 20  # every torchtitan peak is calibration (seen during modelling)
    assert vm.band(errs) == MEMORY_BAND


def test_no_calibration_run_that_ran_is_declared_out_of_memory(vm):  # type: ignore[no-untyped-def]
    """Bar fixed before looking: at most one run that really ran declared out of memory;
    with each run's framework profile and without one (the inferred behaviour). It holds on
    the development families; the hold-out families promoted to calibration at stops 11-12
    (training_runs.PROMOTED_FAMILIES) failed it when scored and are guarded against getting
    worse than their recorded count (README, stop 12: 9 with --framework, 14 without; the
    stop-14 hold-out added one in each, Megatron-DeepSpeed's GPT 30B at 256k tokens on A100
    40 GB; the stop-21 hold-out two in each: the Qwen3-235B MoE on 256 H100 and the pure-bf16
    Mistral-7B at micro-batch 8 on one A100; at stop 22 expert tensor parallelism and pure
    bf16 took both off, and the stop-22 hold-out added Hagemann et al.'s 16 in each, layouts
    whose fp32 Megatron-LM gradients do not fit beside the model)."""
    import training_runs as tr

    for named, promoted_ceiling in ((True, 26), (False, 31)):
        rows = vm.ran("calibration", named=named)
        assert len(rows) > 500
        dev = [r for r in rows if r.family not in tr.PROMOTED_FAMILIES]
        promoted = [r for r in rows if r.family in tr.PROMOTED_FAMILIES]
        assert len(dev) > 200 and len(promoted) > 250
        assert sum(r.declared_oom for r in dev) <= vm.MAX_VALIDATION_MISSES
        assert sum(r.declared_oom for r in promoted) <= promoted_ceiling


def test_documented_ooms_are_declared_out_of_memory(vm):  # type: ignore[no-untyped-def]
    rows = vm.documented_ooms()
    assert rows and all(r.verdict == "does_not_fit" for r in rows)


def test_loss_parallel_backward_holds_three_fp32_copies_only_with_tp():
    """DTensor loss_parallel's backward, (zeros_like(x) + exp(x)) * grad_output, holds three
    fp32 copies of the local logits beside the kept log-softmax; plain aten holds two."""
    from gpuplan.estimate.memory_peak import loss_buffers

    t, v, e = 1000, 16_000, 2.0
    tt = behaviour_for("fsdp")
    assert loss_buffers(t, v, e, tt, tp=8).transient == 3 * 4 * t * v
    assert loss_buffers(t, v, e, tt, tp=1).transient == 2 * 4 * t * v
    assert loss_buffers(t, v, e, behaviour_for("megatron"), tp=8).transient == 2 * t * v


def test_train_and_memory_commands_agree_on_the_verdict(capsys):  # type: ignore[no-untyped-def]
    """The same job through `memory` and `train` (no framework named: the inferred behaviour)
    gives the same bytes and the same verdict; `fits` is 'not declared out of memory'."""
    import json

    from gpuplan.cli.main import main

    args = ["llama-3-8b", "--gpu", "a100-sxm-80gb", "--micro-batch", "1", "--seq-len", "8192",
            "--fsdp", "full", "--json"]

    def run(*argv: str) -> dict:  # type: ignore[type-arg]
        capsys.readouterr()
        assert main(list(argv)) == 0
        return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]

    mem = run("memory", *args, "--mode", "train", "--dp", "8")
    tr = run("train", *args, "--gpus", "8")
    assert mem["total_bytes"] == tr["memory"]["total_bytes"]
    assert mem["memory_verdict"] == tr["memory_verdict"] == tr["memory"]["memory_verdict"]
    assert tr["fits"] == (tr["memory_verdict"] != "does_not_fit")
    assert mem["memory_band"] == MEMORY_BAND
    assert tr["tokens_per_s"] > 0


def test_dtensor_tp_keeps_the_gathered_linear_inputs():
    """torchtitan's sequence-parallel TP keeps each ColwiseParallel linear's all-gathered
    input: (1 - 1/tp) x tokens x hidden x 2 bytes more per attention and MLP block than
    Megatron's stack, which keeps the shard."""
    from gpuplan.estimate.memory import memory_profile

    m = get_model("llama-3-8b")
    cfg = TrainConfig(micro_batch=2, seq_len=4096, tp=4, sp=True, dp=2, dropout=False,
                      fused=True)
    impl = train_impl(cfg, "gpu")
    tt = memory_profile(m, replace(cfg, memory_behaviour=behaviour_for("fsdp")), impl)
    meg = memory_profile(m, replace(cfg, memory_behaviour=behaviour_for("megatron")), impl)
    extra = (1 - 1 / 4) * 2 * 4096 * 4096 * 2
    for block in ("layer.attention", "layer.mlp"):
        assert tt.full_block[block] - meg.full_block[block] == extra
    no_sp = replace(cfg, sp=False)
    assert memory_profile(m, replace(no_sp, memory_behaviour=behaviour_for("fsdp")),
                          train_impl(no_sp, "gpu")).full_block == memory_profile(
        m, replace(no_sp, memory_behaviour=behaviour_for("megatron")),
        train_impl(no_sp, "gpu")).full_block
