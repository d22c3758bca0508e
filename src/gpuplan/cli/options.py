"""Option choices shared by the commands (one definition each; typer validates them and names
the option and the valid values in its one-line error)."""

from __future__ import annotations

from enum import Enum


class PhaseChoice(str, Enum):
    train = "train"
    prefill = "prefill"
    decode = "decode"


class AttentionChoice(str, Enum):
    flash = "flash"
    naive = "naive"


class DtypeChoice(str, Enum):
    bf16 = "bf16"
    fp16 = "fp16"
    fp32 = "fp32"
    fp8 = "fp8"


class Mode(str, Enum):
    train = "train"
    infer = "infer"


class PrecisionChoice(str, Enum):
    fp32 = "fp32"
    fp16_mixed = "fp16-mixed"
    bf16_mixed = "bf16-mixed"
    fp8_mixed = "fp8-mixed"
    bf16 = "bf16"


class Fp8RecipeChoice(str, Enum):
    tensorwise = "tensorwise"
    rowwise = "rowwise"


class OptimizerChoice(str, Enum):
    adamw = "adamw"
    adam = "adam"
    sgd = "sgd"
    adam8bit = "adam8bit"
    adafactor = "adafactor"
    adamw_bf16_moments = "adamw-bf16-moments"
    adamw_bf16_states = "adamw-bf16-states"


class LossChoice(str, Enum):
    auto = "auto"
    fp32 = "fp32"
    fused = "fused"
    fused_inplace = "fused-inplace"
    vocab_parallel = "vocab-parallel"
    chunked = "chunked"


class SelectiveChoice(str, Enum):
    auto = "auto"
    attention = "attention"
    per_op = "per-op"
    matmuls = "matmuls"


class RecomputeChoice(str, Enum):
    none = "none"
    selective = "selective"
    full = "full"


class FsdpChoice(str, Enum):
    none = "none"
    full = "full"
    hybrid = "hybrid"


class StoreDtype(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"
    fp16 = "fp16"
    fp8 = "fp8"
    int8 = "int8"
    int4 = "int4"
    fp4 = "fp4"


class FinetuneChoice(str, Enum):
    full = "full"
    lora = "lora"
    qlora = "qlora"
