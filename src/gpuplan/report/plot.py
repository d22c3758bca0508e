"""Roofline chart: log-log, compute roofs per dtype, the bandwidth slope, each op a point sized
by its share of time and labelled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan import units
from gpuplan.errors import GpuplanError
from gpuplan.report.files import write_atomic
from gpuplan.specs.device import Device


def pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GpuplanError("--plot needs matplotlib: pip install 'gpuplan[plot]'") from None
    return plt


def roofline_chart(device: Device, points: list[dict[str, Any]], path: Path, title: str,
                   label_top: int = 10, dtypes: tuple[str, ...] = ("fp8", "bf16", "tf32", "fp32"),
                   bandwidth: float | None = None,
                   legend: tuple[str, str] = ("compute-bound op (size = time share)",
                                              "memory-bound op")) -> Path:
    """points: dicts with name, intensity (FLOP/B), attained (FLOP/s), share (0..1) and
    optionally label (the annotation; default 'name (share)')."""
    plt = pyplot()
    bw = bandwidth or device.mem_bw_bytes_per_s
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=120)
    lo = 0.01
    points = [p for p in points if p["intensity"] >= lo and p["attained"] > 0]
    xs = [p["intensity"] for p in points] or [1.0]
    hi = max(max(xs) * 4, 4000.0)
    colours = {"fp8": "#d62728", "bf16": "#1f77b4", "fp16": "#1f77b4", "tf32": "#2ca02c",
               "fp32": "#7f7f7f", "int8": "#9467bd"}
    for dt in dtypes:
        peak = device.peak(dt)
        if not peak:
            continue
        ridge = peak / bw
        ax.plot([lo, ridge, hi], [bw * lo, peak, peak], color=colours.get(dt, "k"), lw=1.6,
                label=f"{dt} roof {units.format_flops_per_s(peak)} (ridge {ridge:,.3g} FLOP/B)")
    ax.plot([], [], " ", label=f"memory slope {units.format_bandwidth(bw)}")
    sizes = [40 + 1600 * p["share"] for p in points]
    cmap = {"compute": "#ff7f0e", "memory": "#17becf"}
    ax.scatter([p["intensity"] for p in points], [p["attained"] for p in points], s=sizes,
               c=[cmap[p["bound"]] for p in points], alpha=0.65, edgecolors="k", linewidths=0.5,
               zorder=3)
    for i, p in enumerate(sorted(points, key=lambda p: -p["share"])[:label_top]):
        name = p["name"].removeprefix("layers.")
        ax.annotate(p.get("label") or f"{name} ({p['share']:.0%})", (p["intensity"], p["attained"]),
                    fontsize=7, xytext=(-150 if i % 2 else 6, -12 * (i // 2) - 4),
                    textcoords="offset points", arrowprops={"arrowstyle": "-", "lw": 0.4,
                                                            "alpha": 0.6})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attained FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.scatter([], [], c=cmap["compute"], label=legend[0])
    ax.scatter([], [], c=cmap["memory"], label=legend[1])
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    try:
        write_atomic("--plot", path, fig.savefig)
    finally:
        plt.close(fig)
    return path
