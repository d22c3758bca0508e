"""Megatron-Core's interleaved schedule reduces gradients and gathers parameters chunk by chunk
(estimate.step.interleaved_tail): each model chunk's collectives start as that chunk's last
backward (first forward) comes, so only the queue's tail past the compute is exposed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.estimate.efficiency import framework_efficiency
from gpuplan.estimate.step import dp_comm, interleaved_tail
from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.framework import get_framework
from gpuplan.specs.workload import TrainConfig


def test_tail_is_the_last_chunk_or_the_backlog():
    assert interleaved_tail(8.0, 4, 10.0) == pytest.approx(2.0)  # each chunk done in time
    assert interleaved_tail(8.0, 4, 1.0) == pytest.approx(5.0)  # 8 - 3 x 1: a backlog
    assert interleaved_tail(8.0, 1, 1.0) == pytest.approx(8.0)  # one chunk: all of it


@given(st.floats(0.0, 10.0), st.integers(1, 16), st.floats(0.0, 10.0))
def test_tail_lies_between_one_chunk_and_the_whole(total, v, spacing):
    t = float(interleaved_tail(total, v, spacing))
    assert total / v - 1e-12 <= t <= total + 1e-12


def _dp(v, pp=4, n_micro=8, reduce_overlap=True, gather_overlap=True):
    # ZeRO-1: 2 s reduce-scatter, 1 s all-gather; 0.5 s backward, 0.25 s forward per micro-batch
    return dp_comm(np.asarray(1), 0.0, 2.0, 1.0, 0.0, 0.0, 0.25, 0.5, n_micro, True,
                   gather_overlap, 1.0, reduce_overlap, pp, v)


def test_interleaved_chunks_expose_only_the_queue_tail():
    total, exposed = _dp(v=4)
    # gradients: max(2/4, 2 - 3 x 4 x 0.5/4) = 0.5; gather: max(0, max(1/4, 1 - 3 x 4 x
    # 0.25/4) - 0.25/4) = 0.1875
    assert float(total) == pytest.approx(3.0)
    assert float(exposed) == pytest.approx(0.5 + 0.1875)
    _, whole = _dp(v=1)  # one chunk: hidden behind one micro-batch's backward / forward
    assert float(whole) == pytest.approx((2.0 - 0.5) + (1.0 - 0.25))


def test_without_pipeline_or_overlap_chunks_change_nothing():
    assert float(_dp(v=4, pp=1)[1]) == pytest.approx(float(_dp(v=1, pp=1)[1]))
    # Megatron-LM's own defaults: gradients reduced after the backward, gather exposed
    assert float(_dp(v=4, reduce_overlap=False, gather_overlap=False)[1]) == pytest.approx(3.0)


def test_step_with_virtual_stages_hides_more_of_a_large_data_parallel_sync():
    """Llama 3 70B on 128 H100s, TP 4 x PP 4 x DP 8 under the megatron profile: five model
    chunks per stage leave less of the distributed optimizer's collectives exposed."""
    m, d = get_model("llama-3-70b"), get_device("h100")
    fw = get_framework("megatron")
    cfg = fw.apply(TrainConfig(micro_batch=1, seq_len=4096, global_batch=64, tp=4, pp=4, dp=8,
                               sp=True, dropout=False), named=True)
    eff = framework_efficiency(d, fw)
    c = default_cluster(d, 128)
    one = step_time(m, c, cfg, eff)
    five = step_time(m, c, replace(cfg, virtual_stages=5), eff)
    assert one.breakdown["dp_comm_exposed"] > 0
    assert five.breakdown["dp_comm_exposed"] < one.breakdown["dp_comm_exposed"]
    assert "chunk by chunk over the 5 model chunks" in five.assumptions["overlap"]
    assert "chunk by chunk" not in one.assumptions["overlap"]
