"""Read a finished torch.profiler run into a WorkloadSession's record: per-operator self time,
communication ranges and device busy intervals, on the session's perf_counter clock."""

from __future__ import annotations

from typing import Any

from gpuplan.estimate.workload import WorkloadRecord

COMM_MARKERS = ("nccl", "c10d", "gloo", "allreduce", "all_reduce", "allgather", "all_gather",
                "reduce_scatter", "alltoall", "all_to_all")


def is_comm(name: str) -> bool:
    low = name.lower()
    return any(m in low for m in COMM_MARKERS)


def collect(prof: Any, raw: WorkloadRecord) -> None:
    """Fill raw.ops, raw.device_busy and the communication intervals from `prof`."""
    events = prof.events()
    mark = next((e for e in events if e.name == "gpuplan::mark"), None)
    offset = raw.mark_s - mark.time_range.start / 1e6 if mark is not None else 0.0
    cuda = raw.device == "cuda"
    for e in events:
        kind = str(e.device_type).rsplit(".", 1)[-1]
        if kind == "CUDA":
            raw.device_busy.append((e.time_range.start / 1e6 + offset,
                                    e.time_range.end / 1e6 + offset))
        elif is_comm(e.name) and e.cpu_parent is None:
            raw.intervals.append(("communication", e.time_range.start / 1e6 + offset,
                                  e.time_range.end / 1e6 + offset))
    for a in prof.key_averages():
        if not (a.key.startswith("aten::") or is_comm(a.key)):
            continue
        host = a.self_cpu_time_total / 1e6
        dev = getattr(a, "self_device_time_total", 0.0) / 1e6
        raw.ops.append({"name": a.key, "calls": int(a.count),
                        "time_s": dev if cuda else host, "host_time_s": host,
                        "device_time_s": dev if cuda else None,
                        "communication": is_comm(a.key)})
