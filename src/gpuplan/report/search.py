"""Rendering of `gpuplan train --search`: the ranked layouts and why."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import table


def render_search(con: Console, r: dict[str, Any], title: str) -> None:
    """The ranked layouts of `gpuplan train --search` from its JSON object."""
    t = table(f"{title}: {r['evaluated']:,} layouts evaluated in {r['search_s']:.2f} s "
              f"({r['layouts_per_s']:,.0f}/s), {r['fitting']:,} fit",
              [("#", "right"), ("dp", "right"), ("tp", "right"), ("pp", "right"),
               ("v", "right"), ("cp", "right"), ("ep", "right"), ("ZeRO", "right"),
               ("recompute", "left"), ("mb", "right"), ("step", "right"), ("tokens/s", "right"),
               ("MFU", "right"), ("memory", "right"), ("why", "left")],
              caption="ranked by tokens/s (on a fixed GPU count also by cost per token); "
                      "step times are `gpuplan train`'s for the same layout")
    for i, row in enumerate(r["top"], 1):
        t.add_row(str(i), str(row["dp"]), str(row["tp"]), str(row["pp"]),
                  str(row["virtual_stages"]), str(row["cp"]), str(row["ep"]), str(row["zero"]),
                  row["recompute"], str(row["micro_batch"]),
                  units.format_seconds(row["step_time_s"]), f"{row['tokens_per_s']:,.0f}",
                  f"{row['mfu']:.1%}", units.format_bytes(row["memory_bytes"]), row["why"])
    con.print(t)
