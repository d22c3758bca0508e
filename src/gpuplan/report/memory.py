"""Rendering of `gpuplan memory`: the breakdown, the verdict, the fix chain, the bar chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.files import write_atomic
from gpuplan.report.output import table


def _gb(n: float) -> str:
    return f"{units.format_bytes(n)} ({n / 2**30:.1f} GiB)"


def render_memory(con: Console, r: dict[str, Any], fix: list[dict[str, Any]] | None) -> None:
    """The table of `gpuplan memory` (and its fix chain) from its JSON object."""
    total, cap = r["total_bytes"], r["capacity_bytes"]
    verdict = "FITS" if r["fits"] else "DOES NOT FIT"
    if r.get("memory_verdict") == "tight":
        verdict = f"TIGHT, {r['verdict_note']}"
    elif r["fits"] and not r["fits_with_margin"]:
        verdict = f"FITS, TIGHT (less than the {r['safety_margin']:.0%} safety margin left)"
    t = table(f"{r['model']} {r['mode']} on {r['device']}: {verdict} "
              f"({total / cap:.0%} of {units.format_bytes(cap)}, margin "
              f"{units.format_bytes(r['margin_bytes'])})",
              [("per GPU", "left"), ("bytes", "right"), ("share", "right")],
              caption="GB = 1e9 bytes. Assumptions: " + ", ".join(
                  f"{k}={v}" for k, v in r["assumptions"].items()
                  if k not in ("parallel", "bytes_per_param", "capacity", "profile")))
    for k, v in r["per_gpu"].items():
        t.add_row(k, _gb(v), f"{v / total:.1%}" if total else "-")
        if k == "other":
            for ik, iv in r["other_items"].items():
                t.add_row(f"  {ik}", units.format_bytes(iv), "")
    t.add_row("total", _gb(total), "100%")
    t.add_row("capacity", _gb(cap), "")
    if r["mode"] == "infer":
        t.add_row("max batch at this context", str(r["max_batch"]),
                  f"{r['assumptions']['safety_margin']:.0%} margin kept")
        t.add_row("max context at this batch", f"{r['max_context']:,}", "")
        t.add_row("KV cache per token (this GPU)", units.format_bytes(r["kv_bytes_per_token"]),
                  "")
    else:
        bpp = r["bytes_per_param"]
        t.add_row("bytes per parameter (unsharded)" if not r.get("finetune") else
                  "bytes per parameter of full training (not used: see finetune)",
                  " + ".join(f"{v:g} {k}" for k, v in bpp.items()) + f" = {sum(bpp.values()):g}",
                  "")
        t.add_row("parameters on this GPU", f"{r['params_per_gpu']:,}", "")
        ft = r.get("finetune")
        if ft:
            t.add_row(f"{r['assumptions']['finetune']}: trainable adapter parameters",
                      f"{ft['trainable_params']:,}", f"rank {r['assumptions']['lora_rank']}")
            if ft["paged_optimizer_bytes"]:
                t.add_row("paged optimizer states (CPU-evictable, not in total)",
                          _gb(ft["paged_optimizer_bytes"]), "")
    con.print(t)
    prof = r["assumptions"].get("profile")
    if prof:
        con.print(f"profile {prof['path']} ({prof['device']}, {prof['date']}) recorded: "
                  f"{prof['note']}")
    if r["mode"] == "train" and r.get("note"):
        con.print(r["note"])
    if fix is not None:
        if not fix:
            con.print("It fits as configured; no changes needed." if r["fits"] else
                      "No change in the chain makes it fit.")
            return
        ft = table("fix chain (each step keeps the previous ones)",
                   [("#", "right"), ("change", "left"), ("total after", "right"),
                    ("fits", "left"), ("cost", "left")],
                   caption="fits: not declared out of memory; tight: within the memory "
                           "model's error band of capacity (training) or with less than the "
                           "safety margin left free (inference)")
        for i, s in enumerate(fix, 1):
            fits = "yes" if s["fits"] else "no"
            if s["fits"] and s.get("fits_with_margin") is False:
                fits = "tight"  # fits, but not with the safety margin kept free
            ft.add_row(str(i), s["change"], units.format_bytes(s["total_bytes"]), fits,
                       s["cost"])
        con.print(ft)
        last = fix[-1]
        if last["fits"] and last.get("fits_with_margin") is not False:
            con.print(f"run: {last['command']}")


def bar_chart(r: dict[str, Any], path: Path) -> None:
    """A stacked bar of the per-GPU breakdown against capacity."""
    from gpuplan.report.plot import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.6), dpi=120)
    left = 0.0
    parts = [(k, v) for k, v in r["per_gpu"].items() if k != "other"]
    parts += [(f"other: {k}", v) for k, v in r["other_items"].items()]
    for k, v in parts:
        ax.barh([0], [v / 1e9], left=left / 1e9, label=f"{k} {v / 1e9:.1f} GB")
        left += v
    ax.axvline(r["capacity_bytes"] / 1e9, color="k", ls="--", label="capacity")
    ax.set_yticks([])
    ax.set_xlabel("GB per GPU")
    ax.set_title(f"{r['model']} {r['mode']} on {r['device']}", fontsize=9)
    ax.legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    fig.tight_layout()
    write_atomic("--plot", path, fig.savefig)
    plt.close(fig)
