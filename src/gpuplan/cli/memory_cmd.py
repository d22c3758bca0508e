"""`gpuplan memory`: will it fit? Per-GPU breakdown, verdict with margin, and the fix chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.job_opts import (
    DEFAULTS,
    AttentionOpt,
    CpOpt,
    CudaContextOpt,
    EpOpt,
    FragmentationOpt,
    FsdpOpt,
    FusedOpt,
    GlobalBatchOpt,
    GradFp32Opt,
    MicroBatchOpt,
    NoDropoutOpt,
    OffloadOpt,
    OptimizerOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    SeqLenOpt,
    SpOpt,
    TargetOpt,
    TpOpt,
    VirtualOpt,
    ZeroOpt,
    cuda_context_bytes,
    train_job,
    train_only_given,
)
from gpuplan.cli.options import Mode, StoreDtype
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.report.output import emit, table


def _gb(n: float) -> str:
    return f"{units.format_bytes(n)} ({n / 2**30:.1f} GiB)"


def _render(con: Console, r: dict[str, Any], fix: list[dict[str, Any]] | None) -> None:
    total, cap = r["total_bytes"], r["capacity_bytes"]
    verdict = "FITS" if r["fits"] else "DOES NOT FIT"
    if r["fits"] and not r["fits_with_margin"]:
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
        t.add_row("bytes per parameter (unsharded)",
                  " + ".join(f"{v:g} {k}" for k, v in bpp.items()) + f" = {sum(bpp.values()):g}",
                  "")
        t.add_row("parameters on this GPU", f"{r['params_per_gpu']:,}", "")
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
                    ("fits", "left"), ("cost", "left")])
        for i, s in enumerate(fix, 1):
            ft.add_row(str(i), s["change"], units.format_bytes(s["total_bytes"]),
                       "yes" if s["fits"] else "no", s["cost"])
        con.print(ft)
        last = fix[-1]
        if last["fits"]:
            con.print(f"run: {last['command']}")


def _bar_chart(r: dict[str, Any], path: Path) -> None:
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
    fig.savefig(path)
    plt.close(fig)


def register(app: typer.Typer) -> None:
    @app.command()
    def memory(
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g", help="device name or .toml")] = "h100",
        mode: Annotated[Mode, typer.Option("--mode")] = Mode.train,
        micro_batch: MicroBatchOpt = DEFAULTS["micro_batch"],
        seq_len: SeqLenOpt = DEFAULTS["seq_len"],
        global_batch: GlobalBatchOpt = DEFAULTS["global_batch"],
        precision: PrecisionOpt = DEFAULTS["precision"],
        optimizer: OptimizerOpt = DEFAULTS["optimizer"],
        zero: ZeroOpt = DEFAULTS["zero"],
        fsdp: FsdpOpt = DEFAULTS["fsdp"],
        dp: Annotated[int, typer.Option("--dp", min=1, rich_help_panel="Parallel layout",
                                        help="data parallel GPUs")] = 1,
        tp: TpOpt = DEFAULTS["tp"],
        pp: PpOpt = DEFAULTS["pp"],
        cp: CpOpt = DEFAULTS["cp"],
        ep: EpOpt = DEFAULTS["ep"],
        sequence_parallel: SpOpt = DEFAULTS["sequence_parallel"],
        virtual_stages: VirtualOpt = DEFAULTS["virtual_stages"],
        recompute: RecomputeOpt = DEFAULTS["recompute"],
        attention: AttentionOpt = DEFAULTS["attention"],
        fused: FusedOpt = DEFAULTS["fused"],
        grad_fp32: GradFp32Opt = DEFAULTS["grad_fp32"],
        offload_optimizer: OffloadOpt = DEFAULTS["offload_optimizer"],
        no_dropout: NoDropoutOpt = DEFAULTS["no_dropout"],
        target: TargetOpt = DEFAULTS["target"],
        weight_dtype: Annotated[StoreDtype, typer.Option("--weight-dtype")] = StoreDtype.bf16,
        kv_dtype: Annotated[StoreDtype, typer.Option("--kv-dtype")] = StoreDtype.bf16,
        block_size: Annotated[int | None, typer.Option(
            "--block-size", min=1, help="paged KV block size (tokens)")] = None,
        margin: Annotated[float, typer.Option(
            "--margin", min=0.0, max=0.9, help="infer: memory kept free for max_batch")] = 0.10,
        cuda_context_gb: CudaContextOpt = DEFAULTS["cuda_context_gb"],
        fragmentation: FragmentationOpt = DEFAULTS["fragmentation"],
        fix: Annotated[bool, typer.Option("--fix", help="propose the cheapest fix chain")] =
        False,
        plot: Annotated[Path | None, typer.Option("--plot", help="write a bar chart")] = None,
        profile: ProfileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Memory per GPU (training or inference), whether it fits, and how to make it fit."""
        from gpuplan.estimate import fixes
        from gpuplan.estimate.inference import InferConfig, infer_memory
        from gpuplan.estimate.memory import train_memory
        from gpuplan.specs.catalog import device_catalog, get_device, get_model
        from gpuplan.specs.workload import INFER_FRAGMENTATION, refuse_train_only

        m, d = get_model(model), get_device(gpu)
        o = dict(locals())
        if mode is Mode.train:
            cfg = train_job(o, dp, d.kind)
            res = train_memory(m, d, cfg)
            steps = (fixes.train_fix_chain(m, d, cfg, model, catalog=list(device_catalog()))
                     if fix else None)
        else:
            refuse_train_only(train_only_given(o))
            icfg = InferConfig(batch=micro_batch, context=seq_len,
                               weight_dtype=weight_dtype.value, kv_dtype=kv_dtype.value, tp=tp,
                               block_size=block_size, margin=margin,
                               cuda_context_bytes=cuda_context_bytes(cuda_context_gb, d.kind),
                               fragmentation=INFER_FRAGMENTATION if fragmentation is None
                               else fragmentation)
            res = infer_memory(m, d, icfg)
            steps = (fixes.infer_fix_chain(m, d, icfg, model, catalog=list(device_catalog()))
                     if fix else None)
        r = {"model": m.name, **res.to_json()}
        if profile is not None:
            from gpuplan.cli.profile_opt import describe, load

            prof = load(profile)
            r["assumptions"] = {**r["assumptions"], "profile": {
                **describe(prof, d), "note": "a measured profile changes speeds, not bytes: "
                                             "these memory figures are the same without it"}}
        if steps is not None:
            r["fix"] = [s.__dict__ for s in steps]
        if plot is not None:
            _bar_chart(r, plot)
            r["plot"] = str(plot)
        emit(r, as_json, lambda con: _render(con, r, r.get("fix")))
