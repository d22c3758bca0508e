"""Expert-parallel dispatch volume: each rank sends the tokens it holds."""

from __future__ import annotations

import pytest

from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.workload import TrainConfig


def _dispatch(cfg: TrainConfig) -> dict:
    m = get_model("mixtral-8x7b")
    res = step_time(m, default_cluster(get_device("h100"), 16, 8), cfg)
    return next(c for c in res.collectives if c["what"] == "expert parallel dispatch/combine")


@pytest.mark.parametrize("tp", [2, 4])
def test_sequence_parallel_ranks_dispatch_their_sequence_shard(tp):
    """With sequence parallelism a TP rank holds 1/tp of the micro-batch's tokens and
    dispatches only those: micro-batch x seq / tp x top-k x hidden x 2 bytes."""
    m = get_model("mixtral-8x7b")
    base = dict(micro_batch=2, seq_len=4096, global_batch=64, tp=tp, ep=2, dp=16 // tp,
                zero=1)
    with_sp = _dispatch(TrainConfig(**base, sp=True))
    without = _dispatch(TrainConfig(**base, sp=False))
    assert with_sp["bytes"] == 2 * 4096 // tp * m.experts_per_token * m.hidden_size * 2
    assert without["bytes"] == 2 * 4096 * m.experts_per_token * m.hidden_size * 2
    assert with_sp["time_s"] < without["time_s"]
