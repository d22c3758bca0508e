"""measure.stability: warm-up until stable, rounds, re-measure when rounds disagree, flag what
stays unstable. A scripted clock stands in for a machine whose speed we choose (a busy window
is a stretch where every call takes 3x as long)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpuplan.measure.stability import REL_TOL, repeated, warm_until_stable


class ScriptedClock:
    """Each call of fn advances time by `cost(call_index)` seconds; no real waiting."""

    def __init__(self, cost: Callable[[int], float]) -> None:
        self.t = 0.0
        self.calls = 0
        self.cost = cost

    def now(self) -> float:
        return self.t

    def sync(self) -> None:
        pass

    def block(self, fn: Callable[[], object], inner: int) -> float:
        t0 = self.t
        for _ in range(inner):
            fn()
        return self.t - t0

    def fn(self) -> None:
        self.t += self.cost(self.calls)
        self.calls += 1


def test_quiet_machine_three_rounds_agree():
    c = ScriptedClock(lambda i: 1e-3)
    r = repeated(c.fn, c, work=1e9, budget_s=0.02, pause_s=0.0)
    assert len(r.rounds) == 3 and r.warmed_up
    assert r.best_rate == pytest.approx(1e12) and r.spread() == pytest.approx(0.0)
    assert r.to_json(3, REL_TOL)["stable"] is True


def test_busy_window_is_remeasured_and_the_best_round_kept():
    # a busy window of 3 ms per call (another engineer's job) over calls 30..59, else 1 ms:
    # it hits the first rounds; later rounds see the quiet machine
    def cost(i: int) -> float:
        return 3e-3 if 30 <= i < 60 else 1e-3

    c = ScriptedClock(cost)
    r = repeated(c.fn, c, work=1e9, budget_s=0.02, pause_s=0.0)
    j = r.to_json(3, REL_TOL)
    assert len(r.rounds) > 3  # the disagreement triggered more rounds
    assert r.best_rate == pytest.approx(1e12)  # not the 3x-low busy rate
    assert min(r.rates) < 0.5e12  # the busy round is kept in the record...
    assert j["stable"] is True  # ...and the best three rounds agree
    assert j["spread"] > REL_TOL and j["round_flops_per_s"] == r.rates


def test_rounds_that_keep_disagreeing_are_flagged():
    # a machine that keeps slowing down (throttling, growing load): every round is slower
    # than the one before, so no three rounds agree
    c = ScriptedClock(lambda i: 0.0)
    c.cost = lambda i: 1e-3 * (1 + 20 * c.t)
    r = repeated(c.fn, c, work=1e9, budget_s=0.02, pause_s=0.0, max_extra=2)
    j = r.to_json(3, REL_TOL)
    assert len(r.rounds) == 5  # 3 rounds + 2 re-measures, then it gives up
    assert j["stable"] is False and "busy" in j["unstable_reason"]
    rates = j["round_flops_per_s"]
    assert j["best_round_flops_per_s"] == max(rates) == rates[0]


def test_warm_up_waits_for_the_slow_start_to_end():
    # the first calls get faster and faster (JIT, allocator growth, caches), then steady at
    # 1 ms from call 12: warm-up must outlast the trend
    c = ScriptedClock(lambda i: max(1e-3, 5e-3 - 0.35e-3 * i))
    spent, settled = warm_until_stable(c.fn, c, inner=2, rel_tol=0.1, cap_s=1.0)
    assert settled and c.calls >= 12 and spent > 0
    c2 = ScriptedClock(lambda i: 1e-3 * (1 + (i % 3)))  # 1, 2, 3 ms in turn: never settles
    _, settled2 = warm_until_stable(c2.fn, c2, inner=1, rel_tol=0.01, cap_s=0.05)
    assert not settled2


def test_real_cpu_matmul_rounds_recorded_in_the_profile():
    torch = pytest.importorskip("torch")
    from gpuplan.measure.compute import measure_dtype
    from gpuplan.measure.timing import HostClock

    res = measure_dtype("fp32", "cpu", HostClock(), [(128, 128, 128)], 1 << 20, 1.0, 0.05)
    j = res.to_json()
    rep = j["repeats"]
    assert rep["rounds"] >= 3 and len(rep["round_flops_per_s"]) == rep["rounds"]
    assert j["sustained_flops_per_s"] == max(rep["round_flops_per_s"])
    assert isinstance(rep["stable"], bool) and 0 <= rep["spread"] < 1
    assert torch.get_num_threads() >= 1
