"""What a stack really runs, timed (issue 10): fp32 gradient reduction under FSDP mixed
precision (Composer 'DEFAULT'), and llm-foundry's eager element-wise kernels."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuplan.estimate.efficiency import framework_efficiency
from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.framework import get_framework
from gpuplan.specs.workload import TrainConfig

JOB = TrainConfig(micro_batch=2, seq_len=2048, dp=16, fsdp="full", global_batch=32,
                  dropout=False)


def _run(cfg: TrainConfig, framework: str = "llm-foundry", gpus: int = 16):
    d = get_device("h100")
    fw = get_framework(framework)
    return step_time(get_model("llama-3-8b"), default_cluster(d, gpus), fw.apply(cfg),
                     framework_efficiency(d, fw))


def _bytes(res, what: str) -> float:
    return next(c["bytes"] for c in res.collectives if c["what"].startswith(what))


def test_composer_default_mixed_precision_reduces_gradients_in_fp32():
    fp32 = _run(JOB)  # llm-foundry: Composer FSDP mixed_precision DEFAULT, reduce_dtype fp32
    own = _run(replace(JOB, grad_reduce_dtype="grad"))  # PURE: bf16, the gradients' dtype
    # 4 bytes instead of 2 per parameter on the reduce-scatter; the weight gathers unchanged
    assert _bytes(fp32, "ZeRO-3 gradients") == pytest.approx(
        2 * _bytes(own, "ZeRO-3 gradients"), rel=1e-12)
    assert _bytes(fp32, "ZeRO-3 parameters") == _bytes(own, "ZeRO-3 parameters")
    assert fp32.comm_time_s > own.comm_time_s
    assert fp32.step_time_s >= own.step_time_s
    # communication only: the memory verdict does not move
    assert fp32.memory.total_bytes == own.memory.total_bytes


def test_reduce_dtype_follows_the_stack_unless_the_job_names_it():
    foundry = get_framework("llm-foundry")
    assert foundry.apply(TrainConfig()).grad_reduce_dtype == "fp32"
    assert foundry.apply(TrainConfig(grad_reduce_dtype="grad")).grad_reduce_dtype == "grad"
    assert get_framework("hf").apply(TrainConfig()).grad_reduce_dtype == "grad"
    # Megatron already keeps fp32 main_grad: its reduction is 4 bytes through grad_dtype
    mega = get_framework("megatron").apply(TrainConfig(zero=1, dp=16))
    assert mega.grad_dtype == "fp32" and mega.grad_reduce_dtype == "grad"


def test_fp32_reduction_of_fp32_gradients_moves_the_same_bytes():
    cfg = replace(JOB, grad_dtype="fp32")
    a = _run(replace(cfg, grad_reduce_dtype="fp32"), "hf")
    b = _run(replace(cfg, grad_reduce_dtype="grad"), "hf")
    assert _bytes(a, "ZeRO-3 gradients") == _bytes(b, "ZeRO-3 gradients")


def test_llm_foundry_runs_eager_element_wise_kernels():
    """No torch.compile in the llm-foundry benchmarks: LayerNorm, GELU and the residual adds
    are separate memory passes; with --fused they fold into fewer kernels."""
    assert not get_framework("llm-foundry").fused
    eager = _run(replace(JOB, dp=8, global_batch=16), gpus=8)
    fused = _run(replace(JOB, dp=8, global_batch=16, fused=True), gpus=8)
    assert eager.breakdown["compute"] > fused.breakdown["compute"]
    # the difference is memory traffic: the matmul FLOPs are the same up to the element-wise
    # epilogue FLOPs (GELU) that fusion counts inside the matmul kernel (< 0.1 %)
    assert eager.hardware_flops_per_step == pytest.approx(fused.hardware_flops_per_step,
                                                          rel=1e-3)
