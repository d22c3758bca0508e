"""torchtitan's per-op selective activation checkpointing, as memory and time both see it.

The policy (pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py, 'op' mode;
torch.utils.checkpoint.create_selective_checkpoint_contexts): inside each transformer block,
the outputs of the attention kernels and of aten.mm are saved, except every second mm call
(counted from the block's start), and everything else is recomputed: in backward the block's
forward runs again with the saved outputs taken from the cache, so each recomputed mm and
every element-wise op, norm and cast is executed a second time.

A modelled matmul can stand for several mm calls: a fused QKV projection is torchtitan's
wq, wk, wv (in that order) and a gated MLP's gate_up is w1 then w3; each call's share of the
op is its share of the output width, which is also its share of the FLOPs and of the output
bytes. E.g. a Llama block calls wq, wk, wv, wo, w1, w3, w2: wk, wo and w3 are recomputed.
Not modelled: MoE experts are counted as mm calls, although torchtitan runs them as grouped
GEMMs, which its save list does not name (so they rerun whole).

The 'matmuls' kind keeps every matmul output and reruns only the rest (JAX's
checkpoint_dots / save_dot_with_no_batch_dim policies; LLaMA, Touvron et al. 2023 §2.4:
"we save the activations that are expensive to compute, such as the outputs of linear
layers").
"""

from __future__ import annotations

from gpuplan.ops.op import Op, OpList
from gpuplan.ops.transformer import BLOCK_ATTN, BLOCK_ATTN_WINDOW, BLOCK_MLP, BLOCK_MOE
from gpuplan.specs.model import ModelSpec

ATTENTION_BLOCKS = (BLOCK_ATTN, BLOCK_ATTN_WINDOW)
MLP_BLOCKS = (BLOCK_MLP, BLOCK_MOE)


def mm_calls(m: ModelSpec, op: Op) -> tuple[float, ...]:
    """Output widths of the mm calls one modelled matmul stands for, in call order."""
    if op.name.endswith("attn.qkv"):
        h, hkv = m.num_heads, m.kv_heads
        return (h * m.head_size, hkv * m.head_size, hkv * m.v_head_size)
    if op.name.endswith(".gate_up"):
        return (1.0, 1.0)
    return (1.0,)


def _block_matmuls(ops: OpList, block: str) -> list[Op]:
    return [o for o in ops.phase("forward")
            if o.per_layer and o.layer == block and o.kind == "matmul"]


OP_LEVEL_KINDS = ("per-op", "matmuls")
"""MemoryBehaviour.selective kinds that checkpoint op by op (this module); 'attention' is
Megatron's attention-core recompute (ops.blocks)"""


def recomputed_mm_shares(m: ModelSpec, ops: OpList, kind: str = "per-op"
                         ) -> dict[tuple[str, str], float]:
    """(block, op name) -> the share of that forward matmul's mm calls (by output width) that
    op-level checkpointing of `kind` recomputes: per-op counts over one transformer block
    (its attention part, then its MLP or MoE part) and reruns every second call; matmuls
    reruns none."""
    shares: dict[tuple[str, str], float] = {}
    if kind == "matmuls":
        return shares
    attn_calls = 0
    for block in (*ATTENTION_BLOCKS, *MLP_BLOCKS):
        n = attn_calls if block in MLP_BLOCKS else 0
        for o in _block_matmuls(ops, block):
            widths = mm_calls(m, o)
            again = sum(w for i, w in enumerate(widths) if (n + i + 1) % 2 == 0)
            shares[(block, o.name)] = again / sum(widths)
            n += len(widths)
        if block in ATTENTION_BLOCKS and n:
            attn_calls = n
    return shares


def kept_attention(op: Op) -> bool:
    """A fused attention kernel (SDPA / FlashAttention: the policy's save list) whose output
    is kept; an eager attention's batched matmuls and softmax are not on it and rerun."""
    return op.kind == "attention" and op.name.endswith("attn.core")


def rerun_share(shares: dict[tuple[str, str], float], op: Op) -> float:
    """How much of forward op `op` (one layer's) runs again in backward: a matmul its
    recomputed share, a fused attention kernel nothing (kept), anything else all of it."""
    if op.kind == "matmul":
        return shares.get((str(op.layer), op.name), 0.0)
    return 0.0 if kept_attention(op) else 1.0
