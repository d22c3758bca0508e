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
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for e in events:
        if str(e.device_type).rsplit(".", 1)[-1] != "CPU":
            continue
        if not (e.name.startswith("aten::") or is_comm(e.name)):
            continue
        key = (e.name, phase_of(e))
        row = rows.setdefault(key, {"name": e.name, "phase": key[1], "calls": 0, "time_s": 0.0,
                                    "host_time_s": 0.0, "communication": is_comm(e.name)})
        row["calls"] += 1
        host = e.self_cpu_time_total / 1e6
        row["host_time_s"] += host
        row["time_s"] += getattr(e, "self_device_time_total", 0.0) / 1e6 if cuda else host
    raw.ops.extend(rows.values())


def phase_of(e: Any) -> str:
    """optimizer (inside Optimizer.step), backward (inside the autograd engine), else forward
    (the model, the loss and whatever else the step runs on the host)."""
    p = e
    while p is not None:
        if p.name.startswith("Optimizer.step"):
            return "optimizer"
        if p.name.startswith("autograd::engine"):
            return "backward"
        p = p.cpu_parent
    return "forward"
