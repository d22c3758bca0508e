"""Model FLOPs of a forward pass and a training step, by component, from the analytic op list.

Convention: 2 FLOPs per multiply-add; matmul-class work only (the MFU / 6·N·D convention;
element-wise work is in the roofline). Attention score and value matmuls count the full s x s
matrix unless `causal` (then the unmasked half, (s+1)/2 keys per query). Backward = 2 x forward
(no recomputation; Kaplan et al. 2020 §2.1, Narayanan et al. 2021 App. A).
"""

from __future__ import annotations

from typing import Any

from gpuplan.ops.op import MATMUL_KINDS, Op
from gpuplan.ops.transformer import Impl, build_forward
from gpuplan.specs.model import ModelSpec

COMPONENTS = ("embedding", "attention_projections", "attention_scores", "mlp", "lm_head")


def _component(op: Op) -> str:
    n = op.name
    if op.kind == "attention":
        return "attention_scores"
    if ".attn." in f".{n}":
        return "attention_projections"
    if "lm_head" in n or "mlm." in n:
        return "lm_head"
    if op.component == "embedding":
        return "embedding"
    return "mlp"


def flops_summary(m: ModelSpec, batch: int, seq_len: int, causal: bool = False) -> dict[str, Any]:
    ops = build_forward(m, batch, seq_len, Impl(attention="naive"), all_logits=True)
    breakdown = dict.fromkeys(COMPONENTS, 0.0)
    for o in ops:
        if o.kind in MATMUL_KINDS:
            breakdown[_component(o)] += o.total_useful_flops if causal else o.total_flops
    fwd = sum(breakdown.values())
    tokens = batch * seq_len
    convention = ("FLOPs = 2 per multiply-add; matmul work only; backward = 2 x forward (no "
                  "recompute); attention scores " + ("causal: unmasked half counted" if causal
                                                     else "counted in full (s x s)")
                  + "; embedding lookups are gathers (0 FLOPs)")
    return {
        "model": m.name, "batch": batch, "seq_len": seq_len, "tokens": tokens,
        "params": m.params(), "active_params": m.active_params(),
        "forward_flops": fwd, "backward_flops": 2 * fwd, "train_flops": 3 * fwd,
        "flops_per_token": 3 * fwd / tokens, "six_n_d_flops": 6 * m.active_params() * tokens,
        "breakdown": breakdown, "causal": causal, "convention": convention,
    }
