"""The training peak as the allocator sees it, at its real moment.

Two moments compete on a GPU (the larger sets the peak; both on top of the model states):
- the start of backward on the stage that holds the loss: every saved activation, the loss's
  saved tensors and the buffers its backward makes (PyTorch's fp32 cross-entropy: the fp32
  log-softmax output kept, then in backward a dense fp32 gradient of it and the fp32 gradient
  of its input, 8 bytes per logit on top; a fused in-place loss: nothing on top);
- the backward of one layer: every saved activation, the gradients flowing through that
  layer (about two of its widest tensors), and with full recomputation that layer's
  recomputed activations.
FSDP/ZeRO-3 adds the gathered parameters of the units in flight and one unit's unsharded
gradients before its reduce-scatter; under pipeline parallelism a stack that does not reshard
between micro-batches (torchtitan) holds the stage's parameters and gradients unsharded. The
caching allocator's reserved overhead applies to the dynamic part (activations and buffers).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.estimate.sac import kept_attention
from gpuplan.ops.blocks import FP32, INDEX
from gpuplan.ops.op import OpList
from gpuplan.specs.memory_behaviour import MemoryBehaviour

FP32_LOSS_BACKWARD_BYTES = 2 * FP32
"""per logit, on top of the kept fp32 log-softmax output: the dense fp32 gradient that NLL's
backward writes and log_softmax's fp32 input gradient (PyTorch autograd: both live while the
log_softmax backward runs)"""


DTENSOR_LOSS_PARALLEL_BACKWARD_BYTES = 3 * FP32
"""per logit, on top of the kept fp32 log-softmax output, when the fp32 loss runs under
PyTorch's loss_parallel (DTensor, vocabulary sharded over TP; torchtitan's default with TP):
torch/distributed/tensor/parallel/loss.py _nll_loss_and_log_softmax_backward returns
(zeros_like(x) + exp(x)) * grad_output, so three fp32 copies of the logits are live at once"""


@dataclass(frozen=True)
class LossBuffers:
    saved: float
    """bytes kept from the loss's forward to its backward (one micro-batch)"""
    transient: float
    """bytes the loss backward allocates on top, freed before the next layer's backward"""
    basis: str


def loss_buffers(tokens: float, vocab_local: int, e: float, b: MemoryBehaviour,
                 tp: int = 1) -> LossBuffers:
    """Loss memory of `tokens` tokens over a (TP-local) vocabulary, by loss kind: bytes per
    logit kept from forward to backward, and allocated on top during the loss backward."""
    n = tokens * vocab_local
    small = tokens * FP32 + tokens * INDEX  # per-token log-sum-exp (or loss) and the labels
    kept = n * e if b.keeps_logits else 0.0
    if b.loss == "fused-inplace":
        # flash-attn CrossEntropyLoss(inplace_backward=True): 16-bit logits and log-sum-exp
        # kept; the gradient overwrites the logits
        return LossBuffers(n * e + small, 0.0,
                           "fused cross-entropy, in-place backward: 16-bit logits kept")
    if b.loss == "fused":
        # flash-attn CrossEntropyLoss (inplace_backward=False, its default) or a
        # torch.compile'd cross-entropy (upcast, log-softmax and NLL fused by Inductor): the
        # 16-bit logits and log-sum-exp kept; backward writes one 16-bit gradient
        return LossBuffers(n * e + small, n * e,
                           "fused cross-entropy: 16-bit logits kept, a 16-bit gradient in "
                           "backward")
    if b.loss == "vocab-parallel":
        # Megatron _VocabParallelCrossEntropy on the fp32 upcast (fp16_lm_cross_entropy off,
        # the default): max-subtraction, exp and softmax in place of the fp32 copy, which is
        # kept; backward turns it into the gradient in place, then casts it to 16 bits
        return LossBuffers(n * FP32 + small, n * e,
                           "Megatron vocab-parallel cross-entropy: fp32 softmax kept, "
                           "gradient in place, cast to 16 bits")
    if b.loss == "chunked":
        chunk = min(tokens, b.loss_chunk_tokens) * vocab_local
        return LossBuffers(kept + small, chunk * (e + 3 * FP32),
                           f"chunked cross-entropy: {b.loss_chunk_tokens} tokens of logits "
                           "at a time (fp32 upcast, log-softmax and its gradient)")
    if b.loss_parallel and tp > 1:
        return LossBuffers(n * FP32 + kept + tokens * INDEX,
                           n * DTENSOR_LOSS_PARALLEL_BACKWARD_BYTES,
                           "fp32 cross-entropy under DTensor loss_parallel: fp32 log-softmax "
                           "kept; its backward holds three more fp32 copies")
    return LossBuffers(n * FP32 + kept + tokens * INDEX, n * FP32_LOSS_BACKWARD_BYTES,
                       "fp32 cross-entropy: fp32 log-softmax kept; its backward holds two "
                       "more fp32 copies" + ("; 16-bit logits kept by the loop"
                                             if b.keeps_logits else ""))


