"""Rendering of `gpuplan train`: the step, the run and the scaling table."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import table


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def render_train(con: Console, r: dict[str, Any]) -> None:
    """The table of `gpuplan train` from its JSON object."""
    lay = r["layout"]
    etp = f", etp {lay['etp']}" if lay.get("etp", lay["tp"]) != lay["tp"] else ""
    title = (f"{r['model']} on {r['gpus']} x {r['device']} (dp {lay['dp']}, tp {lay['tp']}, pp "
             f"{lay['pp']}, cp {lay['cp']}, ep {lay['ep']}{etp}, ZeRO {lay['zero']}), micro-batch "
             f"{lay['micro_batch']}, global batch {r['global_batch']}, seq {lay['seq_len']}")
    mem = r["memory"]
    if mem.get("memory_verdict") == "tight":
        con.print(f"TIGHT: {mem['verdict_note']}; try `gpuplan memory ... --fix` for a layout "
                  "that fits beyond doubt.")
    if not r["fits"]:
        con.print(f"DOES NOT FIT: would need {units.format_bytes(mem['total_bytes'])}"
                  f" per GPU of {units.format_bytes(mem['capacity_bytes'])} usable; the speed "
                  f"below is what it would run at if it fit. Try `gpuplan memory ... --fix` or "
                  f"--search.")
    t = table(title, [("", "left"), ("value", "right")],
              caption="MFU: model FLOPs (no recompute, attention in full) / dense peak; "
                      "HFU counts recomputation. Overlap: " + r["assumptions"]["overlap"]
                      + ". Recompute: " + r["assumptions"]["recompute"]
                      + "; loss: " + r["assumptions"]["loss"]
                      + ("; " + r["assumptions"]["documents"]
                         if "documents" in r["assumptions"] else "")
                      + ("; " + r["assumptions"]["fp8"] if "fp8" in r["assumptions"] else "")
                      + ". Efficiency: " + r["assumptions"]["efficiency"]["source"])
    t.add_row("step time", units.format_seconds(r["step_time_s"]))
    t.add_row("tokens / s", f"{r['tokens_per_s']:,.0f}")
    t.add_row("model TFLOP/s per GPU", f"{r['model_flops_per_s_per_gpu'] / 1e12:,.1f}")
    t.add_row("MFU / HFU", f"{_pct(r['mfu'])} / {_pct(r['hfu'])}")
    t.add_row("communication exposed / total",
              f"{units.format_seconds(r['comm_exposed_s'])} / "
              f"{units.format_seconds(r['comm_time_s'])}")
    t.add_row("pipeline bubble", _pct(r["bubble_fraction"]))
    t.add_row("memory per GPU", f"{units.format_bytes(r['memory']['total_bytes'])} of "
                                f"{units.format_bytes(r['memory']['capacity_bytes'])}")
    for k, v in r["breakdown_s"].items():
        if v:
            t.add_row(f"  {k.replace('_', ' ')}", f"{units.format_seconds(v)} "
                                                   f"({v / r['step_time_s']:.0%})")
    t.add_row("dominant term", r["dominant"].replace("_", " "))
    run = r.get("run")
    if run:
        t.add_row(f"run: {run['tokens']:.3g} tokens", f"{run['wall_days']:.3g} days, "
                                                      f"{r['gpu_hours']:,.0f} GPU-hours")
        t.add_row("energy", f"{run['energy_kwh']:,.0f} kWh (TDP x 0.8 x PUE 1.2)")
        if r["cost_usd"] is not None:
            t.add_row("cost", f"{units.format_usd(r['cost_usd'])} at "
                              f"${run['usd_per_gpu_hour']:.2f}/GPU-h")
    con.print(t)
    acc = r["assumptions"].get("accuracy")
    if acc:
        fresh = acc["fresh_holdout"]
        con.print(f"Expected error: on published runs of {acc['stack_class']}-class stacks "
                  f"whose source the fit left out, tokens/s was off by {acc['median_abs_error_pct']:g} "
                  f"% (median) and by at most {acc['p90_abs_error_pct']:g} % in 9 of 10 "
                  f"({acc['rows']} runs); on the latest fresh hold-out runs on A100/H100, "
                  f"{fresh['median_abs_error_pct']:g} % and {fresh['p90_abs_error_pct']:g} % "
                  f"({fresh['rows']} runs).")
        reg = acc.get("regime")
        if reg:
            why = (f": data-parallel syncs across nodes every < {reg['sync_tokens_cut']:,} "
                   "tokens per rank" if reg["regime"].endswith("heavy") else "")
            con.print(f"Runs like this one ({reg['regime']}{why}): "
                      f"{reg['median_abs_error_pct']:g} % median, {reg['p90_abs_error_pct']:g} % "
                      f"in 9 of 10 ({reg['rows']} published runs, their source left out).")
    if r.get("scaling"):
        s = table("scaling (data parallel; per-GPU batch fixed)",
                  [("GPUs", "right"), ("tokens/s", "right"), ("speedup", "right"),
                   ("efficiency", "right"), ("MFU", "right"), ("why", "left")])
        for p in r["scaling"]:
            s.add_row(str(p["gpus"]), f"{p['tokens_per_s']:,.0f}" if p["tokens_per_s"] else "-",
                      f"{p.get('speedup', 0):.2f}x" if p.get("speedup") else "-",
                      _pct(p.get("efficiency")), _pct(p.get("mfu")), p.get("why", ""))
        con.print(s)
