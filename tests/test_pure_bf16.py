"""Pure bf16 training (--precision bf16): no fp32 master copy, gradients and states in bf16."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuplan.cli.main import main
from gpuplan.estimate.memory import state_bytes_per_param, train_memory
from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.workload import TrainConfig


@pytest.mark.parametrize("optimizer, mixed, pure", [
    ("adamw", 16.0, 8.0),          # 2 + 2 + (4 master + 8 moments) vs 2 + 2 + 4
    ("sgd", 12.0, 6.0),            # 2 + 2 + (4 + 4) vs 2 + 2 + 2
    ("adamw-bf16-states", 10.0, 8.0),  # its bf16 master copy is the weights themselves
])
def test_bytes_per_parameter(optimizer, mixed, pure):
    def total(precision: str) -> float:
        return sum(state_bytes_per_param(TrainConfig(precision=precision,
                                                     optimizer=optimizer)).values())
    assert total("bf16-mixed") == mixed
    assert total("bf16") == pure


def test_pure_bf16_halves_the_model_states_and_the_optimizer_step():
    m, d = get_model("mistral-7b"), get_device("a100-80gb")
    cfg = dict(micro_batch=1, seq_len=2048, recompute="full")
    mixed = train_memory(m, d, TrainConfig(**cfg, precision="bf16-mixed"))
    pure = train_memory(m, d, TrainConfig(**cfg, precision="bf16"))
    assert pure.per_gpu["optimizer"] * 3 == pytest.approx(mixed.per_gpu["optimizer"], rel=1e-6)
    assert pure.per_gpu["weights"] == mixed.per_gpu["weights"]
    assert pure.per_gpu["activations"] == mixed.per_gpu["activations"]
    cl = default_cluster(d, 1, 8)
    t_mixed = step_time(m, cl, TrainConfig(**cfg, precision="bf16-mixed")).breakdown
    t_pure = step_time(m, cl, TrainConfig(**cfg, precision="bf16")).breakdown
    assert 0.4 < t_pure["optimizer"] / t_mixed["optimizer"] < 0.6  # 14 of 28 bytes a parameter
    assert t_pure["compute"] == pytest.approx(t_mixed["compute"])


def test_cli_takes_pure_bf16(capsys):
    assert main(["memory", "mistral-7b", "--gpu", "a100-80gb", "--precision", "bf16",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assumptions"]["precision"] == "bf16"
    assert out["assumptions"]["bytes_per_param_total"] == 8.0


@pytest.mark.parametrize("optimizer, fused, expect", [
    ("adamw", True, 14.0), ("adamw", False, 44.0),  # 88 unfused bytes over fp32 tensors halved
    ("adam", False, 40.0), ("sgd", True, 18.0),     # SGD keeps its mixed-precision figure
])
def test_optimizer_step_bytes_in_pure_bf16(optimizer, fused, expect):
    """The step's bytes per parameter: optimizer_time over one parameter shard at a fixed
    bandwidth share recovers them."""
    from gpuplan.estimate.efficiency import default_efficiency
    from gpuplan.estimate.step import optimizer_time

    d = get_device("h100")
    eff = replace(default_efficiency(d), fused_optimizer=fused, size_dependent=False)
    t = optimizer_time(1e9, 1, optimizer, False, {}, default_cluster(d, 1, 8), eff,
                       precision="bf16")
    ref = optimizer_time(1e9, 1, "adamw", False, {}, default_cluster(d, 1, 8),
                         replace(eff, fused_optimizer=True), precision="bf16-mixed")
    assert t / ref * 28.0 == pytest.approx(expect)
