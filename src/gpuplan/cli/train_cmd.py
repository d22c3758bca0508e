"""`gpuplan train`: step time, MFU, communication, bubble, memory, run totals, scaling, search."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.cost_cmd import PricesOpt, on_demand_price
from gpuplan.cli.lora_opts import FinetuneOpt, LoraRankOpt, LoraTargetsOpt, PagedOpt, lora_config
from gpuplan.cli.options import (
    AttentionChoice,
    FinetuneChoice,
    FsdpChoice,
    OptimizerChoice,
    PrecisionChoice,
    RecomputeChoice,
)
from gpuplan.cli.profile_opt import ProfileOpt
from gpuplan.errors import InputError
from gpuplan.report.output import emit, table


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "-"


def _render(con: Console, r: dict[str, Any]) -> None:
    lay = r["layout"]
    title = (f"{r['model']} on {r['gpus']} x {r['device']} (dp {lay['dp']}, tp {lay['tp']}, pp "
             f"{lay['pp']}, cp {lay['cp']}, ep {lay['ep']}, ZeRO {lay['zero']}), micro-batch "
             f"{lay['micro_batch']}, global batch {r['global_batch']}, seq {lay['seq_len']}")
    if not r["fits"]:
        mem = r["memory"]
        con.print(f"{title}\nDOES NOT FIT: {units.format_bytes(mem['total_bytes'])} per GPU of "
                  f"{units.format_bytes(mem['capacity_bytes'])}; not timed. Try `gpuplan memory "
                  f"... --fix` or --search.")
        return
    t = table(title, [("", "left"), ("value", "right")],
              caption="MFU: model FLOPs (no recompute, attention in full) / dense peak; "
                      "HFU counts recomputation. Overlap: " + r["assumptions"]["overlap"]
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
                                                      f"{run['gpu_hours']:,.0f} GPU-hours")
        t.add_row("energy", f"{run['energy_kwh']:,.0f} kWh (TDP x 0.8 x PUE 1.2)")
        if run["cost_usd"] is not None:
            t.add_row("cost", f"{units.format_usd(run['cost_usd'])} at "
                              f"${run['usd_per_gpu_hour']:.2f}/GPU-h")
    con.print(t)
    if r.get("scaling"):
        s = table("scaling (data parallel; per-GPU batch fixed)",
                  [("GPUs", "right"), ("tokens/s", "right"), ("speedup", "right"),
                   ("efficiency", "right"), ("MFU", "right"), ("why", "left")])
        for p in r["scaling"]:
            s.add_row(str(p["gpus"]), f"{p['tokens_per_s']:,.0f}" if p["tokens_per_s"] else "-",
                      f"{p.get('speedup', 0):.2f}x" if p.get("speedup") else "-",
                      _pct(p.get("efficiency")), _pct(p.get("mfu")), p.get("why", ""))
        con.print(s)


def register(app: typer.Typer) -> None:
    @app.command()
    def train(
        model: Annotated[str, typer.Argument(help="preset name or config.json path")],
        gpu: Annotated[str, typer.Option("--gpu", "-g")] = "h100",
        gpus: Annotated[int, typer.Option("--gpus", "-n", min=1)] = 8,
        gpus_per_node: Annotated[int | None, typer.Option("--gpus-per-node", min=1)] = None,
        scale_up_gbps: Annotated[float | None, typer.Option(
            "--scale-up-gbps", min=0.001, help="GPU-GPU link in a node, GB/s per direction")] =
        None,
        scale_out_gbps: Annotated[float | None, typer.Option(
            "--scale-out-gbps", min=0.001, help="network per GPU, GB/s per direction")] = None,
        dp: Annotated[int | None, typer.Option("--dp", min=1, help="default: the rest")] = None,
        tp: Annotated[int, typer.Option("--tp", min=1)] = 1,
        pp: Annotated[int, typer.Option("--pp", min=1)] = 1,
        cp: Annotated[int, typer.Option("--cp", min=1)] = 1,
        ep: Annotated[int, typer.Option("--ep", min=1)] = 1,
        zero: Annotated[int, typer.Option("--zero", min=0, max=3)] = 1,
        fsdp: Annotated[FsdpChoice, typer.Option("--fsdp")] = FsdpChoice.none,
        recompute: Annotated[RecomputeChoice, typer.Option("--recompute")] =
        RecomputeChoice.none,
        sequence_parallel: Annotated[bool, typer.Option("--sequence-parallel")] = False,
        virtual_stages: Annotated[int, typer.Option("--virtual-stages", min=1)] = 1,
        attention: Annotated[AttentionChoice, typer.Option("--attention")] =
        AttentionChoice.flash,
        fused: Annotated[bool, typer.Option(
            "--fused", help="fused norm/activation kernels (Megatron, torch.compile)")] = False,
        precision: Annotated[PrecisionChoice, typer.Option("--precision")] =
        PrecisionChoice.bf16_mixed,
        optimizer: Annotated[OptimizerChoice, typer.Option("--optimizer")] =
        OptimizerChoice.adamw,
        micro_batch: Annotated[int, typer.Option("--micro-batch", min=1)] = 1,
        global_batch: Annotated[int | None, typer.Option("--global-batch", min=1)] = None,
        seq_len: Annotated[int, typer.Option("--seq-len", "-s", min=1)] = 4096,
        tokens: Annotated[float | None, typer.Option(
            "--tokens", min=1, help="tokens to train on (default: 20 per parameter)")] = None,
        usd_per_hour: Annotated[float | None, typer.Option(
            "--usd-per-gpu-hour", min=0, help="override the catalog's cloud price")] = None,
        no_overlap: Annotated[bool, typer.Option("--no-overlap")] = False,
        scaling: Annotated[bool, typer.Option("--scaling", help="1, 2, 4 ... --gpus GPUs")] =
        False,
        search: Annotated[bool, typer.Option("--search", help="rank every valid layout")] =
        False,
        top: Annotated[int, typer.Option("--top", min=1)] = 10,
        finetune: FinetuneOpt = FinetuneChoice.full,
        lora_rank: LoraRankOpt = 16,
        lora_targets: LoraTargetsOpt = "all-linear",
        paged_optimizer: PagedOpt = None,
        prices: PricesOpt = None,
        profile: ProfileOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """How long a training step and run take on N GPUs, MFU, and where the time goes."""
        from gpuplan.estimate.memory import TrainConfig
        from gpuplan.estimate.runs import run_totals, scaling_curve
        from gpuplan.estimate.training import step_time
        from gpuplan.specs.catalog import get_device, get_model
        from gpuplan.specs.cluster import default_cluster

        m, d = get_model(model), get_device(gpu)
        cluster = default_cluster(d, gpus, gpus_per_node,
                                  scale_up_gbps * 1e9 if scale_up_gbps else None,
                                  scale_out_gbps * 1e9 if scale_out_gbps else None)
        mp = tp * pp * cp
        if dp is None:
            if gpus % mp:
                raise InputError("--gpus", gpus, f"a multiple of tp x pp x cp = {mp}")
            dp = gpus // mp
        cfg = TrainConfig(micro_batch=micro_batch, seq_len=seq_len, precision=precision.value,
                          optimizer=optimizer.value, zero=zero, fsdp=fsdp.value, dp=dp, tp=tp,
                          pp=pp, cp=cp, ep=ep, sp=sequence_parallel,
                          virtual_stages=virtual_stages, recompute=recompute.value,
                          attention=attention.value, global_batch=global_batch,  # type: ignore[arg-type]
                          dropout=False, fused=fused,
                          lora=lora_config(finetune, lora_rank, lora_targets, paged_optimizer))
        eff, prof = None, None
        if profile is not None:
            from gpuplan.cli.profile_opt import apply
            from gpuplan.estimate.efficiency import training_efficiency

            eff, prof = apply(profile, d, training_efficiency(d))
        if search:
            from gpuplan.cli.search_cmd import run_search

            if cfg.lora.active:
                raise InputError("--search", f"with --finetune {finetune.value}",
                                 "full fine-tuning only (the search's memory model has no "
                                 "adapters): time one layout, or use `gpuplan advise`")

            run_search(m, cluster, cfg, top, as_json, efficiency=eff, profile=prof)
            return
        res = step_time(m, cluster, cfg, efficiency=eff, overlap=not no_overlap)
        r: dict[str, Any] = {"model": m.name, "device": d.name, **res.to_json(),
                             "layout": {"dp": dp, "tp": tp, "pp": pp, "cp": cp, "ep": ep,
                                        "zero": cfg.zero_stage, "micro_batch": micro_batch,
                                        "seq_len": seq_len}}
        price = on_demand_price(d.name, usd_per_hour, prices)
        if price["usd_per_gpu_hour"] is None and d.cloud_usd_per_hour:
            price = {"usd_per_gpu_hour": d.cloud_usd_per_hour,
                     "source": "not on the price basis: the device file's cloud price ("
                               + d.provenance["cloud_usd_per_hour"].source + ")"}
        totals = run_totals(m, res, cluster, tokens, price["usd_per_gpu_hour"])
        r["run"] = {**totals.to_json(), "price": price} if totals else None
        r["gpu_hours"] = totals.gpu_hours if totals else None
        r["cost_usd"] = totals.cost_usd if totals else None
        if prof is not None:
            r["assumptions"]["profile"] = prof
        if scaling:
            base = TrainConfig(**{**cfg.__dict__, "dp": 1,
                                  "global_batch": (cfg.global_batch // dp) if cfg.global_batch
                                  else None})
            r["scaling"] = scaling_curve(m, cluster, base, gpus, overlap=not no_overlap,
                                         efficiency=eff)
        emit(r, as_json, lambda con: _render(con, r))
