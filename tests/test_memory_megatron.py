"""Memory mechanisms of the Megatron-family stacks (Megatron-Core with Transformer Engine,
NeMo 2 / Megatron-Bridge recipes): each test asserts the bytes of one mechanism, derivation in
a comment."""

from __future__ import annotations

from gpuplan.ops.impl import Impl
from gpuplan.ops.transformer import build_training
from gpuplan.specs import get_model


def _saved(ops, prefix: str) -> float:
    return sum(o.saved_bytes for o in ops.phase("forward") if o.name.startswith(prefix))


def test_fused_gated_unit_keeps_gate_and_up_only():
    """Llama-3-8B, 1 x 1024 tokens, bf16: ffn 14336. Eager SiLU-gate keeps gate, silu(gate)
    and up: 3 x 1024 x 14336 x 2 B; the fused kernel (Megatron-Core SwiGLUFunction) keeps its
    input, gate and up: 2 x 1024 x 14336 x 2 B."""
    m = get_model("llama-3-8b")
    eager = build_training(m, 1, 1024, Impl(fused=False, dropout=False))
    fused = build_training(m, 1, 1024, Impl(fused=True, dropout=False))
    unit = 1024 * 14336 * 2
    assert _saved(eager, "layers.mlp.act") + _saved(eager, "layers.mlp.gate_mul") == 3 * unit
    assert _saved(fused, "layers.mlp.act") + _saved(fused, "layers.mlp.gate_mul") == 2 * unit
