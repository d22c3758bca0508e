"""What a training stack does with memory: the few choices that move the peak, per framework
(a description, so it lives in specs: TrainConfig can carry it).

A small pure record, so the framework profiles (`--framework`, the step-time side) can carry
it: how the loss is computed (fp32 logits, fused in-place cross-entropy, chunked), what the
training loop keeps alive across backward, how many FSDP units are gathered at once, whether
FSDP reshards parameters between pipeline micro-batches, and the caching allocator's reserved
overhead. Each default names where it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpuplan.errors import UnknownNameError

LossKind = Literal["fp32", "fused", "fused-inplace", "vocab-parallel", "chunked"]
SelectiveKind = Literal["attention", "per-op", "matmuls"]

RESERVED_OVERHEAD = 0.11
"""PyTorch caching allocator, reserved over allocated on the dynamic memory at the peak. Named
and fitted once: the value that minimises the median |error| on the FSDP-only peaks of
benchmarks/validate_memory.py (torchtitan Llama 3.1 8B, Tables 1 and 3; OVERHEAD_ROWS there),
refitted (0.13 -> 0.11) when those rows got torchtitan's fp32 gradients from its framework
profile; the other peaks never moved it. Why it is not larger: large blocks are rounded
to 2 MiB and split from cached segments; an OOM first frees every cached unused block and
retries (PyTorch docs, CUDA memory management), so only partly used segments are lost. The
ZeRO paper's > 30 % (Rajbhandari et al. 2020 §3.2) is the extreme case, not the rule. The
allocator setting behind it: torchtitan's run_train.sh launches with
PYTORCH_ALLOC_CONF=expandable_segments:True, as NeMo 2 / Megatron-Bridge's performance recipes do
(perf_recipes/llama/h100/llama3.py), so the fitted value is the expandable-segments one for those
stacks too; no measured peak without expandable segments is at hand to give the others their
own, so they share it."""

MEMORY_BAND = 0.12
"""The training memory model's stated relative error on a peak: the 90th percentile of |error|
on the 20 calibration peaks of benchmarks/validate_memory.py, rounded up to a percent (median
3.7 %, largest 12.2 %: Llama 3.1 405B with CP 8, then 12.1 %: 70B under FSDP x TP 8, both
under-predicted). Its summary's `band`
recomputes it; a test checks this value against it. A predicted peak whose ±band range
contains the capacity is 'tight', not 'does not fit'."""
MEMORY_BAND_SOURCE = ("90th percentile of |error| of the predicted peak on 20 measured "
                      "peaks (torchtitan Llama 3 8B-405B; median 3.7 %)")


@dataclass(frozen=True)
class MemoryBehaviour:
    """Memory-side choices of one training stack."""

    name: str
    loss: LossKind = "fp32"
    """fp32: logits upcast to fp32 and log_softmax kept (PyTorch cross_entropy on .float()
    logits); fused: a fused kernel keeps the 16-bit logits and makes a 16-bit gradient
    (flash-attn's CrossEntropyLoss, a torch.compile'd loss); fused-inplace: the same with the
    gradient written over the logits (inplace_backward=True); vocab-parallel: Megatron's
    cross-entropy on the fp32 upcast, softmax and gradient in place; chunked: logits made and
    consumed a chunk of tokens at a time"""
    keeps_logits: bool = False
    """the 16-bit logits stay referenced through backward (HF returns them in its output)"""
    loss_chunk_tokens: int = 1024
    """tokens per chunk when loss == 'chunked'"""
    selective: SelectiveKind = "attention"
    """what --recompute selective keeps: attention = recompute the attention core only
    (Korthikanti et al. 2022 §5, Megatron); per-op = torchtitan's per-op policy (every other
    matmul output and the attention output kept, the rest recomputed); matmuls = every matmul
    output and the attention output kept, the rest recomputed (JAX save-dots policies, LLaMA)
    (estimate.sac)"""
    fsdp_units_gathered: int = 2
    """FSDP/ZeRO-3 units whose full parameters are live at once: the one computing and the one
    prefetched (FSDP BACKWARD_PRE / FSDP2 implicit prefetch; ZeRO-3 prefetch bucket)"""
    fsdp_reshard_with_pp: bool = True
    """False: with pipeline parallelism the stage keeps its parameters (and their gradients)
    unsharded across micro-batches (torchtitan sets reshard_after_forward=False under PP)"""
    loss_parallel: bool = False
    """with TP, the fp32 loss runs on vocabulary-sharded logits under PyTorch's DTensor
    loss_parallel (torchtitan's default: --training.disable_loss_parallel off); its backward
    holds one more fp32 copy of the logits (estimate.memory_peak)"""
    tp_saves_gathered_inputs: bool = False
    """with sequence-parallel TP, autograd keeps the all-gathered input of each column-parallel
    linear (PyTorch DTensor TP: torchtitan), not the shard (Megatron re-gathers in backward)"""
    ddp_bucket_copies: bool = True
    """data parallelism reduces gradients through bucket buffers of their own (torch DDP:
    bucket_cap_mb, two in flight); False: the buckets are views of one contiguous gradient
    buffer (Megatron-Core param_and_grad_buffer.py: grad_data is one zeros(numel) tensor, each
    bucket a _get view of it)"""
    fp8_weight_copies: float = 1.0
    """FP8 training: bytes per weight element of the FP8 copies of each FP8 linear's weight
    alive at the backward peak (1: one copy; Transformer Engine 2: the row-wise copy and the
    column-wise one for the backward GEMMs, estimate.memory.fp8_weight_bytes)"""
    fp8_primary_weights: bool = False
    """FP8 training keeps the FP8 linears' weights in FP8 only, no 16-bit copy (Megatron-Core
    fp8_param_gather / TE fp8_model_init; the fp32 master copy stays in the optimizer)"""
    fp8_blocks_only: bool = False
    """only the transformer layers' linears run in FP8; the embedding and the LM head stay
    16-bit (Megatron-Core: output_layer is a tensor_parallel.ColumnParallelLinear, not a TE
    module)"""
    fp8_saves_quantized_inputs: bool = False
    """FP8 training: each layer linear keeps an FP8 copy of its input for backward, not the
    16-bit input (Transformer Engine; ops.blocks.linear)"""
    fp8_weights_cached: bool = False
    """FP8 training: the FP8 weights are made once per optimizer step and kept across its
    micro-batches (the copies fp8_weight_copies counts), so the step model casts no weight per
    micro-batch (ops.impl.Impl.fp8_weights_cached)"""
    recompute_early_stop: bool = False
    """full recomputation through PyTorch's non-reentrant checkpoint with early stop (its
    default since PyTorch 2.1): the layer's tail after its last saving linear is not rerun
    (ops.impl.Impl.recompute_early_stop); False for Megatron's and DeepSpeed's own checkpoint
    functions and for reentrant checkpoints (Hugging Face's default)"""
    fp8_norm_casts: bool = False
    """FP8 training: the norm kernel before the QKV and first MLP linear writes their FP8 input
    (Transformer Engine LayerNormLinear; ops.impl.Impl.fp8_norm_casts)"""
    training_kv_cache: bool | None = None
    """whether the model code builds a KV cache in training (copies of k and v): only Hugging
    Face models do (use_cache defaults to True); None leaves TrainConfig.training_kv_cache"""
    sources: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "loss": self.loss, "keeps_logits": self.keeps_logits,
                "loss_chunk_tokens": self.loss_chunk_tokens, "selective": self.selective,
                "fsdp_units_gathered": self.fsdp_units_gathered,
                "fsdp_reshard_with_pp": self.fsdp_reshard_with_pp,
                "loss_parallel": self.loss_parallel,
                "tp_saves_gathered_inputs": self.tp_saves_gathered_inputs,
                "training_kv_cache": self.training_kv_cache,
                "ddp_bucket_copies": self.ddp_bucket_copies,
                "fp8_weight_copies": self.fp8_weight_copies,
                "fp8_primary_weights": self.fp8_primary_weights,
                "fp8_blocks_only": self.fp8_blocks_only,
                "fp8_saves_quantized_inputs": self.fp8_saves_quantized_inputs,
                "fp8_weights_cached": self.fp8_weights_cached,
                "fp8_norm_casts": self.fp8_norm_casts,
                "recompute_early_stop": self.recompute_early_stop,
                "sources": list(self.sources)}


