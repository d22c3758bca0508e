"""LoRA and QLoRA: frozen base weights, trainable low-rank adapters (Hu et al. 2021, §4.1).

A target linear W (k -> n) gets y = x W + s (x A) B with A (k x r) and B (r x n) trainable
and W frozen: r (k + n) trainable parameters per target.

Memory (per GPU):
- frozen base weights at 16 bits (LoRA) or NF4 (QLoRA, Dettmers et al. 2023 §2): 4 bits per
  weight of every layer linear plus quantization constants: blocksize 64 with fp32 absmax
  costs 32/64 = 0.5 bits/param; double quantization stores them as 8-bit with one fp32
  constant per 256 -> 8/64 + 32/(64 x 256) = 0.127 bits/param. Embeddings, the LM head and
  norms stay 16-bit (bitsandbytes quantizes nn.Linear layers; Transformers keeps lm_head);
- adapters with their gradients and optimizer states. PEFT (autocast_adapter_dtype, default)
  keeps adapters in fp32 -> 4 + 4 + 8 (AdamW) bytes; the QLoRA reference script casts them
  to bf16 with fp32 optimizer states -> 2 + 2 + 8. No fp32 master copy either way;
- paged optimizer states (QLoRA §2: NVIDIA unified memory, evicted to the CPU under
  pressure) are reported apart and not counted in the GPU peak;
- activations: a frozen linear keeps no input for backward (autograd saves X only to compute
  dW); a target keeps its input for A's gradient and A's output (t x r) for B's.
Time: frozen weights need no weight-gradient matmul (backward = dX only); adapters add their
own forward, dX and dW matmuls; QLoRA dequantizes each NF4 weight to 16 bits before its
forward and its backward matmul (bitsandbytes), an extra memory-bound pass.
"""

from __future__ import annotations

import re
from dataclasses import replace

from gpuplan.estimate.partition import Stage
from gpuplan.ops.op import Op, OpKind, OpList, Phase
from gpuplan.specs.finetune import GROUPS as GROUPS
from gpuplan.specs.finetune import NF4_BITS as NF4_BITS
from gpuplan.specs.finetune import PEFT_DEFAULT_TARGETS as PEFT_DEFAULT_TARGETS
from gpuplan.specs.finetune import QUANT_CONSTANT_BITS as QUANT_CONSTANT_BITS
from gpuplan.specs.finetune import QUANT_CONSTANT_BITS_SINGLE as QUANT_CONSTANT_BITS_SINGLE
from gpuplan.specs.finetune import TARGETS as TARGETS
from gpuplan.specs.finetune import Finetune as Finetune
from gpuplan.specs.finetune import LoraConfig as LoraConfig
from gpuplan.specs.finetune import parse_targets as parse_targets
from gpuplan.specs.finetune import validate as validate
from gpuplan.specs.model import ModelSpec

# builder linear name -> (the HF projections it fuses, each one's share of the output width)
_FUSED = {
    "attn.qkv": ("q_proj", "k_proj", "v_proj"),
    "attn.out": ("o_proj",),
    "mlp.gate_up": ("gate_proj", "up_proj"),
    "mlp.up": ("up_proj",),
    "mlp.down": ("down_proj",),
}


def projection_shapes(m: ModelSpec) -> dict[str, tuple[int, int, int]]:
    """(in, out, copies per layer kind) of each HF projection; copies of the MLP ones count
    experts (routed + shared) in MoE layers. MLA attention is taken as plain q/k/v/o."""
    d, h, hkv = m.hidden_size, m.num_heads, (m.num_heads if m.is_mla else m.kv_heads)
    dqk, dv = m.head_size, m.v_head_size
    ff = m.intermediate_size
    shapes = {"q_proj": (d, h * dqk, 1), "k_proj": (d, hkv * dqk, 1),
              "v_proj": (d, hkv * dv, 1), "o_proj": (h * dv, d, 1),
              "up_proj": (d, ff, 1), "down_proj": (ff, d, 1)}
    if m.mlp == "gated":
        shapes["gate_proj"] = (d, ff, 1)
    return shapes


