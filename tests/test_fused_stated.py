"""--fused / --no-fused: the job's own kernels over its stack profile's (TrainConfig.fused)."""

from __future__ import annotations

import json

from gpuplan.cli.main import main
from gpuplan.specs.framework import get_framework
from gpuplan.specs.workload import TrainConfig

JOB = ["train", "llama-2-13b", "--gpu", "a100-80gb", "--gpus", "8", "--tp", "8",
       "--seq-len", "2048", "--global-batch", "64", "--framework", "megatron-lm", "--json"]


def test_unstated_follows_the_profile_and_stated_wins():
    mega, fsdp = get_framework("megatron-lm"), get_framework("fsdp")
    assert TrainConfig().fused is None
    assert mega.apply(TrainConfig()).fused is True
    assert fsdp.apply(TrainConfig()).fused is False
    assert mega.apply(TrainConfig(fused=False)).fused is False
    assert fsdp.apply(TrainConfig(fused=True)).fused is True


def test_no_fused_times_eager_kernels_under_a_fusing_profile(capsys):
    assert main(JOB) == 0
    profile = json.loads(capsys.readouterr().out)
    assert main([*JOB, "--no-fused"]) == 0
    eager = json.loads(capsys.readouterr().out)
    assert main([*JOB, "--fused"]) == 0
    fused = json.loads(capsys.readouterr().out)
    assert profile["step_time_s"] == fused["step_time_s"]
    assert eager["step_time_s"] > profile["step_time_s"]
    assert eager["memory"]["assumptions"]["fused_kernels"] is False
    assert profile["memory"]["assumptions"]["fused_kernels"] is True
