"""Charts of a command's JSON result, shared by the HTML reports and the web page.

`charts_for(command, result)` returns [(title, svg)]. Commands register their charts here;
a command without charts gets none (its report still has its inputs, numbers and assumptions).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuplan import units
from gpuplan.report import svg

Chart = tuple[str, str]
ChartFn = Callable[[dict[str, Any]], list[Chart]]
_CHARTS: dict[str, ChartFn] = {}


def register_charts(command: str, fn: ChartFn) -> None:
    """Declare the charts of `command`'s JSON result (serve, cost, profile... call this)."""
    _CHARTS[command] = fn


def charts_for(command: str, result: dict[str, Any]) -> list[Chart]:
    fn = _CHARTS.get(command)
    return fn(result) if fn is not None else []


def memory_parts(r: dict[str, Any]) -> list[tuple[str, float]]:
    """The per-GPU breakdown with 'other' split into its items (they sum to total_bytes)."""
    parts = [(k, float(v)) for k, v in r["per_gpu"].items() if k != "other"]
    items = r.get("other_items") or {}
    parts += [(f"other: {k}", float(v)) for k, v in items.items()] if items else \
        [("other", float(r["per_gpu"].get("other", 0)))]
    return parts


def memory_chart(r: dict[str, Any], title: str | None = None) -> Chart:
    t = title or f"memory per GPU: {r.get('model', '')} {r.get('mode', 'train')} on {r['device']}"
    return t, svg.stacked_bar(memory_parts(r), float(r["capacity_bytes"]), t,
                              units.format_bytes, testid="chart-memory")


def _memory(r: dict[str, Any]) -> list[Chart]:
    return [memory_chart(r)]


def _roofline(r: dict[str, Any]) -> list[Chart]:
    from gpuplan.specs.catalog import get_device

    d = get_device(r["device"])
    roofs = [(dt, d.peak(dt) or 0.0) for dt in ("fp8", "bf16", "fp32") if d.peak(dt)]
    pts = [{"name": o["name"], "intensity": o["intensity"], "share": o["share"],
            "bound": o["bound"], "attained": o["executed_flops"] / o["time_s"]}
           for o in r["ops"] if o["flops"] > 0 and o["bytes"] > 0 and o["time_s"] > 0]
    t = (f"roofline: {r['model']} {r['phase']} on {r['device']}, batch {r['batch']}, "
         f"seq {r['seq_len']}")
    comp = sorted(r["time_by_component"].items(), key=lambda kv: -kv[1])
    t2 = f"where the step's {units.format_seconds(r['total_time_s'])} go (by component)"
    return [(t, svg.roofline(roofs, d.mem_bw_bytes_per_s, pts, t, units.format_flops_per_s)),
            (t2, svg.hbars(comp, t2, units.format_seconds, testid="chart-time"))]


def _train(r: dict[str, Any]) -> list[Chart]:
    out: list[Chart] = []
    if r.get("fits") and r.get("breakdown_s"):
        t = f"training step {units.format_seconds(r['step_time_s'])}: where the time goes"
        items = [(k.replace("_", " "), v) for k, v in r["breakdown_s"].items() if v]
        out.append((t, svg.hbars(items, t, units.format_seconds, testid="chart-step")))
    scaling = [p for p in r.get("scaling") or [] if p.get("tokens_per_s")]
    if scaling:
        gpus = [float(p["gpus"]) for p in scaling]
        ideal = [scaling[0]["tokens_per_s"] * g / gpus[0] for g in gpus]
        t = "scaling: tokens/s against GPUs (data parallel, per-GPU batch fixed)"
        misses = [str(p["gpus"]) for p in r["scaling"] if not p.get("tokens_per_s")]
        if misses:
            t += f"; does not fit on {', '.join(misses)} GPU(s)"
        out.append((t, svg.curves([("estimated", gpus, [p["tokens_per_s"] for p in scaling]),
                                   ("linear", gpus, ideal)], t, "GPUs", "tokens / s",
                                  lambda v: f"{v:,.0f}", testid="chart-scaling")))
    if r.get("memory"):
        out.append(memory_chart({**r["memory"], "model": r["model"], "device": r["device"]}))
    return out


register_charts("memory", _memory)
register_charts("roofline", _roofline)
register_charts("train", _train)
