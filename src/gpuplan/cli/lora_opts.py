"""`--finetune full|lora|qlora`, `--lora-rank`, `--lora-targets`, `--paged-optimizer`: the LoRA
options `memory` and `train` share (estimate/lora.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from gpuplan.cli.options import FinetuneChoice
from gpuplan.estimate.lora import LoraConfig, parse_targets

FinetuneOpt = Annotated[FinetuneChoice, typer.Option(
    "--finetune", help="full fine-tuning, LoRA (16-bit frozen weights) or QLoRA (NF4)")]
LoraRankOpt = Annotated[int, typer.Option("--lora-rank", min=1, help="adapter rank r")]
LoraTargetsOpt = Annotated[str, typer.Option(
    "--lora-targets", help="all-linear, attention, mlp or a comma list of q_proj,k_proj,"
                           "v_proj,o_proj,gate_proj,up_proj,down_proj")]
PagedOpt = Annotated[bool | None, typer.Option(
    "--paged-optimizer/--no-paged-optimizer",
    help="optimizer states in paged (CPU-evictable) memory; default on for qlora")]


def lora_config(finetune: FinetuneChoice, rank: int, targets: str,
                paged: bool | None) -> LoraConfig:
    return LoraConfig(finetune=finetune.value, rank=rank,  # type: ignore[arg-type]
                      targets=parse_targets(targets), paged_optimizer=paged)
