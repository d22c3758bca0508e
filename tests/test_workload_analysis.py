"""The pure side of `gpuplan profile`: step attribution, host reads, copies, device idle and
advice ranking on recorded numbers (no torch)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.estimate.efficiency import default_efficiency
from gpuplan.estimate.workload import (
    PHASES,
    PRIORITY,
    WorkloadRecord,
    attribute,
    breakdown,
    copies,
    device_idle,
    host_reads,
)
from gpuplan.estimate.workload_advice import AdviceInput, advise
from gpuplan.specs.catalog import get_device


def test_attribution_innermost_cause_wins():
    # forward 0-10 holds a copy 2-3 and an input wait 4-6; backward 10-18; optimizer 18-19
    iv = [("forward", 0, 10), ("host_to_device", 2, 3), ("input_wait", 4, 6),
          ("backward", 10, 18), ("optimizer", 18, 19)]
    out = attribute(iv, 0.0, 20.0)
    assert out == {"input_wait": 2, "host_to_device": 1, "forward": 7, "backward": 8,
                   "optimizer": 1, "communication": 0, "other": 1}


@given(st.lists(st.tuples(st.sampled_from(PRIORITY), st.floats(-1, 11), st.floats(0, 5)),
                max_size=30))
@settings(deadline=None)  # a shared machine: timing is not what is tested
def test_attribution_covers_the_window_exactly(spans):
    iv = [(label, a, a + d) for label, a, d in spans]
    out = attribute(iv, 0.0, 10.0)
    assert set(out) == set(PHASES)
    assert sum(out.values()) == pytest.approx(10.0)
    assert all(v >= 0 for v in out.values())


def _record(**kw):
    rec = WorkloadRecord("cpu", bounds=[0.0, 1.0, 2.0, 3.0, 4.0])
    for k, v in kw.items():
        setattr(rec, k, v)
    return rec


def test_breakdown_reads_and_copies_per_step():
    rec = _record(intervals=[("input_wait", 0.0, 0.5), ("input_wait", 1.0, 1.5)],
                  reads=[("item", "t.py", 7, s + 0.9, s + 0.91) for s in range(4)],
                  copies=[(1000, False, False, 0.6, 0.7), (500, True, True, 1.6, 1.6001)])
    step, parts, per_step = breakdown(rec)
    assert step == 1.0 and per_step == [1.0] * 4
    assert parts["input_wait"] == pytest.approx(0.25)  # 1 s of waits over 4 steps
    r = host_reads(rec)
    assert r["per_step"] == 1.0 and r["sites"][0]["line"] == 7
    c = copies(rec)
    assert c["pageable"]["bytes"] == 250 and c["pinned"]["bytes"] == 125
    assert c["pageable"]["bw_bytes_per_s"] == pytest.approx(1000 / 0.1)


def test_device_idle_gaps_and_the_part_after_host_reads():
    rec = WorkloadRecord("cuda", bounds=[0.0, 10.0],
                         device_busy=[(0.0, 4.0), (6.0, 9.0)],
                         reads=[("item", "t.py", 3, 3.5, 4.5)])
    idle = device_idle(rec)
    assert idle is not None
    assert idle["idle_s"] == pytest.approx(3.0)  # 4-6 and 9-10
    assert idle["after_host_read_s"] == pytest.approx(2.0)  # the 4-6 gap begins inside the read
    assert device_idle(WorkloadRecord("cpu", bounds=[0.0, 1.0])) is None


def _advice_input(**kw):
    dev = get_device("h100")
    base = dict(device_kind="cuda", device=dev, eff=default_efficiency(dev), step_time_s=0.1,
                breakdown=dict.fromkeys(PHASES, 0.0), loaders=[],
                reads={"per_step": 0.0, "time_s": 0.0, "sites": []},
                copies={k: {"bytes": 0, "copies_per_step": 0, "time_s": 0.0, "non_blocking_per_step": 0,
                            "bw_bytes_per_s": None} for k in ("pinned", "pageable")},
                rows=[])
    base.update(kw)
    return AdviceInput(**base)


def test_pageable_copies_rank_first_when_they_cost_most():
    cp = {"pinned": {"bytes": 0, "copies_per_step": 0, "time_s": 0.0, "non_blocking_per_step": 0,
                     "bw_bytes_per_s": None},
          "pageable": {"bytes": 64 * 2**20, "copies_per_step": 1, "time_s": 0.02,
                       "non_blocking_per_step": 0, "bw_bytes_per_s": 64 * 2**20 / 0.02}}
    reads = {"per_step": 1.0, "time_s": 0.001,
             "sites": [{"call": "item", "file": "t.py", "line": 3, "per_step": 1.0,
                        "time_s": 0.001}]}
    idle = {"idle_s": 0.03, "busy_fraction": 0.7, "gaps_per_step": 2,
            "after_host_read_s": 0.005, "largest_gap_s": 0.02}
    adv = advise(_advice_input(copies=cp, reads=reads, idle=idle))
    assert [a["kind"] for a in adv] == ["pageable_copy", "host_sync"]
    assert adv[0]["expected_saving_s"] == 0.02 and adv[1]["expected_saving_s"] == 0.005


def test_input_wait_advice_suggests_enough_workers():
    parts = dict.fromkeys(PHASES, 0.0)
    parts["input_wait"] = 0.06  # 60 ms waiting, 40 ms compute, loading in the main process
    adv = advise(_advice_input(device_kind="cpu", breakdown=parts,
                               loaders=[{"num_workers": 0}]))
    assert adv[0]["kind"] == "input_pipeline"
    assert adv[0]["evidence"]["suggested_workers"] == 2  # ceil(60 ms / 40 ms)
    assert adv[0]["expected_saving_s"] == 0.06


def test_memory_near_capacity_is_advised_without_a_time_saving():
    adv = advise(_advice_input(peak_memory_bytes=95, capacity_bytes=100))
    assert [a["kind"] for a in adv] == ["memory"]
    assert adv[0]["expected_saving_s"] == 0.0