def ops_loss_saved(ops: OpList) -> float:
    """Saved bytes of the op model's loss (one micro-batch)."""
    return float(sum(o.total_saved_bytes for o in ops.phase("forward")
                     if o.component == "loss"))


def fsdp_buffers(layer_params: float, stage_params: float, weight_bytes: float,
                 grad_bytes: float, pp: int, b: MemoryBehaviour) -> dict[str, float]:
    """FSDP/ZeRO-3 buffers (Zhao et al. 2023 'PyTorch FSDP' §3.2-3.3: a unit's flat
    parameter is all-gathered before use and its gradient reduce-scattered after)."""
    if pp > 1 and not b.fsdp_reshard_with_pp:
        return {"unsharded_stage_parameters": stage_params * (weight_bytes + grad_bytes)}
    return {"gathered_parameters": layer_params * (b.fsdp_units_gathered * weight_bytes
                                                   + grad_bytes)}


def transient_moment(layer_backward: float, loss: LossBuffers | None) -> tuple[float, str]:
    """The larger of the two backward moments above the saved activations."""
    loss_t = loss.transient if loss is not None else 0.0
    if loss_t >= layer_backward:
        return loss_t, "start of backward (loss backward)"
    return layer_backward, "backward of one layer"


def per_op_sac_saved(ops: OpList, block: str, first_block: bool, layer_input: float,
                     mm_shares: dict[tuple[str, str], float]) -> float:
    """Saved bytes of one layer block of kind `block` under per-op selective checkpointing
    (estimate.sac: the mm outputs it does not recompute, the attention kernels' outputs and
    the layer input; `mm_shares` = sac.recomputed_mm_shares)."""
    total = layer_input if first_block else 0.0
    for o in ops.phase("forward"):
        if o.layer != block or not o.per_layer:
            continue
        if o.kind == "matmul":
            total += (1 - mm_shares.get((block, o.name), 0.0)) * o.bytes_written
        elif kept_attention(o) and o.saved_bytes:
            total += o.bytes_written
    return total


def gathered_tp_inputs(saved: dict[str, float], blocks: tuple[str, ...], tokens: float,
                       hidden: int, e: float, tp: int, b: MemoryBehaviour) -> dict[str, float]:
    """Saved bytes per block when sequence-parallel TP saves the all-gathered input of its
    column-parallel linears (QKV, MLP up/gate) instead of the sequence shard: DTensor's
    ColwiseParallel redistributes Shard(1) -> Replicate() and autograd keeps that gathered
    tensor (torchtitan's TP plan), where Megatron keeps the shard and all-gathers again in
    backward (Korthikanti et al. 2022 §4.2.2). One input per listed block, (1 - 1/tp) of the
    tokens more."""
    if not (b.tp_saves_gathered_inputs and tp > 1):
        return saved
    extra = (1 - 1 / tp) * tokens * hidden * e
    return {k: v + extra if k in blocks else v for k, v in saved.items()}
