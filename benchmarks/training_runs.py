"""Published training runs as structured records, to validate gpuplan's step-time model.

Every row of `shared/data/training_runs.csv` (188 rows) is either in RUNS (modelled: the model
architecture built explicitly as a ModelSpec, the hardware, the parallel layout and kernels as
TrainConfig keyword arguments, and the published number with its FLOP-counting convention) or
in SKIPPED (with the reason). `benchmarks/validate_training.py` turns each record into a
prediction and compares.

Conventions (`Metric.convention`; validate_training.py converts the prediction the same way):

- megatron-eq3: TFLOP/s per GPU = 96·B·s·l·h²·(1 + s/6h + V/16lh) / (GPUs x step time)
  (Narayanan et al. 2021 eq. 3; B = global batch in sequences). Counts the recompute forward
  (the factor 96 = 24 x 4 passes), attention scores in full (s x s, not the causal half), logits
  3 passes; GEMMs only. Megatron-DeepSpeed logs the same formula (BLOOM's 150 TFLOP/s).
- llmfoundry-mfu: MFU % = (6·N·s + 12·L·d·s²) x sequences/s / (GPUs x 312e12)
  (llm-foundry scripts/train/benchmarking/collect_results.py): N = every parameter, including
  the learned position table; attention in full (not causal); no recompute.
- palm-mfu: MFU % = (6·N + 12·L·H·Q·T) x tokens/s / (chips x 275e12) (Chowdhery et al. 2022
  App. B): attention in full, no rematerialisation; N = all parameters.
- library-hfu: gpuplan's own HFU (executed matmul FLOPs incl. recompute / peak); used for
  PaLM's 57.8 % HFU, which counts rematerialised FLOPs.
- tokens-per-gpu: tokens/s / GPUs (convention-free).
- gpu-hours: tokens / (tokens/s) x GPUs / 3600, with `Metric.tokens` the run's tokens.
- wall-days / wall-minutes: tokens / (tokens/s) / 86400 (or / 60).

Each record's `inferred` lists the settings that are not published (and how they were chosen);
`notes` gives the source and every assumption. Nothing here is fitted to the published values.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.device import Device
from gpuplan.specs.framework import get_framework
from gpuplan.specs.model import Activation, ModelSpec

CSV_NAME = "training_runs.csv"
"""The source file, in the steering repository's shared/data/ folder."""

CONVENTIONS: dict[str, str] = {
    "megatron-eq3": "96·B·s·l·h²(1 + s/6h + V/16lh) / (GPUs·step): recompute forward counted, "
                    "attention full s×s (Narayanan et al. 2021 eq. 3)",
    "llmfoundry-mfu": "(6·N·s + 12·L·d·s²)·seq/s / (GPUs·312e12): no recompute, attention full, "
                      "N incl. position table (llm-foundry collect_results.py)",
    "palm-mfu": "(6·N + 12·L·H·Q·T)·tokens/s / (chips·275e12): no remat, attention full "
                "(PaLM App. B)",
    "library-hfu": "gpuplan HFU: executed matmul FLOPs incl. recompute / (GPUs·step·peak)",
    "tokens-per-gpu": "tokens/s / GPUs",
    "gpu-hours": "tokens / (tokens/s) · GPUs / 3600",
    "wall-days": "tokens / (tokens/s) / 86400",
    "wall-minutes": "tokens / (tokens/s) / 60",
    "model-tflops": "(6·N + 12·L·H·Q·T)·tokens/s / GPUs / 1e12: attention in full, no "
                    "recompute (PaLM App. B counting, as TFLOP/s)",
}


@dataclass(frozen=True)
class Metric:
    """One published number and how it was counted."""

    column: str
    """training_runs.csv column it comes from (tflops_per_gpu, mfu_pct, hfu_pct,
    tokens_per_sec_per_gpu, total_gpu_hours, wall_days)"""
    value: float
    convention: str
    """a key of CONVENTIONS: how validate_training.py converts a prediction"""
    counts_recompute: bool | None
    """True: the number counts recomputed FLOPs (HFU-like); None: not a FLOP rate"""
    counts_attention: bool | None
    """True: attention score/value FLOPs counted (all here count them in full, s x s)"""
    tokens: float | None = None
    """tokens of the whole run (for GPU-hours and wall-time metrics)"""
    primary: bool = True
    """statistics use the primary metric only (one per record)"""
    note: str = ""


@dataclass(frozen=True)
class TrainingRun:
    """One csv row, ready for gpuplan.estimate.training.step_time."""

    run_id: str
    family: str
    """source family, for per-family statistics and the stratified split"""
    model: ModelSpec
    device: str
    """catalog device name"""
    num_gpus: int
    gpus_per_node: int
    train: dict[str, Any]
    """TrainConfig keyword arguments (dp x tp x pp x cp = num_gpus)"""
    metrics: tuple[Metric, ...]
    source: str
    verification: str
    """the csv's verification tag"""
    inferred: tuple[str, ...] = ()
    """settings not given by the source: 'field: how it was chosen'"""
    cluster: dict[str, Any] = field(default_factory=dict)
    """default_cluster overrides (scale_out_bytes_per_s, ...)"""
    notes: str = ""
    split: str = "calibration"
    """'calibration' (constants may be fitted on it) or 'validation' (hold-out: scored once)"""
    framework: str = ""
    """framework profile (gpuplan/catalog/frameworks); '' = FAMILY_FRAMEWORK[family]"""
    overlap: str = ""
    """the communication overlaps the run's launch script states, as `gpuplan train --overlap`
    (Framework.with_overlap); '' = the profile's"""
    attention_kernel: str = ""
    """the attention kernel the run's scripts select, as `gpuplan train --attention-kernel`
    (Framework.with_attention_kernel); '' = the profile's"""
    activations_offloaded: bool = False
    """the run kept activations in CPU memory (DeepSpeed activation offload), which gpuplan does
    not model: timed, not memory-scored (memory_not_scored)"""

    @property
    def primary(self) -> Metric:
        return next(m for m in self.metrics if m.primary)


@dataclass(frozen=True)
class Skipped:
    run_id: str
    reason: str


# ---- devices ------------------------------------------------------------------------------

H100_96GB = "H100-96GB"
"""Meta's Grand Teton H100 (torchtitan's benchmark machine): 96 GB HBM2e at 2.4 TB/s, 500 W
(pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md 'Hardware'). Its tensor peak
is 'between SXM and NVL' (same file, footnote 2): the H100-SXM peaks are kept; 95 GiB usable
is an assumption (as in tests/test_memory_cases.py)."""


def run_device(name: str) -> Device:
    """The catalog device, or the one variant the catalog lacks (H100_96GB)."""
    if name != H100_96GB:
        return get_device(name)
    return get_device("h100").model_copy(update={
        "name": H100_96GB, "memory_bytes": 96 * 10**9, "usable_memory_bytes": 95 * 2**30,
        "mem_bw_bytes_per_s": 2.4e12, "tdp_w": 500.0})


# ---- architectures ------------------------------------------------------------------------

def megatron_gpt(name: str, h: int, layers: int, heads: int, vocab: int = 51200,
                 seq: int = 2048, dropout: float = 0.1) -> ModelSpec:
    """Megatron-LM GPT (2021): learned positions, pre-LayerNorm, GELU MLP 4h, tied embeddings,
    biases everywhere, hidden and attention dropout 0.1 (Megatron defaults)."""
    return ModelSpec(
        name=name, family="megatron-gpt", source="Narayanan et al. 2021 Table 1 / eq. 2",
        vocab_size=vocab, hidden_size=h, num_layers=layers, num_heads=heads,
        intermediate_size=4 * h, mlp="plain", activation="gelu_tanh", norm="layernorm",
        position="learned", max_position_embeddings=seq, tie_embeddings=True, qkv_bias=True,
        out_bias=True, mlp_bias=True, hidden_dropout=dropout, attention_dropout=dropout,
        embedding_dropout=dropout)


MPT_SHAPES: dict[str, tuple[int, int, int]] = {
    # size: (d_model, n_layers, n_heads) from llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml
    "125m": (768, 12, 12), "350m": (1024, 24, 16), "760m": (1536, 24, 12),
    "1b": (2048, 24, 16), "3b": (2560, 32, 20), "7b": (4096, 32, 32),
    "13b": (5120, 40, 40), "30b": (7168, 48, 56), "70b": (8192, 80, 64),
}


def mpt(size: str, seq: int) -> ModelSpec:
    """MPT as llm-foundry's throughput benchmarks ran it: the yamls set only d_model, n_heads,
    n_layers, expansion_ratio 4, vocab 50368 and max_seq_len, so MPTConfig defaults apply:
    learned_pos_emb=True (max_seq_len rows), no_bias=False, alibi=False, GELU, tied embeddings,
    (low-precision) LayerNorm with bias, no dropout. This reproduces the README's NumParams
    exactly (e.g. 7b at 2048: 6,658,859,008; 125m at 65536: 174,070,272)."""
    d, layers, heads = MPT_SHAPES[size]
    return ModelSpec(
        name=f"mpt-{size}-s{seq}", family="mpt",
        source="mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml + MPTConfig defaults",
        vocab_size=50368, hidden_size=d, num_layers=layers, num_heads=heads,
        intermediate_size=4 * d, mlp="plain", activation="gelu", norm="layernorm",
        position="learned", max_position_embeddings=seq, tie_embeddings=True, qkv_bias=True,
        out_bias=True, mlp_bias=True)


def gpt2_like(name: str, family: str, h: int, layers: int, heads: int, vocab: int, seq: int,
              bias: bool = True, dropout: float = 0.1, activation: Activation = "gelu_tanh",
              source: str = "") -> ModelSpec:
    """GPT-2 / GPT-3 style: learned positions, pre-LayerNorm, GELU MLP 4h, tied embeddings."""
    return ModelSpec(
        name=name, family=family, source=source or None, vocab_size=vocab, hidden_size=h,
        num_layers=layers, num_heads=heads, intermediate_size=4 * h, mlp="plain",
        activation=activation, norm="layernorm", position="learned",
        max_position_embeddings=seq, tie_embeddings=True, qkv_bias=bias, out_bias=bias,
        mlp_bias=bias, hidden_dropout=dropout, attention_dropout=dropout,
        embedding_dropout=dropout)


def llama1(size: str) -> ModelSpec:
    """LLaMA-1 (Touvron et al. 2023, Table 2): RMSNorm, SwiGLU, RoPE, untied, vocab 32000;
    intermediate sizes from the released params.json (multiple_of 256 rounding)."""
    d, layers, heads, ff = {"7B": (4096, 32, 32, 11008), "13B": (5120, 40, 40, 13824),
                            "33B": (6656, 60, 52, 17920), "65B": (8192, 80, 64, 22016)}[size]
    return ModelSpec(
        name=f"llama-{size.lower()}", family="llama", source="Touvron et al. 2023 Table 2",
        vocab_size=32000, hidden_size=d, num_layers=layers, num_heads=heads,
        intermediate_size=ff, mlp="gated", activation="silu", norm="rmsnorm", position="rope",
        max_position_embeddings=2048, tie_embeddings=False)


OPT_175B = ModelSpec(
    name="opt-175b", family="opt", source="Zhang et al. 2022 Table 1; facebook/opt config",
    vocab_size=50272, hidden_size=12288, num_layers=96, num_heads=96, intermediate_size=49152,
    mlp="plain", activation="relu", norm="layernorm", position="learned",
    max_position_embeddings=2048, position_offset=2, tie_embeddings=True, qkv_bias=True,
    out_bias=True, mlp_bias=True, hidden_dropout=0.1, attention_dropout=0.0,
    embedding_dropout=0.1)

BLOOM_176B = ModelSpec(
    name="bloom-176b", family="bloom",
    source="bigscience tr11-176B-ml.slurm (NHIDDEN 14336, NLAYERS 70, NHEADS 112, "
           "--pad-vocab-size-to 250880, --embed-layernorm, --position-embedding-type alibi)",
    vocab_size=250880, hidden_size=14336, num_layers=70, num_heads=112,
    intermediate_size=4 * 14336, mlp="plain", activation="gelu_tanh", norm="layernorm",
    position="none", embedding_norm=True, tie_embeddings=True, qkv_bias=True, out_bias=True,
    mlp_bias=True)

PALM_540B = ModelSpec(
    name="palm-540b", family="palm", source="Chowdhery et al. 2022 Table 1 / Sec. 2",
    vocab_size=256000, hidden_size=18432, num_layers=118, num_heads=48, num_kv_heads=1,
    head_dim=256, intermediate_size=4 * 18432, mlp="gated", activation="silu", norm="layernorm",
    position="rope", max_position_embeddings=2048, tie_embeddings=True)
"""Approximations: PaLM's parallel attention+MLP block is modelled as the usual serial block
(same FLOPs; the parallel form fuses the input matmuls, ~15 % faster per the paper); its
LayerNorm has no bias (counted with bias here: +0.004B of 540.35B); MQA (1 K/V head) and
SwiGLU with d_ff = 4d are represented exactly. Parameter count 540.36B (paper: 540.35B)."""


