"""The peak-memory mechanisms of estimate.memory_peak / memory_behaviour: loss buffers by loss
kind, FSDP buffers, per-op selective checkpointing, and the llm-foundry case that the flat
model got wrong (issue 10)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplan.errors import InputError
from gpuplan.estimate.memory import TrainConfig, train_memory
from gpuplan.estimate.memory_peak import loss_buffers
from gpuplan.specs import get_device, get_model
from gpuplan.specs.memory_behaviour import BEHAVIOURS, behaviour_for

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))


def test_loss_buffers_exact():
    t, v, e = 1000, 50_000, 2.0
    n = t * v
    fp32 = loss_buffers(t, v, e, behaviour_for(None))
    # fp32 log-softmax kept + int64 labels; backward: dense fp32 NLL gradient + fp32 input grad
    assert fp32.saved == n * 4 + t * 8 and fp32.transient == n * 8
    hf = loss_buffers(t, v, e, behaviour_for("hf"))
    assert hf.saved == fp32.saved + n * 2  # the 16-bit logits the output object keeps
    meg = loss_buffers(t, v, e, behaviour_for("megatron"))
    # fp32 softmax kept (in place of the fp32 copy) + lse + labels; a 16-bit gradient cast
    assert meg.saved == n * 4 + t * 4 + t * 8 and meg.transient == n * 2
    fused = loss_buffers(t, v, e, behaviour_for("llm-foundry"))
    # flash-attn CrossEntropyLoss: 16-bit logits + lse + labels kept; a 16-bit gradient
    assert fused.saved == n * 2 + t * 4 + t * 8 and fused.transient == n * 2
    inplace = loss_buffers(t, v, e, behaviour_for(None, loss="fused-inplace"))
    assert inplace.saved == fused.saved and inplace.transient == 0
    chunked = loss_buffers(t, v, e, behaviour_for(None, loss="chunked", loss_chunk_tokens=100))
    assert chunked.transient == 100 * v * (2 + 12) and chunked.saved == t * 4 + t * 8


def test_unknown_framework_is_a_clear_error():
    with pytest.raises(InputError, match="framework"):
        behaviour_for("tensorflow")
    assert set(BEHAVIOURS) >= {"megatron", "fsdp", "deepspeed", "llm-foundry", "hf"}


def test_mpt_760m_micro_batch_24_fits_with_llm_foundrys_fused_loss():
    """Issue 10: llm-foundry ran MPT-760M at micro-batch 24 x 2048 under FSDP on 8 x H100 80GB
    (scripts/train/benchmarking/README.md, H100 80GB BF16 table); the flat model said 101 GB.
    With its fused in-place cross-entropy the loss keeps only the bf16 logits."""
    from training_runs import mpt

    cfg = TrainConfig(micro_batch=24, seq_len=2048, dp=8, fsdp="full", fused=True,
                      dropout=False, global_batch=384)
    m, d = mpt("760m", 2048), get_device("h100")
    lf = train_memory(m, d, replace(cfg, memory_behaviour=behaviour_for("llm-foundry")))
    plain = train_memory(m, d, replace(cfg, memory_behaviour=behaviour_for(None)))
    assert lf.fits and not plain.fits
    assert lf.assumptions["memory_behaviour"]["loss"] == "fused"  # type: ignore[index]
    # fp32 path: logits 24*2048*50368 = 2.48e9; 4 bytes kept + 8 in backward vs 2 kept (the
    # fused run's transient is then one layer's backward instead of the loss's)
    n = 24 * 2048 * 50368
    lf_transient = lf.other_items["transient_peak"]
    assert plain.total_bytes - lf.total_bytes == pytest.approx(
        ((4 - 2) * n + 8 * n - lf_transient) * (1 + plain.assumptions["fragmentation"]),
        rel=1e-3)


def test_per_op_selective_sits_between_full_and_none():
    m, d = get_model("llama-3-8b"), get_device("h100")
    base = TrainConfig(micro_batch=2, seq_len=8192, fsdp="full", dp=8, dropout=False,
                       memory_behaviour=behaviour_for("fsdp"))
    acts = {r: train_memory(m, d, replace(base, recompute=r)).per_gpu["activations"]
            for r in ("none", "selective", "full")}
    assert acts["full"] < acts["selective"] < 0.5 * acts["none"]


def test_fsdp_with_pipeline_without_resharding_holds_the_stage_unsharded():
    m, d = get_model("llama-3-70b"), get_device("h100")
    cfg = TrainConfig(micro_batch=1, seq_len=4096, fsdp="full", dp=4, tp=4, pp=4, sp=True,
                      recompute="full", global_batch=64, dropout=False)
    tt = train_memory(m, d, replace(cfg, memory_behaviour=behaviour_for("fsdp")))
    ds = train_memory(m, d, replace(cfg, memory_behaviour=behaviour_for("deepspeed")))
    stage_params = tt.details["params_per_gpu"]
    # bf16 parameters + bf16 gradients of the whole stage, unsharded
    assert tt.other_items["unsharded_stage_parameters"] == int(stage_params * (2 + 2))
    assert "unsharded_stage_parameters" not in ds.other_items
    assert ds.other_items["gathered_parameters"] < tt.other_items["unsharded_stage_parameters"]


def test_interleaved_pipeline_holds_megatrons_warm_up_capped_by_the_micro_batches():
    """Narayanan et al. 2021 §2.2: stage 0 of an interleaved schedule warms up with
    2(p - 1) + (v - 1)p chunks of 1/v stage, i.e. p + (p - 1)/v micro-batches' worth; it
    cannot hold more micro-batches than the step has."""
    from gpuplan.estimate.memory import Layout, in_flight

    cfg = TrainConfig(micro_batch=1, seq_len=2048, pp=4, virtual_stages=2, dp=1,
                      global_batch=16)
    assert in_flight(Layout.of(cfg), 0) == 4 + 3 / 2  # 5.5
    # last stage: no 2(p - i - 1) term, still (v - 1)p + 1 = 5 chunks of 1/2 stage (Megatron-Core
    # schedules.py num_warmup_microbatches + the one steady-state forward), not 1 + 3/8
    assert in_flight(Layout.of(cfg), 3) == 5 / 2
    assert in_flight(Layout.of(cfg), 1) == (2 * 2 + 4 + 1) / 2  # 4.5
    few = replace(cfg, global_batch=2)
    assert in_flight(Layout.of(few), 0) == 2.0  # only two micro-batches exist
    one_f_one_b = replace(cfg, virtual_stages=1)
    assert in_flight(Layout.of(one_f_one_b), 0) == 4.0  # 1F1B: pp - stage