def adapter_params_per_layer(m: ModelSpec, lc: LoraConfig) -> tuple[int, int, int]:
    """Trainable parameters of one layer's (attention, dense MLP, MoE MLP) adapters."""
    shapes = projection_shapes(m)
    attn = mlp = moe = 0
    experts = (m.num_experts + m.num_shared_experts) if m.is_moe else 0
    for p in lc.projections():
        if p not in shapes:
            continue
        k, n, _ = shapes[p]
        if p in GROUPS["attention"]:
            attn += lc.rank * (k + n)
        else:
            mlp += lc.rank * (k + n)
            if experts:  # every routed and shared expert has its own projection
                ek, en = (m.expert_size, n) if p == "down_proj" else (k, m.expert_size)
                moe += experts * lc.rank * (ek + en)
    return attn, mlp, moe


def adapter_tensors_per_layer(m: ModelSpec, lc: LoraConfig) -> tuple[int, int, int]:
    """Parameter tensors (A and B per target) of one layer's adapters."""
    shapes = projection_shapes(m)
    targets = [p for p in lc.projections() if p in shapes]
    attn = sum(2 for p in targets if p in GROUPS["attention"])
    mlp = sum(2 for p in targets if p not in GROUPS["attention"])
    experts = (m.num_experts + m.num_shared_experts) if m.is_moe else 0
    return attn, mlp, mlp * experts


def adapter_params(m: ModelSpec, lc: LoraConfig, layers: int, dense_layers: int,
                   moe_layers: int, tp: int = 1) -> tuple[float, float]:
    """(trainable parameters, parameter tensors) of the adapters of some layers, on one GPU
    (split tp ways like the matrices they adapt)."""
    a, d, e = adapter_params_per_layer(m, lc)
    ta, td, te = adapter_tensors_per_layer(m, lc)
    params = (layers * a + dense_layers * d + moe_layers * e) / tp
    tensors = layers * ta + dense_layers * td + moe_layers * te
    return params, tensors


def state_bytes(m: ModelSpec, lc: LoraConfig, st: Stage, tp: int, compute_bytes: float,
                moments_bytes: float, step_counter_bytes: float, zero_stage: int,
                shard: int) -> tuple[float, float, float, dict[str, float]]:
    """(weights, gradients, optimizer on the GPU, details) of one GPU of a pipeline stage:
    frozen base weights (NF4 for the layer linears under QLoRA), adapters, their gradients
    and optimizer states; ZeRO shards them as in full training (Rajbhandari et al. §5)."""
    vocab_rows = m.vocab_size * m.hidden_size / tp
    linear = st.matrix_params
    if st.has_embedding:
        linear -= vocab_rows
    if st.has_head and (not m.tie_embeddings or not st.has_embedding):
        linear -= vocab_rows
    linear = max(linear, 0.0)
    if lc.finetune == "qlora":
        frozen = linear * lc.quant_bits / 8 + (st.params - linear) * compute_bytes
    else:
        frozen = st.params * compute_bytes
    params, tensors = adapter_params(m, lc, st.layers, st.dense_layers, st.moe_layers, tp)
    weights = frozen + params * lc.adapter_bytes
    grads = params * lc.adapter_bytes
    opt = params * moments_bytes + tensors * step_counter_bytes
    z = zero_stage
    weights, grads, opt = (weights / (shard if z >= 3 else 1), grads / (shard if z >= 2 else 1),
                           opt / (shard if z >= 1 else 1))
    details = {"trainable_params": params, "adapter_tensors": tensors,
               "frozen_weight_bytes": frozen / (shard if z >= 3 else 1),
               "quantized_params": linear if lc.finetune == "qlora" else 0.0,
               "paged_optimizer_bytes": opt if lc.paged else 0.0}
    return weights, grads, 0.0 if lc.paged else opt, details