# ---- helpers ------------------------------------------------------------------------------

def _tflops(value: float, note: str = "") -> Metric:
    return Metric("tflops_per_gpu", value, "megatron-eq3", True, True, note=note)


_MEG_T1 = ("Narayanan et al. 2021 'Efficient Large-Scale Language Model Training on GPU "
           "Clusters Using Megatron-LM' Table 1 (NVIDIA/Megatron-LM README cases_april2021.png)")
_MEG_T2 = "Narayanan et al. 2021 Table 2 (PTD-P vs ZeRO-3)"
_LF = ("mosaicml/llm-foundry scripts/train/benchmarking/README.md @8c8dd48 (A100 tables); "
       "configs from submit_benchmarks.py and yamls/pretrain/mpt-*.yaml")
_FA = "Dao-AILab/flash-attention training/README.md 'Training speed' @0251105"
_FA1 = "Dao et al. 2022 'FlashAttention' Table 2 and App. E.2"


def _megatron_fused() -> dict[str, Any]:
    # Megatron-LM 2021: fp16 mixed precision, full activation recomputation (eq. 3 assumes it),
    # materialised attention with fused scale-mask-softmax kernels, fused bias-GeLU and
    # bias-dropout-add (paper Sec. 4.2), no ZeRO.
    return {"seq_len": 2048, "precision": "fp16-mixed", "recompute": "full",
            "attention": "naive", "fused": True, "zero": 0}


# ---- Megatron-LM 2021 Table 1 -------------------------------------------------------------

_T1 = [  # run_id suffix, h, layers, heads, gpus, batch, tp, pp, dp, published TFLOP/s
    ("1.7B", 2304, 24, 24, 32, 512, 1, 1, 32, 137),
    ("3.6B", 3072, 30, 32, 64, 512, 2, 1, 32, 138),
    ("7.5B", 4096, 36, 32, 128, 512, 4, 1, 32, 142),
    ("18B", 6144, 40, 48, 256, 1024, 8, 1, 32, 135),
    ("39B", 8192, 48, 64, 512, 1536, 8, 2, 32, 138),
    ("76B", 10240, 60, 80, 1024, 1792, 8, 4, 32, 140),
    ("145B", 12288, 80, 96, 1536, 2304, 8, 8, 24, 148),
    ("310B", 16384, 96, 128, 1920, 2160, 8, 16, 15, 155),
    ("530B", 20480, 105, 128, 2520, 2520, 8, 35, 9, 163),
    ("1T", 25600, 128, 160, 3072, 3072, 8, 64, 6, 163),
]


def _smallest_divisor_above_one(n: int) -> int:
    return next(v for v in range(2, n + 1) if n % v == 0)


