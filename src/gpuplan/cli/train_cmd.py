"""`gpuplan train`: step time, MFU, communication, bubble, memory, run totals, scaling, search."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.cost_cmd import PricesOpt, on_demand_price
from gpuplan.cli.guards import default_len, finite, train_rules
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
    Fp8RecipeOpt,
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
    stack_job,
    train_job,
)
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.errors import InputError
from gpuplan.report.output import emit
from gpuplan.report.train import render_train
from gpuplan.specs.device import Device
from gpuplan.specs.limits import (
    MAX_GPUS,
    MAX_LINK_GB_PER_S,
    MAX_SEARCH_TOP,
    MAX_TOKENS,
    MAX_USD_PER_GPU_HOUR,
)
from gpuplan.specs.workload import TrainConfig


def train_price(d: Device, flag: float | None, prices: Path | None) -> dict[str, Any]:
    """The rate a run is costed at: the flag, the price basis, else the device file's price."""
    price = on_demand_price(d.name, flag, prices)
    if price["usd_per_gpu_hour"] is None and d.cloud_usd_per_hour:
        price = {"usd_per_gpu_hour": d.cloud_usd_per_hour,
                 "source": "not on the price basis: the device file's cloud price ("
                           + d.provenance["cloud_usd_per_hour"].source + ")"}
    return price