BEHAVIOURS: dict[str, MemoryBehaviour] = {
    "default": MemoryBehaviour(
        name="default", loss="fp32", keeps_logits=False,
        sources=("the middle of the stacks when none is named and the layout is data-parallel "
                 "only: PyTorch F.cross_entropy on fp32-upcast logits (torchtitan, DeepSpeed "
                 "and HF models; not Megatron's in-place vocab-parallel loss nor "
                 "llm-foundry's fused one), the logits not kept past the loss",)),
    "hf": MemoryBehaviour(
        name="hf", loss="fp32", keeps_logits=True, training_kv_cache=True,
        sources=("transformers ForCausalLMLoss upcasts logits to fp32; the model output keeps "
                 "the 16-bit logits (CausalLMOutput.logits)",)),
    "fsdp": MemoryBehaviour(
        name="fsdp", loss="fp32", keeps_logits=False, fsdp_units_gathered=2,
        fsdp_reshard_with_pp=False, selective="per-op", training_kv_cache=False,
        loss_parallel=True, tp_saves_gathered_inputs=True, recompute_early_stop=True,
        sources=("torchtitan: cross_entropy(pred.flatten(0, 1).float()); `del pred` before "
                 "backward; FSDP2 prefetches one unit; reshard_after_forward=False with PP; "
                 "full AC = ptd_checkpoint_wrapper per block (non-reentrant; PyTorch's early "
                 "stop on in the benchmarked releases; torchtitan turned it off by default "
                 "at 25413d2, 2025-08-29: activation_checkpoint.early_stop); "
                 "loss_parallel with TP; DTensor TP keeps the gathered inputs of ColwiseParallel "
                 "linears",)),
    "llm-foundry": MemoryBehaviour(
        name="llm-foundry", loss="fused", keeps_logits=True, fsdp_units_gathered=2,
        training_kv_cache=False, recompute_early_stop=True,
        sources=("llm-foundry ComposerMPTCausalLM: loss_fn defaults to fused_crossentropy, "
                 "flash_attn.losses.cross_entropy.CrossEntropyLoss(ignore_index=-100) "
                 "(inplace_backward off); Composer keeps the outputs (logits); FSDP "
                 "FULL_SHARD, BACKWARD_PRE, limit_all_gathers; activation checkpointing "
                 "non-reentrant (scripts/train/yamls/pretrain/mpt-*.yaml "
                 "activation_checkpointing_reentrant: false @8c8dd48), so PyTorch's early "
                 "stop applies",)),
    "megatron": MemoryBehaviour(
        name="megatron", loss="vocab-parallel", keeps_logits=False, training_kv_cache=False,
        ddp_bucket_copies=False, fp8_weight_copies=2.0, fp8_primary_weights=True, fp8_blocks_only=True,
        fp8_saves_quantized_inputs=True, fp8_weights_cached=True, fp8_norm_casts=True,
        sources=("Megatron-LM _VocabParallelCrossEntropy on output.float() (Shoeybi et al. "
                 "2019 §3: logits never gathered; softmax and gradient in place); its fused "
                 "forms keep the same fp32 tensor: --cross-entropy-loss-fusion 'native' "
                 "(megatron/core/fusions/fused_cross_entropy.py, calculate_logits_max upcasts "
                 "and exp_logits is saved) and 'te' (transformer_engine/pytorch/triton/"
                 "cross_entropy.py: an fp32 grad_input is made in forward and saved)",
                 "FP8 via Transformer Engine (transformer_engine/pytorch/module/linear.py): "
                 "row-wise and column-wise FP8 weight data, FP8 column-wise copies of the "
                 "layers' linear inputs saved for backward; embedding and output_layer stay "
                 "bf16; FP8 primary weights as Megatron-LM's H100 FP8 example runs "
                 "(examples/llama/train_llama3_8b_h100_fp8.sh: --fp8-param-gather); the FP8 "
                 "weights are made once per step and reused by every micro-batch "
                 "(megatron/core/extensions/transformer_engine.py @d98e8a6 passes is_first_microbatch "
                 "to TE's linears; TE linear.py re-quantizes the weight only when "
                 "is_first_microbatch is None or True); the QKV and fc1 linears are "
                 "TELayerNormColumnParallelLinear, whose norm writes the FP8 input itself "
                 "(TE layernorm_linear.py @d0067d0: apply_normalization with the input "
                 "quantizer, with_quantized_norm)")),
    "deepspeed": MemoryBehaviour(
        name="deepspeed", loss="fp32", keeps_logits=False, fsdp_units_gathered=2,
        sources=("DeepSpeed ZeRO-3 prefetch (stage3_prefetch_bucket_size) of the next "
                 "module; the model's own loss (fp32 cross-entropy)",)),
}
BEHAVIOURS["nemo"] = replace(
    BEHAVIOURS["megatron"], name="nemo",
    sources=(*BEHAVIOURS["megatron"].sources,
             "Megatron-Core under NeMo 2 / Megatron-Bridge: as megatron; their FP8 precision "
             "recipes set fp8_param_gather=True too (NeMo "
             "nemo/collections/llm/recipes/precision/mixed_precision.py bf16_with_fp8_mixed; "
             "Megatron-Bridge src/megatron/bridge/training/mixed_precision.py "
             "bf16_with_fp8_delayed_scaling_mixed / _current_scaling_mixed)"))
