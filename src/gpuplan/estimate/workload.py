"""Where a measured training step goes (pure; the recording is gpuplan.measure.workload).

- Step time: wall time from the start of the first measured step to the end of the last,
  divided by the steps (on CUDA the device is synchronised at both ends, nowhere else).
- Breakdown: every instant of the window goes to one phase, the innermost cause first:
  communication > host_to_device > input_wait > optimizer > backward > forward; the rest is
  `other` (Python between phases, logging, host reads outside the model). The phases are
  host-side times: on CUDA the host runs ahead of the device and waits where it synchronises.
- Per-op roofline share: time the op would take at the attainable roofline (this machine's
  measured matmul rate and memory bandwidth, or the datasheet's), over its measured time
  (Williams, Waterman & Patterson 2009).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

PHASES = ("input_wait", "host_to_device", "forward", "backward", "optimizer", "communication",
          "other")
PRIORITY = ("communication", "host_to_device", "input_wait", "optimizer", "backward", "forward")


@dataclass
class WorkloadRecord:
    """What a profiling session recorded; all times are one monotonic clock, in seconds."""

    device: str
    bounds: list[float] = field(default_factory=list)
    """start of the first measured step, then the end of each measured step"""
    intervals: list[tuple[str, float, float]] = field(default_factory=list)
    """(phase, start, end); phases from PRIORITY, nesting allowed"""
    reads: list[tuple[str, str, int, float, float]] = field(default_factory=list)
    """host reads from user code: (method, file, line, start, end)"""
    copies: list[tuple[int, bool, bool, float, float]] = field(default_factory=list)
    """host-to-device copies: (bytes, pinned, non_blocking, start, end)"""
    ops: list[dict[str, Any]] = field(default_factory=list)
    """per operator over the window: name, calls, time_s (device time on CUDA), communication"""
    device_busy: list[tuple[float, float]] = field(default_factory=list)
    loaders: list[dict[str, Any]] = field(default_factory=list)
    optimizers: list[str] = field(default_factory=list)
    model_calls: int = 0
    mark_s: float = 0.0
    peak_memory_bytes: int | None = None
    capacity_bytes: int | None = None
    steps_seen: int = 0

    @property
    def steps(self) -> int:
        return max(len(self.bounds) - 1, 0)


def attribute(intervals: list[tuple[str, float, float]], t0: float, t1: float
              ) -> dict[str, float]:
    """Seconds of [t0, t1] per phase, each instant to the highest-priority phase covering it."""
    rank = {p: i for i, p in enumerate(PRIORITY)}
    points: list[tuple[float, int, str]] = []
    for label, a, b in intervals:
        a, b = max(a, t0), min(b, t1)
        if b > a:
            points += [(a, 1, label), (b, -1, label)]
    points.sort(key=lambda p: (p[0], p[1]))
    out = dict.fromkeys(PHASES, 0.0)
    active: dict[str, int] = defaultdict(int)
    last = t0
    for t, delta, label in points:
        if t > last:
            live = [p for p, n in active.items() if n > 0]
            out[min(live, key=rank.__getitem__) if live else "other"] += t - last
            last = t
        active[label] += delta
    out["other"] += max(t1 - last, 0.0)
    return out


def breakdown(rec: WorkloadRecord) -> tuple[float, dict[str, float], list[float]]:
    """(mean step time, mean seconds per phase per step, each step's time)."""
    n = rec.steps
    if n == 0:
        return 0.0, dict.fromkeys(PHASES, 0.0), []
    t0, t1 = rec.bounds[0], rec.bounds[-1]
    total = attribute(rec.intervals, t0, t1)
    per_step = [b - a for a, b in zip(rec.bounds, rec.bounds[1:], strict=False)]
    return (t1 - t0) / n, {k: v / n for k, v in total.items()}, per_step


def host_reads(rec: WorkloadRecord) -> dict[str, Any]:
    """Host reads per step and the user's source lines they come from."""
    n = max(rec.steps, 1)
    sites: dict[tuple[str, str, int], list[float]] = defaultdict(list)
    for method, fname, line, a, b in rec.reads:
        sites[(method, fname, line)].append(b - a)
    rows = [{"call": m, "file": f, "line": ln, "per_step": len(ts) / n,
             "time_s": sum(ts) / n}
            for (m, f, ln), ts in sorted(sites.items(), key=lambda kv: -len(kv[1]))]
    return {"per_step": len(rec.reads) / n, "time_s": sum(r["time_s"] for r in rows),
            "sites": rows}


def copies(rec: WorkloadRecord) -> dict[str, Any]:
    """Host-to-device bytes per step, pinned or pageable, and the achieved bandwidth."""
    n = max(rec.steps, 1)
    out: dict[str, Any] = {}
    for kind, pinned in (("pinned", True), ("pageable", False)):
        rows = [c for c in rec.copies if c[1] == pinned]
        nbytes = sum(c[0] for c in rows)
        secs = sum(c[4] - c[3] for c in rows)
        out[kind] = {"bytes": int(nbytes / n), "copies_per_step": len(rows) / n,
                     "time_s": secs / n, "non_blocking_per_step": sum(c[2] for c in rows) / n,
                     "bw_bytes_per_s": nbytes / secs if secs > 0 else None}
    return out


def merge(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def device_idle(rec: WorkloadRecord) -> dict[str, Any] | None:
    """CUDA: time per step the device ran no kernel or copy, and the part of it that began
    while the host was blocked in a host read (the stall a read causes)."""
    if rec.device != "cuda" or rec.steps == 0:
        return None
    t0, t1 = rec.bounds[0], rec.bounds[-1]
    busy = merge([(max(a, t0), min(b, t1)) for a, b in rec.device_busy if b > t0 and a < t1])
    gaps, last = [], t0
    for a, b in busy:
        if a > last:
            gaps.append((last, a))
        last = max(last, b)
    if t1 > last:
        gaps.append((last, t1))
    reads = [(r[3], r[4]) for r in rec.reads]
    after_read = sum(b - a for a, b in gaps if any(ra <= a <= rb for ra, rb in reads))
    n = rec.steps
    idle = sum(b - a for a, b in gaps)
    return {"idle_s": idle / n, "busy_fraction": 1 - idle / (t1 - t0) if t1 > t0 else 0.0,
            "gaps_per_step": len(gaps) / n, "after_host_read_s": after_read / n,
            "largest_gap_s": max((b - a for a, b in gaps), default=0.0)}
