"""`gpuplan memory`: will it fit? Per-GPU breakdown, verdict with margin, and the fix chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.lora_opts import FinetuneOpt, LoraRankOpt, LoraTargetsOpt, PagedOpt, lora_config
from gpuplan.cli.options import (
    AttentionChoice,
    FinetuneChoice,
    FsdpChoice,
    Mode,
    OptimizerChoice,
    PrecisionChoice,
    RecomputeChoice,
    StoreDtype,
)
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.errors import InputError
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
                    ("fits", "left"), ("cost", "left")])
        for i, s in enumerate(fix, 1):
            ft.add_row(str(i), s["change"], units.format_bytes(s["total_bytes"]),
                       "yes" if s["fits"] else "no", s["cost"])
        con.print(ft)
        last = fix[-1]
        if last["fits"]:
            con.print(f"run: {last['command']}")


def _bar_chart(r: dict[str, Any], path: Path) -> None:
    from gpuplan.report.plot import _pyplot

    plt = _pyplot()
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
        micro_batch: Annotated[int, typer.Option("--micro-batch", min=1)] = 1,
        seq_len: Annotated[int, typer.Option("--seq-len", "-s", min=1)] = 2048,
        global_batch: Annotated[int | None, typer.Option("--global-batch", min=1)] = None,
        precision: Annotated[PrecisionChoice, typer.Option("--precision")] =
        PrecisionChoice.bf16_mixed,
        optimizer: Annotated[OptimizerChoice, typer.Option("--optimizer")] =
        OptimizerChoice.adamw,
        zero: Annotated[int, typer.Option("--zero", min=0, max=3)] = 0,
        fsdp: Annotated[FsdpChoice, typer.Option("--fsdp")] = FsdpChoice.none,
        dp: Annotated[int, typer.Option("--dp", min=1)] = 1,
        tp: Annotated[int, typer.Option("--tp", min=1)] = 1,
        pp: Annotated[int, typer.Option("--pp", min=1)] = 1,
        cp: Annotated[int, typer.Option("--cp", min=1)] = 1,
        ep: Annotated[int, typer.Option("--ep", min=1)] = 1,
        sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel")] = False,
        virtual_stages: Annotated[int, typer.Option("--virtual-stages", min=1)] = 1,
        recompute: Annotated[RecomputeChoice, typer.Option("--recompute")] =
        RecomputeChoice.none,
        attention: Annotated[AttentionChoice, typer.Option("--attention")] =
        AttentionChoice.flash,
        fused: Annotated[bool, typer.Option(
            "--fused", help="fused norm/activation kernels (Megatron, torch.compile)")] = False,
        grad_fp32: Annotated[bool, typer.Option(
            "--grad-fp32", help="keep/accumulate gradients in fp32 (Megatron main_grad)")] =
        False,
        offload_optimizer: Annotated[bool, typer.Option("--offload-optimizer")] = False,
        no_dropout: Annotated[bool, typer.Option("--no-dropout")] = False,
        target: Annotated[str, typer.Option(
            "--target", help="whose kernels: auto (the device's), cpu or cuda")] = "auto",
        batch: Annotated[int, typer.Option("--batch", "-b", min=1, help="infer: sequences")] = 1,
        context: Annotated[int, typer.Option("--context", min=1, help="infer: tokens each")] =
        4096,
        weight_dtype: Annotated[StoreDtype, typer.Option("--weight-dtype")] = StoreDtype.bf16,
        kv_dtype: Annotated[StoreDtype, typer.Option("--kv-dtype")] = StoreDtype.bf16,
        block_size: Annotated[int | None, typer.Option(
            "--block-size", min=1, help="paged KV block size (tokens)")] = None,
        margin: Annotated[float, typer.Option(
            "--margin", min=0.0, max=0.9, help="infer: memory kept free for max_batch")] = 0.10,
        context_overhead_gb: Annotated[float, typer.Option(
            "--cuda-context-gb", min=0.0, help="CUDA context + workspaces, GB")] = 0.537,
        fragmentation: Annotated[float | None, typer.Option(
            "--fragmentation", min=0.0, max=0.9,
            help="allocator fragmentation share (default 0.10 train, 0.05 infer)")] = None,
        finetune: FinetuneOpt = FinetuneChoice.full,
        lora_rank: LoraRankOpt = 16,
        lora_targets: LoraTargetsOpt = "all-linear",
        paged_optimizer: PagedOpt = None,
        fix: Annotated[bool, typer.Option("--fix", help="propose the cheapest fix chain")] =
        False,
        plot: Annotated[Path | None, typer.Option("--plot", help="write a bar chart")] = None,
        profile: ProfileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Memory per GPU (training or inference), whether it fits, and how to make it fit."""
        from gpuplan.estimate import fixes
        from gpuplan.estimate.inference import InferConfig, infer_memory
        from gpuplan.estimate.memory import TrainConfig, train_memory
        from gpuplan.specs.catalog import device_catalog, get_device, get_model

        if target not in ("auto", "cpu", "cuda"):
            raise InputError("--target", target, "auto, cpu or cuda")
        m, d = get_model(model), get_device(gpu)
        ctx_bytes = int(context_overhead_gb * 1e9) if d.kind != "cpu" else 0
        if mode is Mode.train:
            cfg = TrainConfig(
                micro_batch=micro_batch, seq_len=seq_len, precision=precision.value,
                optimizer=optimizer.value, zero=zero, fsdp=fsdp.value, dp=dp, tp=tp, pp=pp,
                cp=cp, ep=ep, sp=sequence_parallel, virtual_stages=virtual_stages,
                recompute=recompute.value, attention=attention.value,  # type: ignore[arg-type]
                grad_dtype="fp32" if grad_fp32 else "auto", offload_optimizer=offload_optimizer,
                global_batch=global_batch, dropout=not no_dropout, cuda_context_bytes=ctx_bytes,
                target=target, fused=fused,  # type: ignore[arg-type]
                fragmentation=0.10 if fragmentation is None else fragmentation,
                lora=lora_config(finetune, lora_rank, lora_targets, paged_optimizer))
            res = train_memory(m, d, cfg)
            steps = (fixes.train_fix_chain(m, d, cfg, model, catalog=list(device_catalog()))
                     if fix else None)
        else:
            icfg = InferConfig(batch=batch, context=context, weight_dtype=weight_dtype.value,
                               kv_dtype=kv_dtype.value, tp=tp, block_size=block_size,
                               margin=margin, cuda_context_bytes=ctx_bytes,
                               fragmentation=0.05 if fragmentation is None else fragmentation)
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
