"""How a model's parameters and layers are split over GPUs: tensor parallel (matrices split
tp ways, norms replicated; Shoeybi et al. 2019), vocabulary-parallel embedding and LM head,
pipeline stages (consecutive layers; the first stage holds the embedding, the last the head;
with tied embeddings and pp > 1 the last stage keeps its own copy for the LM head, as in
Megatron-LM), and expert parallel (routed experts split ep ways, each expert's matrices etp
ways: Megatron-Core's expert tensor parallelism, tp by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuplan.specs.model import ModelSpec


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: which layers it holds and its parameters on one GPU."""

    index: int
    first_layer: int
    layers: int
    dense_layers: int
    moe_layers: int
    sliding_layers: int
    has_embedding: bool
    has_head: bool
    params: float
    """parameters on one GPU of this stage (after TP and EP splits)"""
    matrix_params: float
    """of which sit in matmul weight matrices (quantizable, fp8-castable)"""
    layer_matrix_params: float = 0.0
    """of which sit in the transformer layers' matrices (not the embedding or LM head)"""
    expert_params: float = 0.0
    """of which are routed experts' (sharded over the expert data-parallel group)"""


def layers_of_stage(num_layers: int, pp: int, stage: int) -> tuple[int, int]:
    """(first layer, count): layers split as evenly as possible, extra ones on early stages."""
    base, extra = divmod(num_layers, pp)
    first = stage * base + min(stage, extra)
    return first, base + (1 if stage < extra else 0)


def stages(m: ModelSpec, tp: int = 1, pp: int = 1, ep: int = 1,
           etp: int | None = None) -> list[Stage]:
    """Per-GPU parameter counts of every pipeline stage (etp: the experts' tensor-parallel
    degree, tp when None)."""
    d = m.hidden_size
    attn = m.attention_params() / tp
    norms = m.norms_per_layer * m.norm_params()
    dense = m.mlp_params() / tp
    if m.is_moe:
        router = d * m.num_experts + (m.num_experts if m.router_bias_params else 0)
        routed = m.num_experts / ep * m.mlp_params(m.expert_size) / (tp if etp is None else etp)
        shared = (m.mlp_params(m.expert_size * m.num_shared_experts) / tp
                  if m.num_shared_experts else 0.0)
        moe = router + routed + shared
    else:
        moe = routed = 0.0
    vocab_rows = m.vocab_size * d
    emb_other = m.embedding_params() - vocab_rows  # positions, token types, embedding norm
    head_other = m.head_params() - (0 if m.tie_embeddings else vocab_rows)
    out = []
    for i in range(pp):
        first, n = layers_of_stage(m.num_layers, pp, i)
        idx = range(first, first + n)
        n_moe = sum(1 for j in idx if m.is_moe and j >= m.first_dense_layers)
        n_sliding = sum(1 for j in idx if m.is_sliding_layer(j))
        params = n * (attn + norms) + (n - n_moe) * dense + n_moe * moe
        matrix = n * attn + (n - n_moe) * dense + n_moe * (moe - (d * m.num_experts if m.is_moe
                                                                 else 0))
        layer_matrix = matrix
        emb, head = i == 0, i == pp - 1
        if emb:
            params += vocab_rows / tp + emb_other
            matrix += vocab_rows / tp
        if head:
            params += head_other
            if not m.tie_embeddings or pp > 1:
                params += vocab_rows / tp
                matrix += vocab_rows / tp
        out.append(Stage(i, first, n, n - n_moe, n_moe, n_sliding, emb, head, params, matrix,
                         layer_matrix, n_moe * routed))
    return out


def sharded_share(total: Any, params: Any, expert_params: Any, shard: Any,
                  expert_shard_ratio: Any, on: Any) -> Any:
    """`total` (bytes or parameters of `params` parameters, `expert_params` of them routed
    experts) on one GPU once sharded where `on`: the dense part over `shard` GPUs, the experts
    over their expert data-parallel group, shard x expert_shard_ratio (tp / (ep x etp)), at
    least 1 (Megatron-Core expert_data_parallel_size; Liu et al. 2025, arXiv:2504.14960 §3).
    Scalars or arrays (the layout search)."""
    expert = expert_params / np.maximum(params, 1.0)
    eshard = np.maximum(1.0, shard * expert_shard_ratio)
    return np.where(on, total * (1 - expert) / shard + total * expert / eshard, total)
