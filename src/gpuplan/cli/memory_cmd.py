"""`gpuplan memory`: will it fit? Per-GPU breakdown, verdict with margin, and the fix chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import default_len, finite, memory_rules
from gpuplan.cli.html_opt import HtmlOpt
from gpuplan.cli.job_opts import (
    DEFAULTS,
    AttentionOpt,
    CpOpt,
    CudaContextOpt,
    DocumentLenOpt,
    EpOpt,
    EtpOpt,
    FinetuneOpt,
    FragmentationOpt,
    FsdpOpt,
    FusedOpt,
    GlobalBatchOpt,
    GradComputeOpt,
    GradFp32Opt,
    LoraRankOpt,
    LoraTargetsOpt,
    LossOpt,
    MicroBatchOpt,
    NoDropoutOpt,
    OffloadOpt,
    OptimizerOpt,
    PagedOpt,
    PpOpt,
    PrecisionOpt,
    RecomputeOpt,
    SelectiveOpt,
    SeqLenOpt,
    SpOpt,
    TargetOpt,
    TpOpt,
    VirtualOpt,
    ZeroOpt,
    cuda_context_bytes,
    stack_job,
    train_job,
    train_only_given,
)
from gpuplan.cli.options import Mode, StoreDtype
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.estimate.command_results import MemoryCheck
from gpuplan.report.files import PLOT_SUFFIXES, output_path
from gpuplan.report.memory import bar_chart, render_memory
from gpuplan.report.output import emit
from gpuplan.specs.limits import MAX_GPUS, MAX_SEQ
from gpuplan.specs.workload import TrainConfig


def register(app: typer.Typer) -> None:
    @app.command()
    def memory(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g", help="device name or .toml")] = "h100",
        mode: Annotated[Mode, typer.Option("--mode")] = Mode.train,
        micro_batch: MicroBatchOpt = DEFAULTS["micro_batch"],
        seq_len: SeqLenOpt = DEFAULTS["seq_len"],
        global_batch: GlobalBatchOpt = DEFAULTS["global_batch"],
        precision: PrecisionOpt = DEFAULTS["precision"],
        optimizer: OptimizerOpt = DEFAULTS["optimizer"],
        loss: LossOpt = DEFAULTS["loss"],
        document_len: DocumentLenOpt = DEFAULTS["document_len"],
        zero: ZeroOpt = DEFAULTS["zero"],
        fsdp: FsdpOpt = DEFAULTS["fsdp"],
        dp: Annotated[int, typer.Option("--dp", min=1, max=MAX_GPUS, rich_help_panel="Parallel layout",
                                        help="data parallel GPUs")] = 1,
        tp: TpOpt = DEFAULTS["tp"],
        pp: PpOpt = DEFAULTS["pp"],
        cp: CpOpt = DEFAULTS["cp"],
        ep: EpOpt = DEFAULTS["ep"],
        etp: EtpOpt = DEFAULTS["etp"],
        sequence_parallel: SpOpt = DEFAULTS["sequence_parallel"],
        virtual_stages: VirtualOpt = DEFAULTS["virtual_stages"],
        recompute: RecomputeOpt = DEFAULTS["recompute"],
        selective: SelectiveOpt = DEFAULTS["selective"],
        attention: AttentionOpt = DEFAULTS["attention"],
        fused: FusedOpt = DEFAULTS["fused"],
        grad_fp32: GradFp32Opt = DEFAULTS["grad_fp32"],
        grad_compute_dtype: GradComputeOpt = DEFAULTS["grad_compute_dtype"],
        offload_optimizer: OffloadOpt = DEFAULTS["offload_optimizer"],
        no_dropout: NoDropoutOpt = DEFAULTS["no_dropout"],
        target: TargetOpt = DEFAULTS["target"],
        weight_dtype: Annotated[StoreDtype, typer.Option("--weight-dtype")] = StoreDtype.bf16,
        kv_dtype: Annotated[StoreDtype, typer.Option("--kv-dtype")] = StoreDtype.bf16,
        block_size: Annotated[int | None, typer.Option(
            "--block-size", min=1, max=MAX_SEQ, help="paged KV block size (tokens)")] = None,
        margin: Annotated[float, typer.Option(
            "--margin", min=0.0, max=0.9, callback=finite(0.0, 0.9),
            help="infer: memory kept free for max_batch")] = 0.10,
        cuda_context_gb: CudaContextOpt = DEFAULTS["cuda_context_gb"],
        fragmentation: FragmentationOpt = DEFAULTS["fragmentation"],
        finetune: FinetuneOpt = DEFAULTS["finetune"],
        lora_rank: LoraRankOpt = DEFAULTS["lora_rank"],
        lora_targets: LoraTargetsOpt = DEFAULTS["lora_targets"],
        paged_optimizer: PagedOpt = DEFAULTS["paged_optimizer"],
        fix: Annotated[bool, typer.Option("--fix", help="propose the cheapest fix chain")] =
        False,
        plot: Annotated[Path | None, typer.Option("--plot", help="write a bar chart")] = None,
        framework: Annotated[str | None, typer.Option(
            "--framework", help="train: stack profile (megatron, megatron-lm, nemo, fsdp, deepspeed, "
            "llm-foundry, hf, aa-scaling) setting fused kernels and the gradient dtype")] = None,
        profile: ProfileOpt = None,
        html: HtmlOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Memory per GPU (training or inference), whether it fits, and how to make it fit."""
        from gpuplan.estimate import fixes
        from gpuplan.estimate.inference import InferConfig, infer_memory
        from gpuplan.estimate.memory import train_memory
        from gpuplan.specs.catalog import device_catalog, get_device, get_model
        from gpuplan.specs.workload import INFER_FRAGMENTATION, refuse_train_only

        if plot is not None:
            plot = output_path("--plot", plot, PLOT_SUFFIXES)
        m, d = get_model(model), get_device(gpu)
        seq_len = default_len(m, seq_len, TrainConfig().seq_len)
        memory_rules(ctx, m, d, mode, locals())
        o = dict(locals())
        if mode is Mode.train:
            from gpuplan.specs.framework import resolve_framework

            # as `gpuplan train` sets the job up: unnamed, the stack the layout implies
            job = train_job(o, dp, d.kind)
            fw = resolve_framework(framework, job)
            cfg, sharding = stack_job(ctx, fw, job)
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
        check = MemoryCheck(m.name, res, fix=steps)
        if mode is Mode.train:
            check.framework = {**fw.describe(), **({"sharding": sharding} if sharding else {})}
        if profile is not None:
            from gpuplan.cli.profile_opt import describe, load

            check.profile = {**describe(load(profile), d),
                             "note": "a measured profile changes speeds, not bytes: "
                                     "these memory figures are the same without it"}
        if plot is not None:
            check.plot_path = str(plot)
            bar_chart(check.to_json(), plot)
        r = check.to_json()
        emit(r, as_json, lambda con: render_memory(con, r, r.get("fix")))
        if html is not None:
            from gpuplan.cli.html_opt import write

            write(html, "memory", r, ctx, as_json)
