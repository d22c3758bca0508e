"""Rendering of `gpuplan train --search`: the ranked layouts and why."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan.report.output import column_scale, num, table

_RECOMPUTE = {"none": "-", "selective": "sel", "full": "full"}


def render_search(con: Console, r: dict[str, Any], title: str) -> None:
    """The ranked layouts of `gpuplan train --search` from its JSON object."""
    top = r["top"]
    su, ss = column_scale([row["step_time_s"] for row in top], "s")
    mu, ms = column_scale([row["memory_bytes"] for row in top], "B")
    t = table(f"{title}: {r['evaluated']:,} layouts evaluated in {r['search_s']:.2f} s "
              f"({r['layouts_per_s']:,.0f}/s), {r['fitting']:,} fit",
              [("#", "right"), ("dp", "right"), ("tp", "right"), ("pp", "right"),
               ("v", "right"), ("cp", "right"), ("ep", "right"), ("Z", "right"),
               ("rc", "left"), ("mb", "right"), (f"step {su}", "right"), ("tok/s", "right"),
               ("MFU", "right"), (mu, "right"), ("why", "left")],
              caption="dp/tp/pp/cp/ep = data, tensor, pipeline, context, expert parallel "
                      "degrees; v = virtual pipeline stages per GPU; Z = ZeRO stage; rc = "
                      "activation recompute (- none, sel selective, full); mb = micro-batch; "
                      f"tok/s = tokens per second; {mu} = memory per GPU (* tight: within the "
                      "memory model's error band of capacity); why = the step's "
                      "dominant term. Ranked by tokens/s (on a fixed GPU count also by cost per "
                      "token); step times are `gpuplan train`'s for the same layout.",
             )
    for i, row in enumerate(top, 1):
        t.add_row(str(i), str(row["dp"]), str(row["tp"]), str(row["pp"]),
                  str(row["virtual_stages"]), str(row["cp"]), str(row["ep"]), str(row["zero"]),
                  _RECOMPUTE.get(row["recompute"], row["recompute"]), str(row["micro_batch"]),
                  num(row["step_time_s"], ss), f"{row['tokens_per_s']:,.0f}",
                  f"{row['mfu']:.1%}", num(row["memory_bytes"], ms)
                  + ("*" if row.get("memory_verdict") == "tight" else ""), row["why"])
    con.print(t)