BEHAVIOURS["megatron-lm"] = replace(BEHAVIOURS["megatron"], name="megatron-lm")
BEHAVIOURS["aa-scaling"] = replace(BEHAVIOURS["megatron"], name="aa-scaling")
"""NeMo 2 / Megatron-Bridge keep Megatron-Core's memory behaviour (their gradient dtype is the
framework profile's, catalog/frameworks/nemo.toml); so does Megatron-LM launched with its own
defaults (the overlap flags change timing, not memory), and, taken as such, Aleph Alpha's
Scaling codebase (Megatron-style layers; its gradient dtype is its profile's)."""


MIDDLE = MemoryBehaviour(
    name="inferred: middle (no framework named, data parallel only)", loss="vocab-parallel",
    keeps_logits=False, training_kv_cache=False,
    sources=("the middle of the stacks' losses: fp32 softmax kept and its gradient made in "
             "place, cast to 16 bits (6 bytes per logit at the loss backward; fused "
             "cross-entropy 4, PyTorch's fp32 cross_entropy 12); no training KV cache (only "
             "Hugging Face models build one: name --framework hf)",))
"""What `gpuplan train/memory/plan` assume when no framework is named and the layout is data-
parallel only (a stack-independent middle, not the most pessimistic stack)."""


INFER = MemoryBehaviour(name="infer")
"""Marker: no framework named; TrainConfig.behaviour resolves it from the job's layout
(inferred_behaviour), so a search or plan that changes the layout re-infers it."""


def inferred_behaviour(tp: int, cp: int, ep: int = 1) -> MemoryBehaviour:
    """The memory behaviour when no framework is named, from the layout: tensor, context or
    expert parallelism is what the model-parallel stacks do (Megatron-LM/Core and NeMo, which most
    published runs at that scale use: its in-place vocab-parallel loss, no training KV cache);
    otherwise MIDDLE. (Not pipeline parallelism: the layout search varies it within one memory
    profile.)"""
    if max(tp, cp, ep) > 1:
        return replace(BEHAVIOURS["megatron"], name="inferred: megatron (tp, cp or ep > 1)")
    return MIDDLE


def behaviour_for(framework: str | None, **overrides: object) -> MemoryBehaviour:
    """The memory behaviour of a framework name (None: 'default'), with field overrides."""
    name = (framework or "default").lower()
    if name not in BEHAVIOURS:
        raise UnknownNameError("framework", name, sorted(BEHAVIOURS))
    b = BEHAVIOURS[name]
    return replace(b, **overrides) if overrides else b  # type: ignore[arg-type]