def register(app: typer.Typer) -> None:
    @app.command()
    def train(
        ctx: typer.Context,
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g")] = "h100",
        gpus: Annotated[int, typer.Option("--gpus", "-n", min=1, max=MAX_GPUS)] = 8,
        gpus_per_node: Annotated[int | None, typer.Option(
            "--gpus-per-node", min=1, max=MAX_GPUS,
            help="GPUs sharing the scale-up link (default: the device's node); naming the "
                 "host size of a rack-scale domain (4 on GB200 NVL72) keeps the domain")] = None,
        scale_up_gbps: Annotated[float | None, typer.Option(
            "--scale-up-gbps", min=0.001, callback=finite(0.001, MAX_LINK_GB_PER_S),
            help="GPU-GPU link in a node, GB/s per direction")] = None,
        scale_out_gbps: Annotated[float | None, typer.Option(
            "--scale-out-gbps", min=0.001, callback=finite(0.001, MAX_LINK_GB_PER_S),
            help="network per GPU, GB/s per direction")] = None,
        dp: Annotated[int | None, typer.Option(
            "--dp", min=1, max=MAX_GPUS, rich_help_panel="Parallel layout",
            help="data parallel GPUs (default: the rest)")] = None,
        tp: TpOpt = DEFAULTS["tp"],
        pp: PpOpt = DEFAULTS["pp"],
        cp: CpOpt = DEFAULTS["cp"],
        ep: EpOpt = DEFAULTS["ep"],
        etp: EtpOpt = DEFAULTS["etp"],
        zero: ZeroOpt = DEFAULTS["zero"],
        fsdp: FsdpOpt = DEFAULTS["fsdp"],
        recompute: RecomputeOpt = DEFAULTS["recompute"],
        selective: SelectiveOpt = DEFAULTS["selective"],
        sequence_parallel: SpOpt = DEFAULTS["sequence_parallel"],
        virtual_stages: VirtualOpt = DEFAULTS["virtual_stages"],
        attention: AttentionOpt = DEFAULTS["attention"],
        fused: FusedOpt = DEFAULTS["fused"],
        precision: PrecisionOpt = DEFAULTS["precision"],
        fp8_recipe: Fp8RecipeOpt = DEFAULTS["fp8_recipe"],
        optimizer: OptimizerOpt = DEFAULTS["optimizer"],
        loss: LossOpt = DEFAULTS["loss"],
        document_len: DocumentLenOpt = DEFAULTS["document_len"],
        micro_batch: MicroBatchOpt = DEFAULTS["micro_batch"],
        global_batch: GlobalBatchOpt = DEFAULTS["global_batch"],
        seq_len: SeqLenOpt = DEFAULTS["seq_len"],
        grad_fp32: GradFp32Opt = DEFAULTS["grad_fp32"],
        grad_compute_dtype: GradComputeOpt = DEFAULTS["grad_compute_dtype"],
        offload_optimizer: OffloadOpt = DEFAULTS["offload_optimizer"],
        no_dropout: NoDropoutOpt = DEFAULTS["no_dropout"],
        target: TargetOpt = DEFAULTS["target"],
        cuda_context_gb: CudaContextOpt = DEFAULTS["cuda_context_gb"],
        fragmentation: FragmentationOpt = DEFAULTS["fragmentation"],
        finetune: FinetuneOpt = DEFAULTS["finetune"],
        lora_rank: LoraRankOpt = DEFAULTS["lora_rank"],
        lora_targets: LoraTargetsOpt = DEFAULTS["lora_targets"],
        paged_optimizer: PagedOpt = DEFAULTS["paged_optimizer"],
        tokens: Annotated[float | None, typer.Option(
            "--tokens", min=1, callback=finite(1, MAX_TOKENS),
            help="tokens to train on (default: 20 per parameter)")] = None,
        usd_per_hour: Annotated[float | None, typer.Option(
            "--usd-per-gpu-hour", min=0, callback=finite(0, MAX_USD_PER_GPU_HOUR),
            help="override the catalog's cloud price")] = None,
        no_overlap: Annotated[bool, typer.Option("--no-overlap")] = False,
        overlap: Annotated[str | None, typer.Option(
            "--overlap", help="the overlaps your launch script turns on, in place of the "
            "stack's: a comma list of grad (Megatron --overlap-grad-reduce), param "
            "(--overlap-param-gather), tp (--tp-comm-overlap, with --sequence-parallel), or "
            "none")] = None,
        attention_kernel: Annotated[str | None, typer.Option(
            "--attention-kernel", help="the fused attention kernel your stack runs, in place "
            "of the profile's: fa1 (FlashAttention-1), fa2, fa3, cudnn or sdpa")] = None,
        scaling: Annotated[bool, typer.Option("--scaling", help="1, 2, 4 ... --gpus GPUs")] =
        False,
        search: Annotated[bool, typer.Option("--search", help="rank every valid layout")] =
        False,
        top: Annotated[int, typer.Option("--top", min=1, max=MAX_SEARCH_TOP)] = 10,
        prices: PricesOpt = None,
        framework: Annotated[str | None, typer.Option(
            "--framework", help="training stack profile: megatron (NVIDIA's recipes: every "
            "overlap on), megatron-lm (Megatron-LM's own defaults: no overlap flags), nemo, "
            "fsdp (torchtitan/FSDP2), deepspeed, llm-foundry, hf, aa-scaling (Aleph Alpha's "
            "Scaling), or auto (default: inferred "
            "from the layout: FSDP (also with TP/PP/CP) -> fsdp, TP/PP/SP/CP/EP -> megatron, --zero 1-3 -> "
            "deepspeed, else hf): kernels, attention, overlap")] = None,
        profile: ProfileOpt = None,
        html: HtmlOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """How long a training step and run take on N GPUs, MFU, and where the time goes."""
        from gpuplan.estimate.accuracy import training_regime
        from gpuplan.estimate.efficiency import (
            auto_retime,
            framework_efficiency,
            held_out_accuracy,
            stack_class,
        )
        from gpuplan.estimate.train_result import estimate_train
        from gpuplan.specs.catalog import get_device, get_model
        from gpuplan.specs.cluster import default_cluster
        from gpuplan.specs.framework import resolve_framework

        m, d = get_model(model), get_device(gpu)
        seq_len = default_len(m, seq_len, TrainConfig().seq_len)
        train_rules(ctx, m, d, locals())
        cluster = default_cluster(d, gpus, gpus_per_node,
                                  scale_up_gbps * 1e9 if scale_up_gbps else None,
                                  scale_out_gbps * 1e9 if scale_out_gbps else None)
        mp = tp * pp * cp
        if dp is None:
            if gpus % mp:
                raise InputError("--gpus", gpus, f"a multiple of tp x pp x cp = {mp}")
            dp = gpus // mp
        job = train_job(dict(locals()), dp, d.kind)
        fw = resolve_framework(framework, job).with_overlap(overlap) \
            .with_attention_kernel(attention_kernel)
        cfg, sharding = stack_job(ctx, fw, job)
        eff, prof = framework_efficiency(d, fw), None
        if profile is not None:
            from gpuplan.cli.profile_opt import apply

            eff, prof = apply(profile, d, eff)
        if search:
            from gpuplan.cli.search_cmd import run_search

            if cfg.lora.active:
                raise InputError("--search", f"with --finetune {finetune.value}",
                                 "full fine-tuning only (the search's memory model has no "
                                 "adapters): time one layout, or use `gpuplan advise`")
            found = run_search(m, cluster, cfg, top, as_json, efficiency=eff, profile=prof,
                               retime=None if not fw.chosen_by or prof is not None
                               else auto_retime(d, job, overlap, attention_kernel))
            if html is not None:
                from gpuplan.cli.html_opt import write

                write(html, "train", found, ctx, as_json)
            return
        price = train_price(d, usd_per_hour, prices)
        res = estimate_train(m, cluster, cfg, tokens, price["usd_per_gpu_hour"],
                             overlap=not no_overlap, efficiency=eff, scaling=scaling,
                             profile=prof, price=price)
        res.extra_assumptions["framework"] = fw.describe()
        res.extra_assumptions["accuracy"] = held_out_accuracy(
            stack_class(fw.end_to_end_class, d),
            training_regime(cfg, cluster.gpus, cluster.gpus_per_node))
        if sharding:
            res.extra_assumptions["sharding"] = sharding
        r = res.to_json()
        emit(r, as_json, lambda con: render_train(con, r))
        if html is not None:
            from gpuplan.cli.html_opt import write

            write(html, "train", r, ctx, as_json)