# ---- the op-list pass -----------------------------------------------------------------------

_SHAPE = re.compile(r"^(\d+)x(\d+) @ (\d+)x(\d+)$")


def _base_name(name: str) -> str | None:
    for base in _FUSED:
        if name.endswith(base) or name.endswith(base + ".dgrad") or name.endswith(
                base + ".wgrad"):
            return base
    return None


def _split(m: ModelSpec, base: str, lc: LoraConfig, k: int, n: int) -> list[tuple[int, int]]:
    """(in, out) of each targeted projection inside one builder linear of width k -> n."""
    shapes = projection_shapes(m)
    parts = _FUSED[base]
    width = sum(shapes[p][1] for p in parts if p in shapes) or n
    return [(k, round(n * shapes[p][1] / width)) for p in parts
            if p in shapes and p in lc.projections()]


def _like(o: Op, name: str, kind: OpKind, flops: float, read: float, written: float,
          phase: Phase, saved: float = 0.0, shape: str = "") -> Op:
    """A new op repeated like `o` (same count, layer, component and dtype)."""
    return Op(name, kind, flops, read, written, dtype=o.dtype, phase=phase,
              component=o.component, count=o.count, saved_bytes=saved, layer=o.layer,
              shape=shape, fusable=kind == "elementwise" and phase == "forward")


def _lora_ops(o: Op, pieces: list[tuple[int, int]], rows: int, r: int, e: float, wb: float,
              backward: bool) -> list[Op]:
    """One op per kind for all the adapters on one builder linear (summed over pieces):
    forward x A (2 t k r), (x A) B (2 t r n), scale-and-add; backward dX and dW of both."""
    k_sum = sum(k for k, _ in pieces)
    n_sum = sum(n for _, n in pieces)
    mid = rows * r * len(pieces) * e  # the t x r outputs of A, saved for B's gradient
    w = sum(r * (k + n) for k, n in pieces) * wb
    if not backward:
        k0 = pieces[0][0]
        return [
            _like(o, f"{o.name}.lora_A", "matmul", 2 * rows * k_sum * r,
                  rows * k_sum * e + w / 2, mid, "forward", shape=f"{rows}x{k0} @ {k0}x{r}"),
            _like(o, f"{o.name}.lora_B", "matmul", 2 * rows * r * n_sum, mid + w / 2,
                  rows * n_sum * e, "forward", saved=mid, shape=f"{rows}x{r} @ {r}x{n_sum}"),
            _like(o, f"{o.name}.lora_add", "elementwise", rows * n_sum, 2 * rows * n_sum * e,
                  rows * n_sum * e, "forward", shape=f"{rows * n_sum}"),
        ]
    base = o.name.rsplit(".", 1)[0]
    flops = 2 * rows * r * (n_sum + k_sum)
    return [
        _like(o, f"{base}.lora.dgrad", "matmul", flops, rows * n_sum * e + mid + w,
              mid + rows * k_sum * e, "backward"),
        _like(o, f"{base}.lora.wgrad", "matmul", flops, rows * (n_sum + k_sum) * e + mid, w,
              "backward"),
    ]


def _dims(o: Op) -> tuple[int, int, int] | None:
    """(rows, in, out) of a forward linear, (rows, out, in) of its dgrad, from the shape."""
    hit = _SHAPE.match(o.shape)
    return (int(hit[1]), int(hit[2]), int(hit[4])) if hit else None


