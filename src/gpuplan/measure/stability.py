"""Measurements that can be trusted on a busy machine: warm up until stable, repeat in
separate rounds, check that the rounds agree, re-measure when they do not, flag what stays
unstable.

- Warm-up until stable: timed blocks run until the last WARMUP_WINDOW block times agree within
  `rel_tol` (max/min - 1), or `warmup_cap_s` passes (then `warmed_up` is False).
- Repeats: `rounds` rounds, each the median of its samples (timing.measure). Interference from
  other processes only ever slows a kernel down, so a ceiling is the BEST round (the highest
  rate): the statistic mamf-finder reports as its maximum achievable FLOPS (Bekman,
  ml-engineering, compute/accelerator/benchmarks/mamf-finder.py: best over iterations); the
  median round and the spread are reported next to it. nccl-tests, by contrast, report the
  average time of -n iterations after -w warm-up ones, fine on a dedicated machine.
- Agreement: spread = (best - worst) / best over the round rates. Above `rel_tol` the
  measurement is re-run (up to `max_extra` more rounds, keeping all); if the best `rounds`
  rounds still disagree the result is flagged `stable: False` with the reason.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuplan.measure.timing import Clock, Stats, measure

WARMUP_WINDOW = 3
REL_TOL = 0.10
"""rounds (and warm-up blocks) must agree within 10 % (the sample-to-sample spread of a quiet
machine is a few %; a 3x drop on a busy one is far outside it)"""


@dataclass
class Repeated:
    """Rates of several rounds of one measurement."""

    work: float
    """FLOPs or bytes per call"""
    rounds: list[Stats] = field(default_factory=list)
    warmup_s: float = 0.0
    warmed_up: bool = True
    load_average: list[float] = field(default_factory=list)

    @property
    def rates(self) -> list[float]:
        return [r.rate(self.work) for r in self.rounds]

    @property
    def best_rate(self) -> float:
        return max(self.rates)

    @property
    def median_rate(self) -> float:
        return statistics.median(self.rates)

    def spread(self, k: int | None = None) -> float:
        """(best - worst) / best over the best `k` rounds (all by default)."""
        rs = sorted(self.rates, reverse=True)[: k or len(self.rounds)]
        return (rs[0] - rs[-1]) / rs[0] if rs and rs[0] > 0 else 0.0

    def stable(self, k: int, rel_tol: float) -> bool:
        return self.warmed_up and self.spread(k) <= rel_tol

    def to_json(self, k: int, rel_tol: float, unit: str = "flops_per_s") -> dict[str, Any]:
        """`unit`: the rate's unit suffix for the JSON keys (flops_per_s or bytes_per_s)."""
        ok = self.stable(k, rel_tol)
        why = None
        if not self.warmed_up:
            why = "warm-up never settled (block times kept changing)"
        elif not ok:
            why = (f"the best {k} of {len(self.rounds)} rounds differ by {self.spread(k):.0%} "
                   f"(> {rel_tol:.0%}): the machine is busy or throttling; the best round is "
                   "kept, treat it as a lower bound")
        return {f"best_round_{unit}": self.best_rate, f"median_round_{unit}": self.median_rate,
                f"round_{unit}": self.rates, "rounds": len(self.rounds),
                "spread": self.spread(), "spread_best_rounds": self.spread(k),
                "rel_tol": rel_tol, "stable": ok, "unstable_reason": why,
                "warmup_s": self.warmup_s, "load_average": self.load_average,
                "statistic": "best round median (mamf-finder's max); median round and spread "
                             "beside it"}


def warm_until_stable(fn: Callable[[], object], clock: Clock, inner: int, rel_tol: float,
                      cap_s: float) -> tuple[float, bool]:
    """Run timed blocks until the last WARMUP_WINDOW agree within rel_tol; (seconds, settled)."""
    t0 = clock.now()
    times: list[float] = []
    while True:
        times.append(clock.block(fn, inner))
        last = times[-WARMUP_WINDOW:]
        if len(last) == WARMUP_WINDOW and max(last) <= (1 + rel_tol) * min(last):
            return clock.now() - t0, True
        if clock.now() - t0 > cap_s:
            return clock.now() - t0, False


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return []


def repeated(fn: Callable[[], object], clock: Clock, work: float, *, rounds: int = 3,
             max_extra: int = 3, rel_tol: float = REL_TOL, budget_s: float = 0.2,
             warmup_cap_s: float = 2.0, pause_s: float = 0.05,
             setup: Callable[[], None] | None = None) -> Repeated:
    """`rounds` rounds of timing.measure after a warm-up until stable; more rounds (up to
    `max_extra`) while the best `rounds` disagree by more than rel_tol."""
    first = measure(fn, clock, setup=setup, budget_s=budget_s / 4, min_samples=1,
                    max_samples=3)
    warm_s, settled = warm_until_stable(fn, clock, first.inner, rel_tol, warmup_cap_s)
    out = Repeated(work, warmup_s=warm_s + first.warmup_s, warmed_up=settled)
    while len(out.rounds) < rounds or (out.spread(rounds) > rel_tol
                                       and len(out.rounds) < rounds + max_extra):
        if out.rounds:
            time.sleep(pause_s)  # separate windows: a burst of load hits one round, not all
        out.rounds.append(measure(fn, clock, setup=setup, budget_s=budget_s, min_samples=3,
                                  max_samples=30, warmup_calls=1, inner=first.inner))
        out.load_average = _load()
    return out
