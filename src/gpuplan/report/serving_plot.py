"""Serving load curve: output tokens/s (x) against p99 TTFT and p99 TPOT (y, log), one line
per scheduler, as the arrival rate grows past saturation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuplan.errors import GpuplanError
from gpuplan.report.plot import pyplot


def curve_chart(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), dpi=120)
    for sched in dict.fromkeys(r["scheduler"] for r in rows):
        pts = [r for r in rows if r["scheduler"] == sched]
        x = [r["output_tokens_per_s"] for r in pts]
        for ax, key, label in ((axes[0], "ttft_p99_s", "p99 TTFT (s)"),
                               (axes[1], "tpot_p99_s", "p99 TPOT (s)")):
            ax.plot(x, [r[key] for r in pts], marker="o", label=sched)
            ax.set_xlabel("output tokens/s")
            ax.set_ylabel(label)
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"{title}: throughput vs p99 latency as the load grows", fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path)
    except OSError as e:
        raise GpuplanError(f"--plot: cannot write {path} ({e.strerror})") from None
    finally:
        plt.close(fig)
    return path
