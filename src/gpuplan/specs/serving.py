"""A serving job: how the model is stored and split (weight and KV dtypes, tensor
parallelism, attention kernel, fused engine or eager PyTorch)."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import InputError
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.workload import check_split
from gpuplan.units import DTYPE_BYTES

ATTENTION_KINDS = ("flash", "paged")


@dataclass(frozen=True)
class ServeConfig:
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    tp: int = 1
    attention: str = "flash"
    """flash: contiguous KV cache (FlashAttention/FlashDecoding); paged: PagedAttention blocks"""
    act_dtype: str = "bf16"
    fused: bool = True
    """a serving engine's fused kernels (KERNELS_PER_LAYER launches per layer); False: eager
    PyTorch / Hugging Face, whose launches per layer come from the op builder (ops/decode.py)"""
    logits_all_positions: bool = False
    """prefill computes the LM head for every prompt position, not only the last (Hugging Face
    transformers' CausalLM forward with its default logits_to_keep=0); engines keep the last"""
    weight_only: bool = False
    """quantized weights dequantized to act_dtype in the matmul even where the device has a
    tensor peak for their dtype (GPTQ/AWQ/gpt-fast weight-only kernels)"""

    def validate(self, m: ModelSpec) -> None:
        for f, v in (("weight_dtype", self.weight_dtype), ("kv_dtype", self.kv_dtype)):
            if v not in DTYPE_BYTES:
                raise InputError(f, v, f"one of {', '.join(DTYPE_BYTES)}")
        if self.attention not in ATTENTION_KINDS:
            raise InputError("attention", self.attention, " or ".join(ATTENTION_KINDS))
        check_split(m, self.tp, 1, 1, 1)
        if m.arch != "decoder":
            raise InputError("model", m.name, "a decoder (an encoder-only model does not "
                             "generate tokens)")