def apply(ops: OpList, m: ModelSpec, lc: LoraConfig, e: float) -> OpList:
    """The training op list of a LoRA/QLoRA fine-tune, from the full fine-tune's."""
    out: list[Op] = []
    for o in ops:
        base = _base_name(o.name) if o.kind == "matmul" else None
        dims = _dims(o) if o.kind == "matmul" else None
        if o.kind == "matmul" and o.name.endswith(".wgrad"):
            continue  # frozen weights: no weight gradient
        if o.kind == "embedding":
            if o.phase == "forward":  # frozen embedding: keeps no indices, no backward
                out.append(replace(o, saved_bytes=0.0))
            continue
        if o.kind == "norm" and o.phase == "forward":
            out.append(_frozen_norm(o, e))
            continue
        forward = o.kind == "matmul" and o.phase == "forward"
        if forward and (base or o.component == "head"):
            pieces = _split(m, base, lc, dims[1], dims[2]) if base and dims else []
            if lc.finetune == "qlora" and base and dims:
                out.append(_dequant(o, dims[1] * dims[2], lc))
            if not pieces or dims is None:  # frozen, not adapted: autograd keeps no input
                out.append(replace(o, saved_bytes=0.0))
                continue
            extra = dims[0] * dims[1] * (e + 1) if lc.dropout > 0 else 0.0
            out.append(replace(o, saved_bytes=o.saved_bytes + extra))
            out.extend(_lora_ops(o, pieces, dims[0], lc.rank, e, lc.adapter_bytes, False))
            continue
        if o.kind == "matmul" and o.name.endswith(".dgrad") and base and dims:
            if lc.finetune == "qlora":
                out.append(_dequant(o, dims[1] * dims[2], lc))
            out.append(o)
            pieces = _split(m, base, lc, dims[2], dims[1])
            if pieces:
                out.extend(_lora_ops(o, pieces, dims[0], lc.rank, e, lc.adapter_bytes, True))
            continue
        out.append(o)
    return OpList(tuple(_first_layer_no_grad(out)))


def _frozen_norm(o: Op, e: float) -> Op:
    """Eager RMSNorm keeps the normalized value only for its weight's gradient (HF
    LlamaRMSNorm: weight * x_hat); a frozen weight drops it (see blocks.rmsnorm)."""
    hit = re.match(r"^(\d+)x(\d+)$", o.shape)
    if not hit:
        return o
    rows, n = int(hit[1]), int(hit[1]) * int(hit[2])
    eager = n * 4 + rows * 4 + n * e  # fp32 input, fp32 rstd, normalized value
    return replace(o, saved_bytes=o.saved_bytes - n * e) if o.saved_bytes == eager else o


def _first_layer_no_grad(ops: list[Op]) -> list[Op]:
    """Nothing before the first trainable tensor needs a gradient: in the first layer, the ops
    ahead of its first adapter keep nothing for backward (autograd saves tensors only for
    outputs that require grad). Ops count every layer, so their per-execution saved bytes are
    scaled by (layers - 1) / layers (exact without pipelining; spread over stages with it)."""
    fwd = [o for o in ops if o.phase == "forward" and o.per_layer]
    attn = next((o.layer for o in fwd if "attention" in str(o.layer)), None)
    mlp = next((o.layer for o in fwd if str(o.layer).startswith(("layer.mlp", "layer.moe"))),
               None)
    blocks = [b for b in (attn, mlp) if b is not None]
    out: list[Op] = []
    done = False
    for i, o in enumerate(ops):
        if not done and o.phase == "forward" and o.per_layer and o.layer in blocks:
            # the adapted linear's input is kept by its lora_A: the grad-free prefix ends here
            nxt = ops[i + 1].name if i + 1 < len(ops) else ""
            if o.name.endswith(".lora_A") or nxt.endswith(".lora_A"):
                done = True
            elif o.count:
                o = replace(o, saved_bytes=o.saved_bytes * (o.count - 1) / o.count)
        out.append(o)
    return out


def _dequant(o: Op, weights: int, lc: LoraConfig) -> Op:
    """bitsandbytes dequantizes the NF4 weight to 16 bits before each matmul that uses it."""
    return _like(o, f"{o.name}.dequant_nf4", "elementwise", 2.0 * weights,
                 weights * lc.quant_bits / 8, 2.0 * weights, o.phase, shape=f"{weights}")
