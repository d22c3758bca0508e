"""Fine-tuning mode of a training job: full, LoRA or QLoRA, with the adapters' rank and
targets (Hu et al. 2021; Dettmers et al. 2023). The estimators are in `estimate/lora.py`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpuplan.errors import InputError

Finetune = Literal["full", "lora", "qlora"]
NF4_BITS = 4.0
QUANT_CONSTANT_BITS = 0.127
"""QLoRA §2, double quantization: 8/64 + 32/(64 x 256) bits per parameter"""
QUANT_CONSTANT_BITS_SINGLE = 0.5
"""QLoRA §2, without double quantization: one fp32 absmax per 64 weights"""

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
GROUPS = {"all-linear": TARGETS, "attention": TARGETS[:4], "mlp": TARGETS[4:]}
PEFT_DEFAULT_TARGETS = ("q_proj", "v_proj")
"""PEFT's default target_modules for Llama-style models"""



@dataclass(frozen=True)
class LoraConfig:
    finetune: Finetune = "full"
    rank: int = 16
    targets: tuple[str, ...] = ("all-linear",)
    adapter_dtype: Literal["auto", "fp32", "16-bit"] = "auto"
    """auto: fp32 for LoRA (PEFT default), 16-bit for QLoRA (the QLoRA reference script)"""
    paged_optimizer: bool | None = None
    """None: on for QLoRA (paper), off for LoRA"""
    dropout: float = 0.0
    """lora_dropout (PEFT default 0; the QLoRA paper used 0.05-0.1)"""
    double_quant: bool = True

    def __post_init__(self) -> None:
        validate(self)

    @property
    def active(self) -> bool:
        return self.finetune != "full"

    @property
    def adapter_bytes(self) -> float:
        kind = self.adapter_dtype
        if kind == "auto":
            kind = "16-bit" if self.finetune == "qlora" else "fp32"
        return 4.0 if kind == "fp32" else 2.0

    @property
    def paged(self) -> bool:
        return self.finetune == "qlora" if self.paged_optimizer is None else self.paged_optimizer

    @property
    def quant_bits(self) -> float:
        return NF4_BITS + (QUANT_CONSTANT_BITS if self.double_quant else QUANT_CONSTANT_BITS_SINGLE)

    def projections(self) -> tuple[str, ...]:
        out: list[str] = []
        for t in self.targets:
            for p in GROUPS.get(t, (t,)):
                if p not in out:
                    out.append(p)
        return tuple(out)


def parse_targets(text: str) -> tuple[str, ...]:
    """'all-linear', 'attention', 'mlp' or a comma list of q_proj,k_proj,v_proj,o_proj,
    gate_proj,up_proj,down_proj."""
    items = tuple(s.strip() for s in text.split(",") if s.strip())
    valid = set(TARGETS) | set(GROUPS)
    bad = [s for s in items if s not in valid]
    if not items or bad:
        raise InputError("lora_targets", text, "all-linear, attention, mlp or a comma list of "
                         + ", ".join(TARGETS))
    return items


def validate(lc: LoraConfig) -> None:
    if lc.finetune not in ("full", "lora", "qlora"):
        raise InputError("finetune", lc.finetune, "full, lora or qlora")
    if not isinstance(lc.rank, int) or lc.rank < 1:
        raise InputError("lora_rank", lc.rank, "a whole number >= 1")
    parse_targets(",".join(lc.targets))
    if not 0 <= lc.dropout < 1:
        raise InputError("lora_dropout", lc.dropout, "a fraction in [0, 1)")