def _megatron_t1() -> list[TrainingRun]:
    out = []
    for sfx, h, layers, heads, gpus, batch, tp, pp, dp, tf in _T1:
        verified_split = sfx in ("1.7B", "1T")
        v = _smallest_divisor_above_one(layers // pp) if pp > 1 else 1
        inferred = ["micro_batch: 1 (not in Table 1; Table 2's PTD-P rows and Figs. 11-14 use 1)"]
        if not verified_split:
            inferred.append("tp/pp: TP = min(model-parallel size, 8), the csv's inferred split")
        if pp > 1:
            inferred.append(f"virtual_stages: {v} (Sec. 5.1 says the interleaved schedule was "
                            "used; v not published: smallest v > 1 dividing layers per stage)")
        out.append(TrainingRun(
            run_id=f"megatron2021-{sfx}", family="megatron2021-t1",
            model=megatron_gpt(f"megatron-gpt-{sfx}", h, layers, heads),
            device="A100-SXM-80GB", num_gpus=gpus, gpus_per_node=8,
            train={**_megatron_fused(), "micro_batch": 1, "global_batch": batch, "dp": dp,
                   "tp": tp, "pp": pp, "virtual_stages": v},
            metrics=(_tflops(tf, "end-to-end incl. data loading, optimizer, logging"),),
            source=_MEG_T1,
            verification="VERIFIED-primary (TFLOP/s, GPUs, batch, model-parallel size); "
                         + ("TP/PP VERIFIED-secondary" if verified_split else "TP/PP inferred"),
            inferred=tuple(inferred),
            notes="Selene: DGX A100 80GB, 8x HDR 200 Gb/s IB per node (catalog default 25 GB/s "
                  "per GPU). Vocab 51200, seq 2048. Scatter/gather p2p optimisation not "
                  "modelled (gpuplan sends the full activation per GPU; only fill/drain is "
                  "exposed).",
        ))
    return out


# ---- Megatron-LM 2021 Table 2 (175B, PTD-P vs ZeRO-3) -------------------------------------

def _megatron_t2() -> list[TrainingRun]:
    out = []
    m = megatron_gpt("gpt3-175b-megatron", 12288, 96, 96)
    ptd = {384: (153, 84), 768: (149, 43), 1536: (141, 23)}
    zero3 = {384: (144, 90, 4), 768: (88, 74, 2), 1536: (44, 74, 1)}
    for gpus, (tf, days) in ptd.items():
        out.append(TrainingRun(
            run_id=f"megatron2021-T2-175B-PTD-{gpus}", family="megatron2021-t2", model=m,
            device="A100-SXM-80GB", num_gpus=gpus, gpus_per_node=8,
            train={**_megatron_fused(), "micro_batch": 1, "global_batch": 1536,
                   "dp": gpus // 96, "tp": 8, "pp": 12, "virtual_stages": 2},
            metrics=(_tflops(tf),
                     Metric("wall_days", days, "wall-days", None, None, tokens=300e9,
                            primary=False, note="paper's projection for 300B tokens (eq. 4)")),
            source=_MEG_T2,
            verification="VERIFIED-secondary (read from a description of the table image)",
            inferred=("tp/pp: 8 x 12 for model-parallel size 96 (TP = 8 within a DGX; "
                      "llm-analysis reproduces the table with the same split)",
                      "virtual_stages: 2 (interleaved schedule, Sec. 5.1; v not published)"),
            notes="Table 2: model-parallel size 96, batch 1536, microbatch 1 (transcribed copy "
                  "of the table). GPT-3 175B shape h 12288, 96 layers, 96 heads, vocab 51200.",
        ))
    for gpus, (tf, days, mb) in zero3.items():
        out.append(TrainingRun(
            run_id=f"megatron2021-T2-175B-ZeRO3-{gpus}", family="megatron2021-t2", model=m,
            device="A100-SXM-80GB", num_gpus=gpus, gpus_per_node=8,
            train={**_megatron_fused(), "micro_batch": mb, "global_batch": 1536, "dp": gpus,
                   "zero": 3},
            metrics=(_tflops(tf),
                     Metric("wall_days", days, "wall-days", None, None, tokens=300e9,
                            primary=False, note="paper's projection for 300B tokens (eq. 4)")),
            source=_MEG_T2,
            verification="VERIFIED-secondary (read from a description of the table image)",
            inferred=("recompute: full (eq. 3 counts it; the paper does not say for ZeRO-3)",),
            notes="ZeRO-3 (DeepSpeed) without model parallelism, microbatch 4/2/1 at "
                  "384/768/1536 GPUs, batch 1536 fixed. TFLOP/s by the same eq. 3.",
            framework="deepspeed",
        ))
    return out


# ---- OPT, BLOOM, PaLM ---------------------------------------------------------------------

def _production() -> list[TrainingRun]:
    opt = TrainingRun(
        run_id="opt-175B", family="opt", model=OPT_175B, device="A100-SXM-80GB",
        num_gpus=992, gpus_per_node=8,
        train={"micro_batch": 8, "seq_len": 2048, "precision": "fp16-mixed", "dp": 124,
               "tp": 8, "fsdp": "full", "global_batch": 992, "recompute": "full",
               "attention": "naive", "fused": True},
        metrics=(_tflops(147, "'up to 147 TFLOP/s per GPU': a peak, not an average; the "
                              "FLOP convention is not stated (eq. 3 with recompute assumed: "
                              "metaseq descends from Megatron; 147 model TFLOP/s would be 63 % "
                              "HFU, implausible for 2021 software)"),),
        source="Zhang et al. 2022 'OPT' Sec. 2.4-2.5",
        verification="VERIFIED-primary (147 TFLOP/s); TP=8 UNVERIFIED",
        inferred=("tp: 8 (Megatron TP in FSDP; csv marks TP=8 UNVERIFIED)",
                  "global_batch: 992 sequences = 124 DP ranks x 8 (~2.03M tokens; the paper "
                  "says 2M tokens, which 124 ranks cannot split into 1024 sequences)",
                  "micro_batch: 8 (no gradient accumulation)",
                  "recompute: full (metaseq 175B config checkpoints activations)",
                  "attention: naive (2021-22 metaseq, Megatron fused softmax)"),
        notes="FSDP (full shard over the 124 DP ranks) + Megatron tensor parallelism 8; fp16 "
              "weights, fp32 Adam states. OPT config: ReLU, dropout 0.1, no attention dropout, "
              "vocab 50272.",
    )
    bloom = TrainingRun(
        run_id="bloom-176B", family="bloom", model=BLOOM_176B, device="A100-SXM-80GB",
        num_gpus=384, gpus_per_node=8,
        train={"micro_batch": 2, "seq_len": 2048, "precision": "bf16-mixed", "dp": 8, "tp": 4,
               "pp": 12, "zero": 1, "global_batch": 2048, "recompute": "full",
               "attention": "naive", "fused": True},
        metrics=(_tflops(150, "model card '~150 TFLOP/s'; Megatron-DeepSpeed logs eq. 3 with "
                              "checkpoint_activations_factor 4 (BLOOM paper: 156)"),),
        source="bigscience/bloom model card 'Speeds, Sizes, Times'; layout from "
               "bigscience-workshop/bigscience train/tr11-176B-ml/tr11-176B-ml.slurm",
        verification="VERIFIED-primary (150 TFLOP/s); layout read in tr11-176B-ml.slurm "
                     "(csv marked it UNVERIFIED)",
        inferred=("zero: 1 (slurm sets ZERO_STAGE=0 but notes the bf16 optimizer implements "
                  "its own ZeRO-1; the BLOOM paper says ZeRO-1)",
                  "scale_out: 6.25 GB/s per GPU (Jean Zay: 4 Omni-Path 100 Gb/s links per "
                  "8-GPU node, model card)"),
        cluster={"scale_out_bytes_per_s": 6.25e9},
        notes="tr11-176B-ml.slurm: TP 4, PP 12, 48 nodes (DP 8), MICRO_BATCH_SIZE 2, "
              "GLOBAL_BATCH_SIZE 2048 (after ramp-up), --checkpoint-activations, --bf16, ALiBi, "
              "embedding LayerNorm, vocab padded to 250880. Not modelled: "
              "--pp-partition-method 'type:transformer|embedding' (embeddings count as layers "
              "when balancing stages) and CUDA_LAUNCH_BLOCKING=1 (set in the slurm script; "
              "serialises kernel launches and hurts overlap).",
    )
    palm = TrainingRun(
        run_id="palm-540B", family="palm", model=PALM_540B, device="TPU-v4",
        num_gpus=6144, gpus_per_node=3072,
        train={"micro_batch": 4, "seq_len": 2048, "precision": "bf16-mixed", "dp": 512,
               "tp": 12, "sp": True, "fsdp": "hybrid", "shard_size": 256,
               "global_batch": 2048, "recompute": "full", "attention": "flash", "fused": True,
               "dropout": False},
        metrics=(Metric("mfu_pct", 46.2, "palm-mfu", False, True,
                        note="PaLM Table 3 (attention in full, 6N + 12LHQT)"),
                 Metric("hfu_pct", 57.8, "library-hfu", True, True, primary=False,
                        note="counts rematerialised FLOPs; PaLM rematerialised selectively "
                             "(HFU/MFU = 1.25), we model full recompute (ratio ~1.33)")),
        source="Chowdhery et al. 2022 PaLM Sec. 4 / Table 3",
        verification="VERIFIED-secondary",
        inferred=("gpus_per_node: 3072 = one pod on ICI (gpuplan's scale-up domain); pods joined "
                  "by the catalog's default network (12.5 GB/s per chip; the DCN is not in the "
                  "catalog)",
                  "fsdp: hybrid, shard group 256 (256-way FSDP-style DP within a pod, DP across "
                  "the 2 pods)",
                  "sp: True (GSPMD shards activations over the 12-way model axis too)",
                  "global_batch: 2048 sequences (final batch size; PaLM ramps 512 -> 1024 -> "
                  "2048; which phase Table 3 measured is not stated)",
                  "micro_batch: 4 = 2048 / 512 replicas (no accumulation)",
                  "recompute: full (PaLM rematerialises; HFU/MFU = 1.25 says partially)",
                  "attention: flash (TPU XLA attention is not materialised through HBM the "
                  "GPU way; an approximation)"),
        notes="PaLM 540B: 118 layers, d 18432, 48 heads x 256, MQA, SwiGLU d_ff 4d, vocab "
              "256k shared input/output, no dropout. Parallel attention+MLP layers are "
              "modelled serially (see PALM_540B). ICI is a 3D torus; gpuplan models the "
              "scale-up domain as fully connected at 270 GB/s per chip (catalog, uncertain).",
    )
    return [opt, bloom, palm]


# ---- LLaMA 1 and 2 ------------------------------------------------------------------------

def _llama() -> list[TrainingRun]:
    out = []
    src1 = ("Touvron et al. 2023 'LLaMA' Sec. 2.4 (380 tokens/s/GPU on 2048 A100 80GB for 65B) "
            "and Table 15 (GPU-hours)")
    common = {"precision": "bf16-mixed", "fsdp": "full", "recompute": "selective",
              "selective": "matmuls", "attention": "flash"}
    llama_inferred = (
        "tp: the model-parallel size of Meta's released checkpoints (1/2/4/8 shards for "
        "7B/13B/33B/65B); sp: True (paper: 'model and sequence parallelism')",
        "fsdp: full over DP (needed to fit the optimizer states; the paper does not name it)",
        "recompute: selective (paper: saves linear-layer outputs, recomputes the cheap rest) "
        "as --selective matmuls (not the fsdp profile's torchtitan per-op policy, which "
        "reruns every second matmul)",
        "attention: flash (xformers memory-efficient causal attention)",
        "micro_batch: the per-replica share of the 2048-sequence batch (no accumulation)",
        "precision: bf16 (not stated)",
        "fused: False (custom backward with xformers, eager norms/activations)")
    for size, tp, tokens, hours in (("7B", 1, 1.0e12, 82432), ("13B", 2, 1.0e12, 135168),
                                    ("33B", 4, 1.4e12, 530432), ("65B", 8, 1.4e12, 1022362)):
        dp = 2048 // tp
        mb = 2048 // dp
        gph = Metric("total_gpu_hours", hours, "gpu-hours", None, None, tokens=tokens,
                     primary=size != "65B", note="Table 15 (secondary transcription)")
        metrics: tuple[Metric, ...]
        if size == "65B":
            metrics = (Metric("tokens_per_sec_per_gpu", 380, "tokens-per-gpu", None, None,
                              note="Sec. 2.4, 65B on 2048 GPUs"), gph)
        else:
            metrics = (gph,)
        out.append(TrainingRun(
            run_id=f"llama1-LLaMA-{size}", family="llama1", model=llama1(size),
            device="A100-SXM-80GB", num_gpus=2048, gpus_per_node=8,
            train={**common, "micro_batch": mb, "seq_len": 2048, "dp": dp, "tp": tp,
                   "sp": tp > 1, "global_batch": 2048},
            metrics=metrics, source=src1,
            verification="VERIFIED-primary (65B throughput); GPU-hours VERIFIED-secondary",
            inferred=(*llama_inferred, *(() if size == "65B" else (
                "num_gpus: 2048 (only the 65B run's count is published)",))),
            notes=f"{tokens / 1e12:.1f}T tokens, batch 4M tokens (2048 x 2048), A100 80GB at "
                  "400 W, Meta RSC (8x 200 Gb/s IB per node).",
        ))
    src2 = ("meta-llama/llama MODEL_CARD.md (Llama 2) 'CO2 emissions during pretraining' "
            "@689c7f2")
    for size, preset, tp, gpus, hours in (("7B", "llama-2-7b", 1, 1024, 184320),
                                          ("13B", "llama-2-13b", 2, 2048, 368640),
                                          ("70B", "llama-2-70b", 8, 2048, 1720320)):
        dp = gpus // tp
        mb = 1024 // dp
        out.append(TrainingRun(
            run_id=f"llama2-Llama-2-{size}", family="llama2", model=get_model(preset),
            device="A100-SXM-80GB", num_gpus=gpus, gpus_per_node=8,
            train={**common, "micro_batch": mb, "seq_len": 4096, "dp": dp, "tp": tp,
                   "sp": tp > 1, "global_batch": 1024},
            metrics=(Metric("total_gpu_hours", hours, "gpu-hours", None, None, tokens=2.0e12),),
            source=src2, verification="VERIFIED-primary",
            inferred=(*llama_inferred,
                      f"num_gpus: {gpus} (not published; chosen so that DP divides the "
                      "1024-sequence batch with the model-parallel size of the released "
                      "checkpoints)"),
            notes="2.0T tokens, 4M-token batch (1024 x 4096), A100 80GB at 350-400 W (RSC and "
                  "production clusters). 70B uses GQA (8 K/V heads, preset). The card's hours "
                  "are total GPU time including any restarts.",
        ))
    return out


# ---- FlashAttention-era single-node runs --------------------------------------------------

def _flash_training() -> list[TrainingRun]:
    out = []
    rows = [  # run_id suffix, d, layers, heads, per-GPU batch, global batch, ZeRO, tok/s node
        ("GPT3-125M", 768, 12, 12, 32, 256, 0, 1310e3),
        ("GPT3-355M", 1024, 24, 16, 16, 256, 0, 503e3),
        ("GPT3-760M", 1536, 24, 16, 16, 256, 1, 245e3),
        ("GPT3-1.3B", 2048, 24, 16, 8, 512, 1, 169e3),
        ("GPT3-2.7B", 2560, 32, 20, 4, 512, 1, 85e3),
    ]
    for sfx, d, layers, heads, mb, gb, zero, node_tps in rows:
        out.append(TrainingRun(
            run_id=f"flashattn-train-{sfx}", family="flashattn-train",
            model=gpt2_like(f"fa-{sfx.lower()}", "flash-attn-gpt", d, layers, heads, 50264, 2048,
                            source="flash-attention training/configs/experiment/pile"),
            device="A100-SXM-80GB", num_gpus=8, gpus_per_node=8,
            train={"micro_batch": mb, "seq_len": 2048, "precision": "bf16-mixed", "dp": 8,
                   "zero": zero, "global_batch": gb, "recompute": "none", "attention": "flash",
                   "fused": True},
            metrics=(Metric("tokens_per_sec_per_gpu", node_tps / 8, "tokens-per-gpu", None,
                            None, note=f"README gives {node_tps / 1e3:.0f}k tokens/s per 8-GPU "
                                       "node"),),
            source=_FA, verification="VERIFIED-primary",
            inferred=("micro_batch: the pile/gpt3*-flash.yaml batch_size for gpu_mem >= 80",
                      "dropout: 0.1 (GPT2Config defaults; the configs do not override them)"),
            notes="8x A100 80GB SXM4 400 W, one node. Configs pile/gpt3{s,m,l,xl}-flash and "
                  "gpt3-2.7B-flash-hdim128 (20 heads of 128): FlashAttention, fused MLP/bias, "
                  "fused dropout-add-LayerNorm, bf16, vocab padded to 50264, no activation "
                  "checkpointing; DDP (125M, 355M) or DDP + ZeRO-1 optimizer (760M+).",
        ))
    return out


def _fa1_table2() -> list[TrainingRun]:
    out = []
    shapes = {"small": (768, 12, 12), "medium": (1024, 24, 16)}
    impls: dict[str, tuple[str, int, str, bool, tuple[int, int], tuple[float, float],
                           Activation]] = {
        # name: (family, vocab, attention, fused, micro-batch small/medium, days, activation)
        # HF GPT-2: gelu_new written in Python ops; Megatron: fused bias-GeLU (tanh form)
        "HuggingFace": ("gpt2", 50257, "naive", False, (16, 4), (9.5, 21.0), "gelu_new"),
        "Megatron-LM": ("megatron-gpt", 50304, "naive", True, (16, 8), (4.7, 11.5),
                        "gelu_tanh"),
        "FlashAttention": ("flash-attn-gpt", 50264, "flash", True, (32, 16), (2.7, 6.9),
                           "gelu_tanh"),
    }
    tokens = 400e3 * 512 * 1024
    for i, (size, (d, layers, heads)) in enumerate(shapes.items()):
        for impl, (fam, vocab, attn, fused, mbs, days, act) in impls.items():
            out.append(TrainingRun(
                run_id=f"fa1-table2-GPT-2-{size}-{impl}", family="fa1-gpt2",
                model=gpt2_like(f"gpt2-{size}-{impl.lower()}", fam, d, layers, heads, vocab,
                                1024, activation=act),
                device="A100-SXM-40GB", num_gpus=8, gpus_per_node=8,
                train={"micro_batch": mbs[i], "seq_len": 1024, "precision": "fp16-mixed",
                       "dp": 8, "global_batch": 512, "recompute": "none", "attention": attn,
                       "fused": fused},
                metrics=(Metric("wall_days", days[i], "wall-days", None, None, tokens=tokens,
                                note="training time to 400K steps x 512 x 1024 tokens"),),
                source=_FA1, verification="VERIFIED-primary",
                inferred=(f"micro_batch: {mbs[i]} (paper: 'gradient accumulation to fit'; "
                          "chosen as the largest power of two gpuplan's memory model fits on "
                          "A100 40GB)",
                          "fused: " + ("True (FlashAttention's GPT-2 with fused kernels; "
                                       "unstated)" if impl == "FlashAttention" else
                                       "True (Megatron fused kernels)" if fused else
                                       "False (eager HF transformers)"),
                          "precision: fp16 (paper: PyTorch AMP)"),
                notes="App. E.2: effective batch 512, 400K steps, OpenWebText, seq 1024, 8x "
                      "A100-40GB, AdamW, dropout 0.1 (GPT-2 default). Wall time includes "
                      "evaluation and checkpointing.",
            ))
    return out


def _karpathy() -> list[TrainingRun]:
    nano = TrainingRun(
        run_id="nanogpt-gpt2-124M", family="karpathy",
        model=gpt2_like("nanogpt-124m", "nanogpt", 768, 12, 12, 50304, 1024, bias=False,
                        dropout=0.0, activation="gelu",
                        source="karpathy/nanoGPT model.py + config/train_gpt2.py"),
        device="A100-SXM-40GB", num_gpus=8, gpus_per_node=8,
        train={"micro_batch": 12, "seq_len": 1024, "precision": "bf16-mixed", "dp": 8,
               "global_batch": 480, "recompute": "none", "attention": "flash", "fused": True},
        metrics=(Metric("wall_days", 4.0, "wall-days", None, None,
                        tokens=600_000 * 491_520,
                        note="README: 'about 4 days' for the config (600k iters x 491,520 "
                             "tokens = 295B); config comment says ~5 days"),),
        source="karpathy/nanoGPT README @3adf61e + config/train_gpt2.py",
        verification="VERIFIED-primary (approximate: 'about 4 days')",
        inferred=("fused: True (torch.compile)", "attention: flash (scaled_dot_product_attention)"),
        notes="batch_size 12, block 1024, gradient_accumulation_steps 40 (5 per GPU), DDP, "
              "bf16 autocast, vocab padded to 50304, bias=False, dropout 0, exact GELU.",
    )
    llmc = TrainingRun(
        run_id="llmc-gpt2-124M", family="karpathy",
        model=gpt2_like("llmc-gpt2-124m", "llmc", 768, 12, 12, 50304, 1024, dropout=0.0,
                        source="karpathy/llm.c train_gpt2.cu (GPT-2 124M)"),
        device="A100-SXM-80GB", num_gpus=8, gpus_per_node=8,
        train={"micro_batch": 64, "seq_len": 1024, "precision": "bf16-mixed", "dp": 8,
               "zero": 1, "global_batch": 512, "recompute": "none", "attention": "flash",
               "fused": True},
        metrics=(Metric("wall_days", 90.0, "wall-minutes", None, None, tokens=10e9,
                        note="'Reproducing GPT-2 (124M) in llm.c in 90 minutes for $20'"),),
        source="karpathy/llm.c Discussion #481 (title quoted in the llm.c README)",
        verification="VERIFIED-secondary (headline; internals not read)",
        inferred=("micro_batch/global_batch: -b 64 -t 1024, 524,288 tokens per step "
                  "(Discussion #481 command; not in the csv)",
                  "zero: 1 (-z 1)", "recompute: none (-r 1 recomputes only GeLU)",
                  "tokens: 10B (csv; the run did 18,865 steps = 9.9B)"),
        notes="8x A100 80GB SXM, bf16, cuDNN flash attention, fused CUDA kernels, vocab padded "
              "to 50304, no dropout.",
    )
    return [nano, llmc]


# ---- llm-foundry MPT throughput tables ----------------------------------------------------

_LF_ROWS: tuple[tuple[Any, ...], ...] = (
    # (A100 GB, size, seq, GPUs, micro-batch, grad-accum, global batch (seqs), activation
    #  checkpointing, FSDP mixed precision ('pure' = bf16 PURE, 'amp' = amp_bf16 DEFAULT),
    #  MFU %, HFU %, model TFLOP/s per GPU, tokens/s/GPU, params (B, as in the csv))
    ('80', '70b', 2048, 64, 8, 4, 2048, True, 'pure', 53.33, 71.1, 166, 410, 64.86),
    ('80', '70b', 2048, 32, 2, 16, 1024, True, 'pure', 48.56, 64.75, 151, 373, 64.86),
    ('80', '30b', 8192, 8, 1, 21, 168, True, 'amp', 39.38, 52.5, 122, 574, 30.02),
    ('80', '30b', 4096, 8, 1, 21, 168, True, 'amp', 51.37, 68.49, 160, 814, 29.99),
    ('80', '30b', 2048, 8, 3, 21, 504, True, 'amp', 55.3, 73.74, 172, 916, 29.98),
    ('80', '30b', 1024, 8, 6, 21, 1008, True, 'amp', 55.82, 74.43, 174, 946, 29.97),
    ('80', '30b', 512, 8, 12, 21, 2016, True, 'amp', 56.4, 75.2, 175, 967, 29.96),
    ('80', '13b', 32768, 8, 1, 3, 24, True, 'amp', 51.69, 68.92, 161, 1016, 13.01),
    ('80', '13b', 16384, 8, 3, 3, 72, True, 'amp', 54.07, 72.1, 168, 1431, 12.93),
    ('80', '13b', 8192, 8, 5, 3, 120, True, 'amp', 56.07, 74.76, 174, 1795, 12.89),
    ('80', '13b', 4096, 8, 10, 3, 240, True, 'amp', 57.62, 76.82, 179, 2060, 12.86),
    ('80', '13b', 2048, 8, 2, 3, 48, False, 'amp', 59.57, 59.57, 185, 2262, 12.85),
    ('80', '13b', 1024, 8, 40, 3, 960, True, 'amp', 59.48, 79.3, 185, 2330, 12.85),
    ('80', '7b', 65536, 8, 1, 2, 16, True, 'amp', 46.97, 62.63, 146, 1013, 6.92),
    ('80', '7b', 32768, 8, 2, 2, 32, True, 'amp', 49.46, 65.94, 154, 1672, 6.78),
    ('80', '7b', 16384, 8, 4, 2, 64, True, 'amp', 51.96, 69.28, 162, 2453, 6.72),
    ('80', '7b', 8192, 8, 8, 2, 128, True, 'amp', 54.47, 72.62, 169, 3206, 6.68),
    ('80', '7b', 4096, 8, 16, 2, 256, True, 'amp', 54.84, 73.12, 171, 3684, 6.67),
    ('80', '7b', 2048, 8, 6, 2, 96, False, 'amp', 64.23, 64.23, 200, 4641, 6.66),
    ('80', '7b', 1024, 8, 64, 2, 1024, True, 'amp', 58.01, 77.35, 180, 4357, 6.65),
    ('80', '3b', 65536, 8, 1, 2, 16, True, 'amp', 46.05, 61.41, 143, 1767, 2.81),
    ('80', '3b', 32768, 8, 3, 6, 144, True, 'amp', 47.18, 62.91, 147, 3029, 2.73),
    ('80', '3b', 16384, 8, 1, 6, 48, False, 'amp', 57.13, 57.13, 178, 5529, 2.69),
    ('80', '3b', 8192, 8, 3, 6, 144, False, 'amp', 59.34, 59.34, 185, 7695, 2.67),
    ('80', '3b', 4096, 8, 5, 6, 240, False, 'amp', 60.53, 60.53, 188, 9457, 2.66),
    ('80', '3b', 2048, 8, 10, 2, 160, False, 'amp', 62.11, 62.11, 193, 10811, 2.65),
    ('80', '3b', 1024, 8, 20, 6, 960, False, 'amp', 62.73, 62.73, 195, 11580, 2.65),
    ('80', '3b', 512, 8, 40, 6, 1920, False, 'amp', 63.71, 63.71, 198, 12127, 2.65),
    ('80', '1b', 65536, 8, 1, 2, 16, True, 'amp', 46.18, 61.57, 144, 3044, 1.45),
    ('80', '1b', 32768, 8, 1, 4, 32, False, 'amp', 55.52, 55.52, 173, 6275, 1.38),
    ('80', '1b', 16384, 8, 2, 4, 64, False, 'amp', 56.6, 56.6, 176, 9956, 1.35),
    ('80', '1b', 8192, 8, 3, 4, 96, False, 'amp', 56.69, 56.69, 176, 13814, 1.33),
    ('80', '1b', 4096, 8, 7, 4, 224, False, 'amp', 59.0, 59.0, 184, 17807, 1.32),
    ('80', '1b', 2048, 8, 14, 4, 448, False, 'amp', 59.86, 59.86, 186, 20513, 1.32),
    ('80', '1b', 1024, 8, 18, 4, 576, False, 'amp', 60.15, 60.15, 187, 22112, 1.31),
    ('80', '1b', 512, 8, 56, 4, 1792, False, 'amp', 60.68, 60.68, 189, 23148, 1.31),
    ('80', '760m', 65536, 8, 1, 2, 16, True, 'amp', 45.34, 60.45, 141, 4143, 0.86),
    ('80', '760m', 32768, 8, 1, 2, 16, False, 'amp', 54.57, 54.57, 170, 8802, 0.81),
    ('80', '760m', 16384, 8, 3, 2, 48, False, 'amp', 54.64, 54.64, 170, 14274, 0.78),
    ('80', '760m', 8192, 8, 6, 2, 96, False, 'amp', 55.31, 55.31, 172, 20933, 0.77),
    ('80', '760m', 4096, 8, 12, 2, 192, False, 'amp', 56.05, 56.05, 174, 27351, 0.76),
    ('80', '760m', 2048, 8, 24, 2, 384, False, 'amp', 56.85, 56.85, 177, 32434, 0.76),
    ('80', '760m', 1024, 8, 48, 2, 768, False, 'amp', 47.76, 47.76, 149, 29765, 0.76),
    ('80', '760m', 512, 8, 96, 2, 1536, False, 'amp', 45.07, 45.07, 140, 29446, 0.76),
    ('80', '350m', 65536, 8, 1, 2, 16, False, 'amp', 52.7, 52.7, 164, 7524, 0.42),
    ('80', '350m', 32768, 8, 2, 2, 32, False, 'amp', 52.46, 52.46, 163, 13652, 0.39),
    ('80', '350m', 16384, 8, 4, 2, 64, False, 'amp', 53.28, 53.28, 166, 23559, 0.37),
    ('80', '350m', 8192, 8, 8, 2, 128, False, 'amp', 53.8, 53.8, 167, 36569, 0.36),
    ('80', '350m', 4096, 8, 16, 2, 256, False, 'amp', 53.31, 53.31, 166, 49555, 0.36),
    ('80', '350m', 2048, 8, 32, 2, 512, False, 'amp', 51.62, 51.62, 161, 58782, 0.36),
    ('80', '350m', 1024, 8, 64, 2, 1024, False, 'amp', 50.51, 50.51, 157, 64813, 0.35),
    ('80', '350m', 512, 8, 128, 2, 2048, False, 'amp', 50.61, 50.61, 157, 69330, 0.35),
    ('80', '125m', 65536, 8, 1, 2, 16, False, 'amp', 54.13, 54.13, 168, 20368, 0.17),
    ('80', '125m', 32768, 8, 2, 2, 32, False, 'amp', 52.71, 52.71, 164, 36407, 0.15),
    ('80', '125m', 16384, 8, 4, 2, 64, False, 'amp', 50.61, 50.61, 157, 60040, 0.14),
    ('80', '125m', 8192, 8, 8, 2, 128, False, 'amp', 48.85, 48.85, 152, 90392, 0.13),
    ('80', '125m', 4096, 8, 16, 2, 256, False, 'amp', 46.08, 46.08, 143, 118396, 0.13),
    ('80', '125m', 2048, 8, 40, 2, 640, False, 'amp', 44.79, 44.79, 139, 142830, 0.13),
    ('80', '125m', 2048, 8, 32, 2, 512, False, 'amp', 44.45, 44.45, 138, 141737, 0.13),
    ('80', '125m', 1024, 8, 64, 2, 1024, False, 'amp', 43.15, 43.15, 134, 156468, 0.12),
    ('80', '125m', 512, 8, 128, 2, 2048, False, 'amp', 42.56, 42.56, 132, 165681, 0.12),
    ('40', '70b', 2048, 128, 4, 1, 512, True, 'pure', 48.91, 65.21, 152, 376, 64.86),
    ('40', '70b', 2048, 64, 2, 1, 128, True, 'pure', 35.87, 47.82, 111, 276, 64.86),
    ('40', '30b', 2048, 128, 6, 1, 768, True, 'pure', 52.25, 69.66, 163, 865, 29.98),
    ('40', '30b', 2048, 32, 4, 1, 128, True, 'pure', 51.74, 68.98, 161, 857, 29.98),
    ('40', '13b', 8192, 8, 1, 16, 128, True, 'pure', 43.95, 58.6, 137, 1407, 12.89),
    ('40', '13b', 4096, 8, 2, 16, 256, True, 'pure', 44.85, 59.8, 139, 1603, 12.86),
    ('40', '13b', 2048, 128, 16, 1, 2048, True, 'pure', 51.93, 69.24, 162, 1972, 12.85),
    ('40', '13b', 2048, 64, 16, 1, 1024, True, 'pure', 52.04, 69.39, 162, 1976, 12.85),
    ('40', '13b', 2048, 32, 14, 1, 448, True, 'pure', 52.62, 70.16, 164, 1998, 12.85),
    ('40', '13b', 2048, 16, 10, 1, 160, True, 'pure', 52.5, 70.0, 163, 1993, 12.85),
    ('40', '13b', 2048, 8, 4, 16, 512, True, 'pure', 43.94, 58.58, 137, 1668, 12.85),
    ('40', '13b', 1024, 8, 8, 16, 1024, True, 'pure', 44.07, 58.76, 137, 1727, 12.85),
    ('40', '13b', 512, 8, 16, 16, 2048, True, 'pure', 44.28, 59.04, 138, 1763, 12.85),
    ('40', '7b', 16384, 8, 1, 4, 32, True, 'pure', 47.65, 63.53, 148, 2249, 6.72),
    ('40', '7b', 8192, 8, 3, 4, 96, True, 'pure', 49.04, 65.38, 153, 2887, 6.68),
    ('40', '7b', 4096, 8, 6, 4, 192, True, 'pure', 50.11, 66.82, 156, 3366, 6.67),
    ('40', '7b', 2048, 128, 18, 1, 2304, True, 'pure', 50.14, 66.85, 156, 3623, 6.66),
    ('40', '7b', 2048, 64, 18, 1, 1152, True, 'pure', 50.73, 67.64, 158, 3665, 6.66),
    ('40', '7b', 2048, 32, 18, 1, 576, True, 'pure', 51.55, 68.73, 160, 3725, 6.66),
    ('40', '7b', 2048, 16, 16, 1, 256, True, 'pure', 50.44, 67.26, 157, 3645, 6.66),
    ('40', '7b', 2048, 8, 12, 4, 384, True, 'pure', 50.92, 67.89, 158, 3679, 6.66),
    ('40', '7b', 1024, 8, 24, 4, 768, True, 'pure', 51.31, 68.42, 160, 3854, 6.65),
    ('40', '7b', 512, 8, 48, 4, 1536, True, 'pure', 50.85, 67.8, 158, 3895, 6.65),
    ('40', '3b', 32768, 8, 1, 4, 32, True, 'pure', 46.03, 61.37, 143, 2955, 2.73),
    ('40', '3b', 16384, 8, 2, 8, 128, True, 'pure', 46.14, 61.52, 143, 4465, 2.69),
    ('40', '3b', 8192, 8, 1, 8, 64, False, 'pure', 55.13, 55.13, 172, 7149, 2.67),
    ('40', '3b', 4096, 8, 2, 8, 128, False, 'pure', 56.18, 56.18, 175, 8777, 2.66),
    ('40', '3b', 2048, 128, 6, 1, 768, False, 'pure', 54.8, 54.8, 170, 9538, 2.65),
    ('40', '3b', 2048, 64, 6, 1, 384, False, 'pure', 55.94, 55.94, 174, 9736, 2.65),
    ('40', '3b', 2048, 32, 6, 1, 192, False, 'pure', 56.96, 56.96, 177, 9914, 2.65),
    ('40', '3b', 2048, 16, 5, 1, 80, False, 'pure', 56.02, 56.02, 174, 9750, 2.65),
    ('40', '3b', 2048, 8, 5, 8, 320, False, 'pure', 57.82, 57.82, 180, 10065, 2.65),
    ('40', '3b', 1024, 8, 10, 8, 640, False, 'pure', 58.14, 58.14, 181, 10731, 2.65),
    ('40', '3b', 512, 8, 20, 8, 1280, False, 'pure', 59.49, 59.49, 185, 11324, 2.65),
    ('40', '1b', 32768, 8, 1, 4, 32, True, 'pure', 45.07, 60.1, 140, 5095, 1.38),
    ('40', '1b', 16384, 8, 1, 8, 64, False, 'pure', 55.23, 55.23, 172, 9715, 1.35),
    ('40', '1b', 8192, 8, 2, 8, 128, False, 'pure', 55.29, 55.29, 172, 13474, 1.33),
    ('40', '1b', 4096, 8, 4, 8, 256, False, 'pure', 55.85, 55.85, 174, 16856, 1.32),
    ('40', '1b', 2048, 128, 10, 1, 1280, False, 'pure', 54.41, 54.41, 169, 18647, 1.32),
    ('40', '1b', 2048, 64, 10, 1, 640, False, 'pure', 55.44, 55.44, 172, 19001, 1.32),
    ('40', '1b', 2048, 32, 10, 1, 320, False, 'pure', 45.39, 45.39, 141, 15555, 1.32),
    ('40', '1b', 2048, 16, 8, 1, 128, False, 'pure', 55.69, 55.69, 173, 19085, 1.32),
    ('40', '1b', 2048, 8, 8, 8, 512, False, 'pure', 56.23, 56.23, 175, 19271, 1.32),
    ('40', '1b', 1024, 8, 16, 8, 1024, False, 'pure', 57.02, 57.02, 177, 20959, 1.31),
    ('40', '1b', 512, 8, 32, 8, 2048, False, 'pure', 57.1, 57.1, 178, 21782, 1.31),
    ('40', '760m', 32768, 8, 1, 4, 32, True, 'pure', 44.53, 59.37, 138, 7183, 0.81),
    ('40', '760m', 16384, 8, 1, 4, 32, False, 'pure', 53.26, 53.26, 166, 13914, 0.78),
    ('40', '760m', 8192, 8, 3, 4, 96, False, 'pure', 53.12, 53.12, 165, 20106, 0.77),
    ('40', '760m', 4096, 8, 6, 4, 192, False, 'pure', 53.0, 53.0, 165, 25863, 0.76),
    ('40', '760m', 2048, 128, 12, 1, 1536, False, 'pure', 50.73, 50.73, 158, 28940, 0.76),
    ('40', '760m', 2048, 64, 12, 1, 768, False, 'pure', 51.44, 51.44, 160, 29344, 0.76),
    ('40', '760m', 2048, 32, 12, 1, 384, False, 'pure', 51.97, 51.97, 162, 29648, 0.76),
    ('40', '760m', 2048, 16, 12, 1, 192, False, 'pure', 51.9, 51.9, 161, 29607, 0.76),
    ('40', '760m', 2048, 8, 12, 4, 384, False, 'pure', 52.89, 52.89, 165, 30173, 0.76),
    ('40', '760m', 1024, 8, 24, 4, 768, False, 'pure', 53.63, 53.63, 167, 33422, 0.76),
    ('40', '760m', 512, 8, 48, 4, 1536, False, 'pure', 53.47, 53.47, 166, 34938, 0.76),
    ('40', '350m', 32768, 8, 1, 4, 32, False, 'pure', 51.55, 51.55, 160, 13416, 0.39),
    ('40', '350m', 16384, 8, 2, 4, 64, False, 'pure', 51.78, 51.78, 161, 22896, 0.37),
    ('40', '350m', 8192, 8, 4, 4, 128, False, 'pure', 51.39, 51.39, 160, 34933, 0.36),
    ('40', '350m', 4096, 8, 8, 4, 256, False, 'pure', 50.38, 50.38, 157, 46833, 0.36),
    ('40', '350m', 2048, 128, 18, 1, 2304, False, 'pure', 45.61, 45.61, 142, 51934, 0.36),
    ('40', '350m', 2048, 64, 18, 1, 1152, False, 'pure', 46.27, 46.27, 144, 52689, 0.36),
    ('40', '350m', 2048, 32, 18, 1, 576, False, 'pure', 47.26, 47.26, 147, 53811, 0.36),
    ('40', '350m', 2048, 16, 18, 1, 288, False, 'pure', 48.66, 48.66, 151, 55413, 0.36),
    ('40', '350m', 2048, 8, 16, 4, 512, False, 'pure', 49.17, 49.17, 153, 55995, 0.36),
    ('40', '350m', 1024, 8, 32, 4, 1024, False, 'pure', 48.73, 48.73, 152, 62523, 0.35),
    ('40', '350m', 512, 8, 64, 4, 2048, False, 'pure', 48.39, 48.39, 150, 66284, 0.35),
    ('40', '125m', 32768, 8, 1, 4, 32, False, 'pure', 47.27, 47.27, 147, 32651, 0.15),
    ('40', '125m', 16384, 8, 2, 3, 48, False, 'pure', 46.77, 46.77, 145, 55484, 0.14),
    ('40', '125m', 8192, 8, 5, 3, 120, False, 'pure', 46.94, 46.94, 146, 86858, 0.13),
    ('40', '125m', 4096, 8, 13, 3, 312, False, 'pure', 44.82, 44.82, 139, 115162, 0.13),
    ('40', '125m', 2048, 128, 26, 1, 3328, False, 'pure', 38.86, 38.86, 121, 123936, 0.13),
    ('40', '125m', 2048, 64, 26, 1, 1664, False, 'pure', 39.27, 39.27, 122, 125234, 0.13),
    ('40', '125m', 2048, 32, 26, 1, 832, False, 'pure', 39.86, 39.86, 124, 127122, 0.13),
    ('40', '125m', 2048, 16, 26, 1, 416, False, 'pure', 40.93, 40.93, 127, 130535, 0.13),
    ('40', '125m', 2048, 8, 26, 3, 624, False, 'pure', 42.75, 42.75, 133, 136334, 0.13),
    ('40', '125m', 1024, 8, 52, 3, 1248, False, 'pure', 40.89, 40.89, 127, 148289, 0.12),
    ('40', '125m', 512, 8, 104, 3, 2496, False, 'pure', 40.26, 40.26, 125, 156735, 0.12),
)


def _llmfoundry() -> list[TrainingRun]:
    out = []
    for (gb_mem, size, seq, gpus, mb, ga, gbatch, ac, mp, mfu, hfu, tflops, tps,
         params_b) in _LF_ROWS:
        prec = "bf16" if mp == "pure" else "amp_bf16"
        run_id = f"llmfoundry-a100_{gb_mem}gb-{size}-s{seq}-g{gpus}-{prec}-mb{mb}-ga{ga}"
        out.append(TrainingRun(
            run_id=run_id, family=f"llmfoundry-a100-{gb_mem}gb", model=mpt(size, seq),
            device=f"A100-SXM-{gb_mem}GB", num_gpus=gpus, gpus_per_node=8,
            train={"micro_batch": mb, "seq_len": seq, "precision": "bf16-mixed", "dp": gpus,
                   "fsdp": "full", "global_batch": gbatch,
                   "recompute": "full" if ac else "none", "attention": "flash",
                   "fused": False, "dropout": False,
                   "grad_reduce_dtype": "grad" if mp == "pure" else "fp32"},
            metrics=(Metric("mfu_pct", mfu, "llmfoundry-mfu", False, True,
                            note=f"HFU {hfu} %, {tflops:g} model TFLOP/s, {tps} tokens/s/GPU, "
                                 f"{params_b}B params (csv)"),),
            source=_LF, verification="VERIFIED-primary",
            inferred=("attention: flash (attn_impl triton, FlashAttention-style kernel)",
                      "attention kernel run: FlashAttention-1 generation (submit_benchmarks.py "
                      "'--attn_impl' default 'triton', the pre-MLIR Triton FlashAttention; "
                      "TUTORIAL.md: 'Our training setups typically use triton'); timed with "
                      "the profile's FA2 ceiling: timing it as fa1, half of FA2's, was tried "
                      "at stop 19 and not kept (README)",
                      "fused: False (eager MPT: no torch.compile in submit_benchmarks.py; "
                      "LayerNorm, GELU and residual adds are separate kernels)",
                      "grad_dtype: auto = bf16 in memory; grad_reduce_dtype: fp32 for the "
                      "amp_bf16 rows (Composer FSDP mixed_precision DEFAULT: reduce_dtype "
                      "float32)" if mp == "amp" else
                      "grad_dtype: auto; grad_reduce_dtype: grad (FSDP PURE reduces in bf16)"),
            notes=f"FSDP FULL_SHARD over {gpus} GPUs, mixed precision "
                  f"{'PURE' if mp == 'pure' else 'DEFAULT'} ({prec}), activation checkpointing "
                  f"{ac}, micro-batch {mb} x grad-accum {ga}, limit_all_gathers. 1600 Gb/s "
                  "RoCE per 8-GPU node = 25 GB/s per GPU (catalog default). MFU by "
                  "llm-foundry's formula (attention in full, N incl. the learned position "
                  "table).",
        ))
    return out


# ---- rows not modelled --------------------------------------------------------------------

SKIPPED: tuple[Skipped, ...] = (
    Skipped("megatron2021-est-175B", "a projection (eq. 4 from an assumed 140 TFLOP/s on 1024 "
            "GPUs), not a measurement; the measured 175B throughputs are the Table 2 rows"),
    Skipped("megatron2021-est-1T", "a projection (eq. 4 from Table 1's 163 TFLOP/s); the "
            "measurement is megatron2021-1T"),
    Skipped("zero2019-100B", "'>38 TFLOP/s' is a lower bound; the csv has no architecture, "
            "batch, sequence length or MP degree for ZeRO-100B; V100 DGX-2 (16 GPUs per "
            "NVSwitch node)"),
    Skipped("palm-table3-gpt3", "no GPU count, layout, batch or timing in the csv; 21.3 % is "
            "PaLM's re-derivation for a V100 run"),
    Skipped("palm-table3-mtnlg", "no GPU count, layout or batch in the csv; 30.2 % is PaLM's "
            "re-derivation (MT-NLG's own throughput is not in the csv)"),
    Skipped("palm-table3-gopher", "UNVERIFIED (recalled); TPU v3 is not in the catalog"),
    Skipped("gpt3-175B", "total FLOPs only (3.14e23): no GPU count or time to predict"),
    Skipped("chinchilla-70B", "total FLOPs only; mixed TPU v3/v4 hardware, no chip count"),
    Skipped("lamda-137B", "TPU v3 is not in the device catalog; no layout or batch"),
    Skipped("fa1-table1-bert", "MLPerf time-to-accuracy (minutes to 72 % MLM accuracy): needs "
            "steps to converge, unpadding and the MLPerf BERT recipe, none in the csv"),
)


FAMILY_FRAMEWORK: dict[str, str] = {
    "megatron2021-t1": "megatron", "megatron2021-t2": "megatron", "opt": "megatron",
    "bloom": "megatron", "palm": "megatron", "llama1": "fsdp", "llama2": "fsdp",
    "flashattn-train": "megatron", "fa1-gpt2": "hf", "karpathy": "hf",
    "llmfoundry-a100-40gb": "llm-foundry", "llmfoundry-a100-80gb": "llm-foundry",
}
"""Closest framework profile of each family in this file (the CSV rows name their own):
metaseq (OPT) and Megatron-DeepSpeed (BLOOM) are Megatron derivatives; PaLM's T5X/JAX has
Megatron-style fused kernels; Meta's LLaMA codebase shards with FSDP; the FlashAttention
training scripts use Megatron-style fused kernels; nanoGPT/llm.c and the FlashAttention-1
GPT-2 baselines are Hugging Face-style eager PyTorch."""

DATA = Path(__file__).resolve().parent / "data"
CALIBRATION_CSV = DATA / "training_calibration.csv"
"""New calibration rows (llm-foundry H100 BF16), each with its source."""
VALIDATION_CSV = DATA / "training_validation.csv"
"""Hold-out families, fixed before modelling: scored once, never fitted on."""

_CSV_METRIC = {"tokens_per_sec_per_gpu": "tokens-per-gpu", "tflops_per_gpu": "model-tflops"}


_GPT_NAME = re.compile(r"gpt-h(\d+)-l(\d+)-a(\d+)-v(\d+)(-untied)?")
"""A Megatron GPT given by its shape in the csv's model cell: gpt-h{hidden}-l{layers}-a{heads}
-v{vocab}[-untied] (GELU MLP 4h, learned positions, biases; tied embeddings unless -untied)."""


def nemotron4(size: str) -> ModelSpec:
    """Nemotron-4 15B / 340B: shapes from NVIDIA/dgxc-benchmarking @35a9aec
    nemotron/nemotron4-{15b,340b}-synth.yaml (the 15B's also in Parmar et al. 2024 Table 1):
    GQA with 8 query groups, squared-ReLU MLP without gate, no biases, RoPE, untied
    embeddings, vocab 256000 (nemotron_2_256k tokenizer), LayerNorm (layernorm1p), no dropout.
    Squared ReLU is represented as ReLU (ModelSpec has no squared ReLU; the matmuls are the
    same). Parameters: 15B 15.63B (paper: 3.2B embedding + 12.5B other), 340B 341.03B
    (331.6B outside the embedding and output matrices)."""
    d, layers, heads, ff = {"15b": (6144, 32, 48, 24576), "340b": (18432, 96, 96, 73728)}[size]
    return ModelSpec(
        name=f"nemotron-4-{size}", family="nemotron",
        source=f"NVIDIA/dgxc-benchmarking @35a9aec nemotron/nemotron4-{size}-synth.yaml",
        vocab_size=256000, hidden_size=d, num_layers=layers, num_heads=heads, num_kv_heads=8,
        intermediate_size=ff, mlp="plain", activation="relu", norm="layernorm",
        position="rope", max_position_embeddings=4096, tie_embeddings=False)


OLMO_CORE_SHAPES: dict[str, tuple[int, int, int, int, int]] = {
    "1b": (2048, 18, 16, 16, 5632), "7b": (4096, 32, 32, 32, 11008),
    "13b": (5120, 40, 40, 40, 13824), "llama3-8b": (4096, 32, 32, 8, 14336)}
"""(d_model, layers, heads, kv heads, ffn) of TransformerConfig.olmo_1B/7B/13B and llama3_8B
at allenai/OLMo-core @e27ba74 src/olmo_core/nn/transformer/config.py: ffn = 8d/3 (x 1.3 for
llama3_8B) rounded up to hidden_size_multiple_of (256; 1024 for llama3_8B)."""


def olmo_core(size: str) -> ModelSpec:
    """The models of OLMo-core's throughput table (allenai/OLMo-core @e27ba74 README.md and
    src/scripts/train/*.py): llama_like blocks (RMSNorm, SwiGLU, RoPE, no biases, untied
    embeddings, no dropout); the vocab is the dolma2 tokenizer's 100278 padded to 100352
    (TokenizerConfig.padded_vocab_size, multiple of 128), for the Llama 8B too. The OLMo
    ('OLMo-1124') sizes use the reordered-norm block with QK-norm: the q and k RMSNorms (over
    d_model each, MHA) are counted as two more norms per layer."""
    d, layers, heads, kv, ff = OLMO_CORE_SHAPES[size]
    return ModelSpec(
        name=f"olmo-core-{size}", family="olmo2" if size != "llama3-8b" else "llama",
        source="allenai/OLMo-core @e27ba74 src/olmo_core/nn/transformer/config.py",
        vocab_size=100352, hidden_size=d, num_layers=layers, num_heads=heads,
        num_kv_heads=kv, intermediate_size=ff, mlp="gated", activation="silu", norm="rmsnorm",
        norms_per_layer=2 if size == "llama3-8b" else 4, position="rope",
        max_position_embeddings=4096, tie_embeddings=False)


_FLAGPERF_LLAMA3 = ("FlagOpen/FlagPerf @8badef22 training/benchmarks/llama3_%s/megatron/"
                    "pretrain_llama3.sh MODEL_ARGS; Megatron-LM core_v0.6.0 megatron/training/"
                    "arguments.py defaults (tied embeddings, linear biases, learned positions)")
_NANOTRON_BENCH = ("huggingface/nanotron @2411b02 scripts/scaling_benchmarks.py model_configs "
                   "(1B/3B/8B/70B: layers, hidden, heads, ffn), vocab 131072, MHA, tied below ffn 10000")

_GCP_NEMO = ("AI-Hypercomputer/gpu-recipes NeMo 24.07 configs (%s): Llama 3%s shapes with "
             "tokenizer GPT2BPETokenizer (50257) padded to make_vocab_size_divisible_by 128 x TP = "
             "%d, normalization rmsnorm, bias false, fast-swiglu, rope, "
             "share_embeddings_and_output_weights false")
LLAMA_LIKE: dict[str, tuple[int, int, int, int, int, int, bool, bool, str]] = {
    "tinyllama-1.1b": (32000, 2048, 22, 32, 4, 5632, False, False,
                       "jzhang38/TinyLlama @bf12224 lit_gpt/config.py 'tiny_LLaMA_1b'"),
    "internlm-7b": (103168, 4096, 32, 32, 32, 11008, False, True,
                    "InternLM/InternEvo @c628a8c configs/7B_sft.py, internlm/model/"
                    "modeling_internlm.py (qkv and output biases), modules/mlp.py"),
    "fms-llama2-34b": (32000, 8192, 48, 64, 8, 22016, False, False,
                       "foundation-model-stack/fms-fsdp @ed74fd5 fms_fsdp/utils/config_utils.py "
                       "'llama2_34b'; fms/models/llama.py LLaMAConfig defaults"),
    "nanotron-bench-1.34b": (131072, 2048, 16, 32, 32, 8192, True, False, _NANOTRON_BENCH),
    "nanotron-bench-3.57b": (131072, 3072, 28, 32, 32, 8192, True, False, _NANOTRON_BENCH),
    "nanotron-bench-8.86b": (131072, 4096, 32, 32, 32, 14336, False, False, _NANOTRON_BENCH),
    "nanotron-bench-80b": (131072, 8192, 80, 64, 64, 28672, False, False, _NANOTRON_BENCH),
    "smollm3-3b": (128256, 2048, 36, 16, 4, 11008, True, False,
                   "huggingface/smollm @a041759 text/pretraining/smollm3/stage1_8T.yaml "
                   "model_config"),
    "flagperf-llama3-8b": (128256, 4096, 32, 32, 8, 14336, True, True, _FLAGPERF_LLAMA3 % "8B"),
    "flagperf-llama3-70b": (128256, 8192, 80, 64, 8, 28672, True, True,
                            _FLAGPERF_LLAMA3 % "70B"),
    "aquila2-7b": (100008, 4096, 32, 32, 32, 11008, False, False,
                   "FlagOpen/FlagPerf @1b5a0303 training/benchmarks/aquila2_7b/flagscale/"
                   "flagscale_main.sh NETWORK_ARGS and DATA_ARGS (FlagScale @ed55532)"),
    "flagperf-mds-llama2-7b": (50304, 4096, 32, 32, 32, 11008, False, True,
                               "FlagOpen/FlagPerf @1b5a0303 training/benchmarks/llama2_7b/"
                               "megatron-deepspeed/megatron-deepspeed_main.sh (the arguments before "
                               "its '#' word); microsoft/Megatron-DeepSpeed @11f2d934 "
                               "megatron/arguments.py defaults"),
    "chatglm3-6b": (65024, 4096, 28, 32, 2, 13696, False, True,
                    "FlagOpen/FlagPerf @1b5a0303 training/benchmarks/chatglm3_6b/deepspeed/"
                    "chatglm3_6b_hf/config.json (THUDM/chatglm3-6b)"),
    "baichuan2-13b": (125696, 5120, 40, 40, 40, 13696, False, False,
                      "Yang et al. 2023 'Baichuan 2' (arXiv 2309.10305) Table 2 (vocab 125696), "
                      "Table 3 (13B: 40 x 5120, 40 heads, ffn 13696, ALiBi), Sec. 2.4 (SwiGLU, "
                      "RMSNorm), Sec. 2.5 (NormHead), read in a public transcription; untied and "
                      "bias-free per baichuan-inc/Baichuan2-13B-Base config.json as copied in "
                      "public code"),
    "mlperf-llama31-405b": (32768, 16384, 126, 128, 8, 53248, False, False,
                            "Llama 3.1 405B shapes (meta-llama/Llama-3.1-405B config.json, the "
                            "catalog's llama-3.1-405b) with the Mixtral 8x22B tokenizer "
                            "(mlcommons/training_results_v5.0 NVIDIA llama31_405b README 3.3.2; "
                            "Mistral's 32768-token vocabulary)"),
    "kempnerforge-13b": (128256, 5120, 40, 40, 8, 17920, False, False,
                         "KempnerInstitute/KempnerForge @01b461a benchmarks/mfu_scaling/"
                         "mfu_bench.sh M13B; kempnerforge/config/schema.py "
                         "computed_ffn_hidden_dim, tie_embeddings=False"),
    "yi-34b": (64000, 7168, 60, 56, 8, 20480, False, False,
               "Young et al. 2024 'Yi: Open Foundation Models by 01.AI' (arXiv 2403.04652) "
               "Table 1 (34B: hidden 7168, 56 query heads, 8 KV heads, 60 layers); "
               "01-ai/Yi-34B(-200K) config.json as copied in public code (ffn 20480, vocab "
               "64000, untied, no biases)"),
    "skywork-13b": (65536, 4608, 52, 36, 36, 12288, False, False,
                    "Wei et al. 2023 'Skywork' (arXiv 2310.19341) Table 3 (Skywork-13B: vocab 65536, "
                    "hidden 4608, FFN 12288, head dim 128, 36 heads, 52 layers) and Sec. 3.4 (RoPE, "
                    "RMSNorm, SwiGLU), read in a public transcription; untied and bias-free as LLaMA "
                    "(not stated)"),
    "qwen2.5-14b": (152064, 5120, 48, 40, 8, 13824, False, True,
                    "Qwen Team 2024 'Qwen2.5 Technical Report' (arXiv 2412.15115) Table 1 (14B: "
                    "48 layers, 40/8 heads, untied); Qwen/Qwen2.5-14B config.json as copied in "
                    "public code (hidden 5120, ffn 13824, vocab 152064, attention_bias on q/k/v)"),
    "auroragpt-7b": (32000, 4096, 32, 32, 8, 11008, False, False,
                     "argonne-lcf/Megatron-DeepSpeed @509e8ec5 ALCF/helpers.sh setParams defaults (HEADS 32, "
                     "NLAYERS 32, HIDDEN 4096, NUM_KV_HEAD 8, FFN_HIDDEN_SIZE 11008, LLAMA_ARGS untied, "
                     "swiglu, rmsnorm, no bias) with Llama2Tokenizer (Dolma tokenizer.model, 32000 assumed)"),
    "gcp-nemo-llama3-70b-v50688": (50688, 8192, 80, 64, 8, 28672, False, False, _GCP_NEMO % (
        "@24ba6df src/frameworks/nemo-configs/llama3-70b-fp8.yaml, @3a1db07 "
        "llama3.1-70b-256gpus-bf16.yaml", " 70B", 50688)),
    "gcp-nemo-llama3-70b-v50432": (50432, 8192, 80, 64, 8, 28672, False, False, _GCP_NEMO % (
        "@7fa4518 src/frameworks/a3ultra/nemo-configs/llama-3.1-70b-256gpus-a3ultra-fp8.yaml",
        " 70B", 50432)),
    "gcp-nemo-llama31-405b-kv16-v51200": (51200, 16384, 126, 128, 16, 53248, False, False,
                                          _GCP_NEMO % (
        "@1a3020b src/frameworks/a3ultra/nemo-configs/llama-3.1-405b-576gpus-a3ultra-fp8.yaml; "
        "num_query_groups 16 as the config states, not Llama 3.1's 8", ".1 405B", 51200)),
}
ALIBI_LLAMA_LIKE: frozenset[str] = frozenset({"baichuan2-13b"})
"""LLAMA_LIKE decoders with ALiBi in place of RoPE: no position parameters, a fixed bias added to
the attention scores (as BLOOM, MPT)."""
"""Llama-style decoders of the hold-out rows without a catalog preset (RMSNorm, SwiGLU, RoPE,
no MLP biases, no dropout): (vocab, d_model, layers, heads, kv heads, ffn, tied embeddings,
attention biases, source). InternLM-7B: intermediate 11008 = int(4096 x 8/3) rounded up to a
multiple of 256 (InternEvo FeedForward multiple_of); vocab 103168; biases on q, k, v and the
output projection.
The nanotron scaling-benchmark models are named by nanotron's own parameter estimate
(1.34B, 3.57B, 8.86B, 80.0B in docs/benchmark_summary.svg), which these shapes reproduce.
SmolLM3-3B: GQA with 4 KV heads, tied embeddings, 3.08B parameters; its NoPE layers (no rotary
embedding in every 4th layer, no_rope_layer: 4) change no matmul and are not represented.
FlagPerf's Llama 3 8B/70B cases pass Llama 3's shapes (SwiGLU, RMSNorm, GQA 8) to Megatron's
pretrain_gpt.py without --untie-embeddings-and-output-weights, --disable-bias-linear or
--position-embedding-type rope, so Megatron's defaults hold: tied embeddings, biases on every
linear layer and a learned position table of 8192 rows; the MLP biases and the position table
(about 0.4 % of the 8B's parameters, no matmul) are not represented.
Aquila2-7B (FlagScale): --swiglu --multiple-of 256 gives ffn int(2 x 4 x 4096 / 3) = 10922
rounded up to 11008; RMSNorm, RoPE, --disable-bias-linear, untied, vocab 100008 (Megatron's
padding to a multiple of 128 x TP, under 0.4 %, not represented).
FlagPerf's Megatron-DeepSpeed Llama2-7B: the launch evals one string in which the word
'#--recompute-activations' starts a shell comment, so --normalization rmsnorm,
--disable-bias-linear and --num-key-value-heads never reach Megatron-DeepSpeed: LayerNorm and
biases on every linear layer (the attention biases are represented; the MLP biases and
LayerNorm for RMSNorm, elementwise only, are not); vocab 50304 = the GPT-NeoX-20B tokenizer's
50277 tokens padded to a multiple of 128 (TP 1).
ChatGLM3-6B: 2 KV groups (multi_query_group_num), ffn 13696 SwiGLU, RMSNorm, rotary embedding on
half of each head, a bias on q, k, v only (the flag also biases the output projection, 4096
parameters a layer), vocab 65024, untied.
Baichuan2-13B: MHA (40 heads), SwiGLU ffn 13696, RMSNorm, ALiBi (ALIBI_LLAMA_LIKE), vocab 125696,
an untied output layer whose rows are normalised each step (NormHead, elementwise, not
represented), no linear biases; 13.9B parameters.
Google Cloud gpu-recipes NeMo 24.07 Llama 3 / 3.1 recipes (gcp-nemo-*): the Llama shapes run with
the GPT-2 BPE tokenizer their configs name (GPT2BPETokenizer, mock or Wikipedia-GPT2 data), so
vocab 50257 padded to 128 x TP (TP2 50432, TP4 50688, TP8 51200), untied; the 405B config states
16 query groups (Llama 3.1 405B has 8), kept as stated.
MLPerf Llama 3.1 405B: the Llama 3.1 405B decoder with the Mixtral 8x22B tokenizer in place of
Llama 3's 128256-token one (the benchmark's only change), vocab 32768 (a multiple of 128 x TP 8,
no padding), untied.
KempnerForge '13B': Llama-3-style (GQA 8, vocab 128256, untied) at 40 x 5120 with 40 heads; ffn
int(4 x 5120 x 2/3 x 1.3) = 17749 rounded up to a multiple of 256 = 17920 (schema.py
computed_ffn_hidden_dim, ffn_dim_multiplier 1.3), 14.84B parameters as the report states.
Yi-34B (and Yi-34B-200K, the same shapes with rope_theta 5e6): Llama-style, GQA 8 of 56 heads,
SwiGLU ffn 20480, RMSNorm, untied, vocab 64000; XTuner's own FLOP count (TFLOPs / TGS in its
speed table, 341.4 GFLOP a token at 8k) reproduces these shapes to 0.2 %.
Skywork-13B: MHA (36 heads of 128), SwiGLU ffn 12288 (8/3 of 4608), RMSNorm, RoPE, vocab 65536
(Table 3), deeper and narrower than LLaMA2-13B; untied and bias-free (not stated, as LLaMA), 13.85B
parameters.
Qwen2.5-14B: GQA 8 of 40 heads, SwiGLU ffn 13824, RMSNorm, RoPE, untied, vocab 152064, biases on
q, k, v only (the flag also biases the output projection, 5120 parameters a layer)."""


def llama_like(name: str, seq: int) -> ModelSpec:
    """A decoder of LLAMA_LIKE; `seq` only sizes the position range (RoPE has no table)."""
    vocab, d, layers, heads, kv, ff, tied, attn_bias, source = LLAMA_LIKE[name]
    return ModelSpec(
        name=name, family="llama", source=source, vocab_size=vocab, hidden_size=d,
        num_layers=layers, num_heads=heads, num_kv_heads=kv, intermediate_size=ff, mlp="gated",
        activation="silu", norm="rmsnorm",
        position="none" if name in ALIBI_LLAMA_LIKE else "rope", max_position_embeddings=max(seq, 2048),
        tie_embeddings=tied, qkv_bias=attn_bias, out_bias=attn_bias)


_BLOOM_NAME = re.compile(r"bloom-h(\d+)-l(\d+)-a(\d+)(?:-v(\d+))?")
"""A BLOOM-architecture model of another shape in the csv's model cell: bloom-h{hidden}-l{layers}
-a{heads}[-v{vocab}] (BLOOM_176B's ALiBi, embedding LayerNorm, GELU 4h, biases, tied embeddings;
vocab 250880 unless -v gives another, e.g. BloombergGPT's 131072)."""


PYTHIA_SHAPES: dict[str, tuple[int, int, int, int]] = {
    # size: (hidden-size, num-layers, num-attention-heads) from EleutherAI/pythia @a19eecb
    # models/*.yml; vocab: the tokenizer's 50277 padded to a multiple of 128 x model-parallel-size
    # (Megatron/GPT-NeoX make-vocab-size-divisible-by 128): 50304 at TP 1, 50432 at TP 2, 50688 at
    # TP 4, which reproduces the published parameter counts (1.4B: 1,414,647,808)
    "1b": (2048, 16, 8, 50304), "1.4b": (2048, 24, 16, 50304), "2.8b": (2560, 32, 32, 50304),
    "6.9b": (4096, 32, 32, 50432), "12b": (5120, 36, 40, 50688),
}


def pythia(size: str) -> ModelSpec:
    """Pythia (GPT-NeoX architecture) as EleutherAI/pythia @a19eecb models/*.yml set it: rotary
    embedding on 25% of each head (rotary-pct 0.25), parallel attention + MLP residual
    (gpt-j-residual), LayerNorm, GELU MLP 4h with biases, untied embedding and unembedding
    (no-weight-tying), vocab padded per tensor-parallel size, 2048 positions, dropout 0."""
    d, layers, heads, vocab = PYTHIA_SHAPES[size]
    return ModelSpec(
        name=f"pythia-{size}", family="gpt_neox",
        source=f"EleutherAI/pythia @a19eecb models/*/pythia-{size}.yml",
        vocab_size=vocab, hidden_size=d, num_layers=layers, num_heads=heads,
        intermediate_size=4 * d, mlp="plain", activation="gelu", norm="layernorm",
        position="rope", rotary_dim=d // heads // 4, parallel_residual=True,
        max_position_embeddings=2048, tie_embeddings=False, qkv_bias=True, out_bias=True,
        mlp_bias=True)


STARCODERBASE_15B = ModelSpec(
    name="starcoderbase-15.5b", family="gpt_bigcode",
    source="Li et al. 2023 'StarCoder' (arXiv 2305.06161) Table 11; bigcode/starcoderbase config.json "
           "as copied in public converter code (n_embd 6144, n_layer 40, n_head 48, multi_query, "
           "n_inner 24576, n_positions 8192, vocab 49152, tie_word_embeddings)",
    vocab_size=49152, hidden_size=6144, num_layers=40, num_heads=48, num_kv_heads=1,
    intermediate_size=24576, mlp="plain", activation="gelu_tanh", norm="layernorm",
    position="learned", max_position_embeddings=8192, tie_embeddings=True, qkv_bias=True,
    out_bias=True, mlp_bias=True)
"""StarCoderBase 15.5B: GPT-2-style decoder with multi-query attention (one K/V head), learned
positions over 8192, GELU 4h MLP, biases, tied embeddings; 15.5B parameters as Table 11 states."""


def _csv_model(name: str, seq: int) -> ModelSpec:
    if name.endswith(".json"):  # a Hugging Face config.json under data/ (models/<name>/config.json)
        return get_model(str(DATA / name))
    if name in LLAMA_LIKE:
        return llama_like(name, seq)
    bloom = _BLOOM_NAME.fullmatch(name)
    if bloom is not None:
        h, layers, heads = (int(x) for x in bloom.groups()[:3])
        vocab = int(bloom.group(4) or BLOOM_176B.vocab_size)
        return BLOOM_176B.model_copy(update={
            "name": name, "hidden_size": h, "num_layers": layers, "num_heads": heads,
            "intermediate_size": 4 * h, "vocab_size": vocab})
    if name.startswith("mpt-"):
        return mpt(name[4:], seq)
    if name.startswith("nemotron-4-"):
        return nemotron4(name[len("nemotron-4-"):])
    if name.startswith("olmo-core-"):
        return olmo_core(name[len("olmo-core-"):])
    if name.startswith("pythia-"):
        return pythia(name[len("pythia-"):])
    if name == STARCODERBASE_15B.name:
        return STARCODERBASE_15B
    m = _GPT_NAME.fullmatch(name)
    if m is None:
        return get_model(name)
    h, layers, heads, vocab = (int(x) for x in m.groups()[:4])
    spec = megatron_gpt(name, h, layers, heads, vocab=vocab, seq=seq)
    return spec.model_copy(update={"tie_embeddings": False}) if m.group(5) else spec


def _csv_runs(path: Path, split: str) -> list[TrainingRun]:
    out = []
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            seq, gpus = int(row["seq_len"]), int(row["num_gpus"])
            recompute = row["recompute"]
            train: dict[str, Any] = {
                "micro_batch": int(row["micro_batch"]), "seq_len": seq,
                "precision": row["precision"], "global_batch": int(row["global_batch"]),
                "dp": int(row["dp"]), "tp": int(row["tp"]), "pp": int(row["pp"]),
                "cp": int(row["cp"]), "sp": row["sp"] == "true",
                "virtual_stages": int(row["virtual_stages"]), "recompute": recompute,
                "attention": row.get("attention") or "flash",
                "dropout": row.get("dropout") == "true", "ep": int(row.get("ep") or 1)}
            if row.get("etp"):  # the experts' own tensor-parallel degree (TrainConfig.etp)
                train["etp"] = int(row["etp"])
            if row.get("fused") in ("true", "false"):  # torch.compile or fused kernels, or
                train["fused"] = row["fused"] == "true"  # eager ones, as the row says
            fw = row["framework"]
            sharding = get_framework(fw).data_parallel  # the stack's default, as the CLI
            if sharding == "fsdp":
                train["fsdp"] = "full"
            elif sharding == "zero1":  # Megatron-Core's distributed optimizer
                train["zero"] = 1
            if row.get("zero"):  # a ZeRO stage the row states (DeepSpeed rows)
                train["zero"] = int(row["zero"])
            if row.get("optimizer"):  # the optimizer (state dtypes) the recipe names
                train["optimizer"] = row["optimizer"]
            if row.get("grad_dtype"):  # gradients kept as the recipe says, not the stack default
                train["grad_dtype"] = row["grad_dtype"]
            if row.get("loss"):  # the loss kernel the recipe names (TrainConfig.loss)
                train["loss"] = row["loss"]
            if row.get("fp8_recipe"):  # FP8 scaling the recipe names (TrainConfig.fp8_recipe)
                train["fp8_recipe"] = row["fp8_recipe"]
            if row.get("selective"):  # what its selective recompute reruns (TrainConfig.selective)
                train["selective"] = row["selective"]
            offload = row.get("offload") or ""  # what the run's recipe keeps in CPU memory
            if "optimizer" in offload:
                train["offload_optimizer"] = True
            metric = Metric(row["metric"], float(row["value"]), _CSV_METRIC[row["metric"]],
                            row["metric"] == "tflops_per_gpu" or None,
                            True if row["metric"] == "tflops_per_gpu" else None,
                            note=row["secondary"])
            out.append(TrainingRun(
                run_id=row["run_id"], family=row["family"], model=_csv_model(row["model"], seq),
                device=row["device"], num_gpus=gpus, gpus_per_node=int(row["gpus_per_node"]),
                train=train, metrics=(metric,), source=f"{row['source']} ({row['source_location']})",
                verification=row["verification"], inferred=tuple(
                    x.strip() for x in row["inferred"].split(";") if x.strip()),
                notes=row["notes"], split=split, framework=fw,
                overlap=(row.get("overlap") or "").strip(),
                attention_kernel=(row.get("attention_kernel") or "").strip(),
                activations_offloaded="activations" in offload,
                cluster=_csv_cluster(row)))
    return out


def _csv_cluster(row: dict[str, str]) -> dict[str, Any]:
    """The network a row's source states (column scale_out_gbps: GB/s per GPU per direction,
    as `gpuplan train --scale-out-gbps`; empty = the device's default cluster)."""
    gbps = (row.get("scale_out_gbps") or "").strip()
    return {"scale_out_bytes_per_s": float(gbps) * 1e9} if gbps else {}


XLA_FAMILIES: frozenset[str] = frozenset({
    "dgxc-maxtext-h100-2411", "dgxc-paxml-h100-2411", "dgxc-maxtext-h100-2502",
    "jaxtoolbox-pax-a100-2404", "jaxtoolbox-pax-h100-2404", "jaxtoolbox-maxtext-h100-2405",
    "maxtext-a3-h100-2404"})
"""Families run by JAX/XLA on GPUs (MaxText, PaxML): XLA plans device memory statically with
its own rematerialization, not PyTorch's caching allocator, as on TPUs; the memory verdict
models PyTorch stacks, so the memory harnesses do not score these rows (they are timed, as
FSDP, like every other row). dgxc-maxtext-h100-2502 (hold-out) joins under the same rule, set
before its rows were predicted, as do the JAX-Toolbox Paxml hold-out families (data11) and the
JAX-Toolbox MaxText hold-out family (data13) and Google's MaxText A3 hold-out family (data14)."""


PROMOTED_FAMILIES: frozenset[str] = frozenset({
    "torchtitan-a100", "llama3-405b-h100", "llmfoundry-h100-fp8", "torchtitan-h100-2024",
    "torchtitan-h100-asynctp-2025", "torchtitan-h200-trainy-2025", "nemo-h100-2407",
    "mbridge-h100", "mbridge-b200", "mbridge-gb200", "torchao-b200-2025",
    "nemo-launcher-a100-2022", "dgxc-nemo-h100-2411", "dgxc-maxtext-h100-2411",
    "nemotron4-15b-h100", "megascale-megatron-a100", "dgxc-paxml-h100-2411",
    "dgxc-nemo-gb200-2505",
    # scored once at stop 11, promoted at stop 12
    "dgxc-nemo-h100-2504", "mtnlg-530b-a100", "olmo-core-h100-2024", "deepspeed-azure-a100-2022",
    "dgxc-nemo-h100-2502", "dgxc-maxtext-h100-2502", "dgxc-nemo-sft-h100-2502",
    "mbridge-h100-2602to2604", "mbridge-gb200-2602to2604", "mbridge-h100-2509",
    "mbridge-b200-2509", "mbridge-gb200-2509", "automodel-h100-2026", "torchtitan-h100-405b-2024",
    "nemo-launcher-bert-a100-2023",
    # scored once at stop 12 (...-data8-2026-12-02-stop12*.txt), promoted at stop 12
    "internevo-a100-2023", "tinyllama-a100-40gb", "fms-fsdp-a100-2403", "fms-fsdp-h100-2403",
    "fms-fsdp-a100-2405", "fms-fsdp-h100-2405", "nanotron-bench-h100-2025",
    "bigscience-tr11-topology-a100-2022",
    # the second stop-12 set, scored once (...-data9-2026-12-02-stop12*.txt), promoted at stop 12
    "torchtune-a100-2411", "nemo-longseq-h100-2403", "nemo-longseq-b200-2504",
    "mcore-llama-example-h100-2506", "smollm3-nanotron-h100-2025",
    # the third stop-12 set, scored once (...-data10-2026-12-02-stop12*.txt), promoted at stop 12
    "nemo-b200-2502", "nemo-h100-2502", "nemo-gb200-2504", "megatron-llama-a100-2023",
    # the stop-13 set, scored once (...-data11-2026-12-02-stop13*.txt), promoted at stop 13
    "torchao-float8-h100-2025", "jaxtoolbox-pax-a100-2404", "jaxtoolbox-pax-h100-2404",
    "flagperf-mcore-a800-2404", "flagperf-mcore-h100-2405", "flagperf-deepspeed-a800-2312",
    "flagperf-deepspeed-h800-2312", "flagperf-flagscale-h800-2401",
    # the second stop-13 set, scored once (...-data12-2026-12-02-stop13*.txt), promoted at stop 13
    "flagperf-flagscale-a800-2311", "flagperf-flagscale-sft-a800-2402", "flagperf-mds-a800-2402",
    "flagperf-mds-a100-40gb-2402", "flagperf-deepspeed-h100-2407", "fastllm-h100-2412",
    "fp8lm-megatron-h100-2023",
    # the stop-14 set, scored once (...-data13-2026-12-02-stop14*.txt), promoted at stop 14
    "flagperf-deepspeed-baichuan2-h800-2401", "jaxtoolbox-maxtext-h100-2405",
    "mds-longseq-a100-40gb-2309", "mlperf-v30-coreweave-h100-2306", "mlperf-v30-nemo-h100-2306",
    "mlperf-v31-azure-h100-2311", "mlperf-v31-nemo-h100-2311", "mlperf-v40-nemo-h100-2406",
    "mlperf-v41-nemo-h100-2411", "mlperf-v41-oracle-h100-2411", "mlperf-v50-nemo-h100-2506",
    "nemotron4-340b-h100-2406",
    # the second stop-14 set, scored once (...-data14-2026-12-02-stop14*.txt), promoted at stop 14
    "kempnerforge-h200-2604", "maxtext-a3-h100-2404", "msswift-a800-2503",
    "thunder-litgpt-h100-2407", "xtuner-deepspeed-a100-2404",
    # the third stop-14 set, scored once (...-data15-2026-12-02-stop14*.txt), promoted at stop 14
    "bloomberggpt-smp-a100-40gb-2303", "flm101b-megatron-a800-2309", "pythia-neox-a100-40gb-2304",
    "skywork-megatron-a800-2310", "starcoder-megatron-a100-2305",
    # the stop-15 set data16, scored once (...-data16-2026-12-02-stop15*.txt), promoted at stop 15
    "vocabpar-megatron-a100-2411", "zerobubble-megatron-a100-2401",
    # the stop-15 set data17, scored once (...-data17-2026-12-02-stop15*.txt), promoted at stop 15
    "mosaicgpt-a100-40gb-2302", "mosaicgpt-a100-80gb-2302", "paddlenlp-a100-2311",
    # the stop-15 set data18, scored once (...-data18-2026-12-02-stop15*.txt), promoted at stop 15
    "gh-issues-megatronllama-a100-2309", "gh-issues-megatronllama-a800-2309",
    "gh-pr-atorch-ds3d-a100-2311", "gh-pr-atorch-fsdp-a100-2311",
    # the stop-15 set data19, scored once (...-data19-2026-12-02-stop15*.txt), promoted at stop 15
    "mlperf-v40-smc-h100-2406",
    "mlperf-v50-coreweave-gb200-2506",
    "mlperf-v50-nebius-h200-2506",
    "mlperf-v51-cisco-h100-2511",
    "mlperf-v51-dell-b200-2511",
    "mlperf-v51-hpe-h200-2511",
    "mlperf-v51-oracle-b200-2511",
    "mlperf-v51-uf-b200-2511",
    "mlperf-v51-verda-b200-2511",
    # the stop-16 sets, scored once (...-data2{0,1}-2026-12-02-stop16*.txt), promoted at stop 16
    "nemo-launcher-h100-2406", "gcp-recipes-a3mega-h100-2410", "gcp-recipes-a3ultra-h200-2412",
    "awsome-torchtitan-h100-2503",
    # the stop-17 sets, scored once (...-data22to24-2026-12-02-stop17*.txt), promoted at stop 17
    "glm130b-a100-40gb-2210", "gptneox20b-a100-40gb-2204", "amsp-deepspeed-a800-2311",
    "colossalai-gemini-a800-2309", "xtuner-llama3-a100-2404", "litgpt-thunder-fsdp-a100-40gb-2405",
    "gh-issues-megatronllama-i24-a800-2309",
    # the second stop-17 sets, scored once (...-data25to26-2026-12-02-stop17*.txt), promoted at 17
    "fujii4d-tsubame-h100-2410", "fujii4d-abci-a100-40gb-2410", "yafsdp-fsdp-a100-2406",
    # the third stop-17 sets, scored once (...-data27to28-2026-12-02-stop17*.txt), promoted at 17
    "flagperf-paddle-llama7b-a100-80gb-2310", "flagperf-paddle-llama7b-a100-40gb-2310",
    "flagperf-paddle-llama13b-a100-80gb-2310", "flagperf-paddle-gpt3-6.7b-a100-80gb-2310",
    "flagperf-paddle-gpt3-13b-a100-80gb-2310", "jubench-megatron-a100-40gb-2407",
    "alcf-megds-polaris-a100-40gb-2403",
    # the fourth stop-17 sets, scored once (...-data29to30-2026-12-02-stop17*.txt), promoted at 17
    "dgxc-nemo-h100-2505", "torchao-float8nocompile-h100-2502",
    # the stop-18 set, scored once (...-data31-2026-12-02-stop18*.txt), promoted at stop 18
    "hf-accelerate-blog-a100-2406",
    # the stop-19 set, scored once (...-data32-2026-12-03-stop19*.txt), promoted at stop 19
    "gh-mbridge-verifcards-h100-2607", "gh-minllm-deepspeed-a100-2207",
    # the stop-21 set, scored once (...-data33-2026-12-04-stop21*.txt), promoted at stop 21
    "moezoo-mcore-qwen3-h100-2511", "fmsacc-hf-a100-2502",
    # the stop-22 sets, scored once (...-data34to35-2026-12-04-stop22*.txt), promoted at stop 22
    "hagemann-aa-a100-2311", "llmfoundry-h100-largescale-2401", "mosaicgpt-a100-80gb-2304",
    "gh-issues-megatronllama-i16-a800-2309", "flagperf-mcore-moe-h100-2405",
    "flagperf-paimcore-moe-a800-2404",
    # the stop-23 sets, scored once (...-data38to40-2026-12-04-stop23*.txt), promoted at stop 23
    "alst-deepspeed-h100-2506", "kwai-atc24-megatron-a800-2405", "kwai-atc24-megatron-h800-2405",
    "mds-rebase-a100-2307", "gh-issue-torchtitan-a100-2503", "mlperf-v51-nemo-gb200-2511",
    "mlperf-v50-nemo-gb200-2506",
    # the second stop-23 sets, scored once (...-data41to43-2026-12-04-stop23*.txt), promoted
    "laermoe-megatron-a100-2512", "gh-pr-torchtitan-405b-h100-2407",
    "openllama-deepspeed-a100-2305", "olmo3-olmocore-h100-2511",
    # the stop-24 sets, scored once (...-data44to45-2026-12-04-stop24*.txt), promoted
    "crusoe-torchtitan-gb200-2601", "crusoe-torchtitan-b200-2601", "crusoe-torchtitan-h200-2602",
    "crusoe-torchtitan-h100-2603", "vtrain-mds-a100-2409",
})
"""Hold-out families scored once, then moved to calibration: those scored at stop 9 or 10
(benchmarks/results/training-validation-holdout-2026-12-01-stop9.txt and -stop10*.txt) at stop
11, those scored at stop 11 (...-fresh-2026-12-01-stop11*.txt, ...-fresh2-...) and at stop 12
(...-data8-2026-12-02-stop12*.txt) at stop 12, the stop-13 sets (...-data11-...-stop13*.txt,
...-data12-...) at stop 13, the stop-14 sets (...-data13-...-stop14*.txt, ...-data14-...,
...-data15-...) at stop 14, the stop-15 sets (...-data16-...-stop15*.txt to ...-data19-...)
at stop 15, the stop-16 sets (...-data20-...-stop16*.txt, ...-data21-...) at stop 16, the
stop-17 sets data22 to data24 (...-data22to24-...-stop17*.txt, scored together), data25 to
data26 (...-data25to26-...-stop17*.txt), data27 to data28 (...-data27to28-...) and data29 to
data30 (...-data29to30-...) at stop 17, the stop-18 set data31 (...-data31-...-stop18*.txt) at
stop 18, the stop-19 set data32 (...-data32-...-stop19*.txt) at stop 19, the stop-21 set data33
(...-data33-...-stop21*.txt) at stop 21, the stop-22 sets data34 to data37
(...-data34to35-...-stop22*.txt, ...-data36to37-...) at stop 22, the stop-23 sets data38 to
data40 (...-data38to40-...-stop23*.txt) and data41 to data43 (...-data41to43-...-stop23*.txt) at stop 23,
the stop-24 sets data44 and data45 (...-data44to45-...-stop24*.txt) at stop 24.
Their rows are in data/training_calibration.csv after the earlier
calibration rows. Each hold-out family is scored once and then used for fitting; new families
replace them in data/training_validation.csv."""

NOT_FITTED_FAMILIES: frozenset[str] = frozenset({
    "torchtitan-h100-2024", "torchtitan-h100-asynctp-2025", "torchao-b200-2025",
    "torchao-float8-h100-2025"})
"""Calibration families run on a device configuration the catalog does not model, so they are
scored but the end-to-end factors are not fitted on them (benchmarks/fit_training.py): Meta's
Grand Teton H100 96 GB at 500 W (H100_96GB keeps the 700 W H100 SXM peaks; torchtitan's file
says its real peak lies between SXM and NVL) and torchao's power-limited B200 (limit not
published). With them in the fit the PyTorch-stack factor would be 0.62 instead of 0.66
(README). A rule about the devices, set at stop 11 when these families joined calibration;
torchao's float8 H100 rows (run on the same 96 GB Grand Teton H100s, promoted at stop 13)
join under it."""


def memory_not_scored(run: TrainingRun) -> str:
    """Why the memory harnesses do not score `run` ('' = scored): JAX/XLA families
    (XLA_FAMILIES) and runs that offload activations to the host (not modelled). Both rules were
    fixed before the rows were predicted."""
    if run.family in XLA_FAMILIES:
        return "XLA: memory not scored"
    if run.activations_offloaded:
        return "activation offload: memory not scored"
    return ""


def _all_runs() -> tuple[TrainingRun, ...]:
    runs = (_megatron_t1() + _megatron_t2() + _production() + _llama() + _flash_training()
            + _fa1_table2() + _karpathy() + _llmfoundry()
            + _csv_runs(CALIBRATION_CSV, "calibration") + _csv_runs(VALIDATION_CSV, "validation"))
    runs = [r if r.framework else replace(r, framework=FAMILY_FRAMEWORK[r.family]) for r in runs]
    ids = [r.run_id for r in runs]
    if len(ids) != len(set(ids)):
        raise ValueError("duplicate run_id in RUNS")
    return tuple(runs)


RUNS: tuple[TrainingRun, ...] = _all_runs()
"""Every modelled row of training_runs.csv."""

FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(r.family for r in RUNS))
OWN_CSV_RUN_IDS: frozenset[str] = frozenset(
    r.run_id for path, split in ((CALIBRATION_CSV, "calibration"), (VALIDATION_CSV, "validation"))
    for r in _csv_runs(path, split))
"""Rows from benchmarks/data/ (not in the shared training_runs.csv)."""
CALIBRATION_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(
    r.family for r in RUNS if r.split == "calibration"))
VALIDATION_FAMILIES: tuple[str, ...] = tuple(dict.fromkeys(
    r.family for r in RUNS if r.split == "validation"))


def by_id(run_id: str) -> TrainingRun:
    return next(r for r in RUNS if r.run_id == run_id)
