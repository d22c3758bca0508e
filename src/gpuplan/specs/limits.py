"""Bounds and cross-field rules for every input, in one place.

Pure validators (no CLI, no I/O): the command line, the web API and the job models call the same
functions, so a rule added here holds everywhere. Each raises `InputError` naming the field, the
value (shortened) and what is valid.

The maxima are far above any real job (so no real plan is refused) and low enough that every
estimate stays finite and fast: time is linear in layers and experts, and sizes multiply
(batch x sequence x hidden x layers stays below 1e30, far inside a float's 1.8e308).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gpuplan.errors import InputError

MAX_SEQ = 2**24
"""tokens per sequence: 128x the longest context of a catalog model (Llama 3.1, 128k)"""
MAX_BATCH = 2**24
"""sequences per batch or micro-batch"""
MAX_GLOBAL_BATCH = 2**34
"""sequences per optimizer step"""
MAX_GPUS = 10**6
"""GPUs in a job: 5x the largest cluster announced by 2025 (xAI Colossus, ~2e5 GPUs)"""
MAX_VIRTUAL_STAGES = 1024
"""interleaved pipeline chunks per GPU (Megatron-LM uses 2-8)"""
MAX_DIM = 10**7
"""hidden, intermediate and vocabulary sizes, heads, ranks: 50x the largest published model"""
MAX_LAYERS = 10**4
"""layers: 50x the deepest published LLM (~200); estimates take time linear in layers"""
MAX_EXPERTS = 10**5
"""routed experts per MoE layer (DeepSeek-V3: 256)"""
MAX_TOKENS = 1e18
"""training tokens: ~60,000x the largest published run (Llama 3, 15e12)"""
MAX_USD_PER_GPU_HOUR = 1e4
MAX_LINK_GB_PER_S = 1e6
"""GB/s per GPU per direction: 1 PB/s, ~1000x NVLink 5 (900 GB/s)"""
MAX_CONTEXT_GB = 1e4
MAX_TOP = 10**4
"""rows asked for in a printed list"""
MAX_SEARCH_TOP = 1000
"""layouts the search re-times with the reference step model (a few ms each)"""
MAX_REQUESTS = 10**6
"""requests one serving simulation runs (a trace, --requests): bounded so no run hangs"""

_LAYER_FIELDS = frozenset({"num_layers", "num_hidden_layers", "n_layer", "first_dense_layers",
                           "first_k_dense_replace", "max_window_layers"})
_EXPERT_FIELDS = frozenset({"num_experts", "num_local_experts", "n_routed_experts",
                            "experts_per_token", "num_experts_per_tok", "num_shared_experts",
                            "n_shared_experts"})
_POSITION_FIELDS = frozenset({"max_position_embeddings", "n_positions", "sliding_window"})


def model_field_max(name: str) -> int:
    """The largest value allowed for an integer field of a model description."""
    if name in _LAYER_FIELDS:
        return MAX_LAYERS
    if name in _EXPERT_FIELDS:
        return MAX_EXPERTS
    if name in _POSITION_FIELDS:
        return MAX_SEQ * 64  # configs state up to 10M positions (Llama 4 Scout)
    return MAX_DIM


def check_int(field: str, value: Any, lo: int = 1, hi: int = MAX_DIM) -> int:
    """A whole number in [lo, hi] (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(field, value, f"a whole number from {lo:,} to {hi:,}")
    return value


def check_float(field: str, value: Any, lo: float, hi: float, *, lo_open: bool = False,
                unit: str = "") -> float:
    """A finite number in [lo, hi] ((lo, hi] with lo_open); NaN and infinities are refused."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(value) and (value > lo if lo_open else value >= lo) and value <= hi)
    if not ok:
        low = f"above {lo:g}" if lo_open else f"from {lo:g}"
        raise InputError(field, value, f"a finite number {low} to {hi:g}{unit}")
    return float(value)


def check_model_record(values: Mapping[str, Any]) -> None:
    """Every integer field of a model description within its maximum (ModelSpec calls it, so
    a config.json with 1e9 layers is refused before anything is built)."""
    for name, v in values.items():
        if isinstance(v, int) and not isinstance(v, bool) and v > model_field_max(name):
            raise InputError(name, v, f"at most {model_field_max(name):,}")


# ---- cross-field rules ------------------------------------------------------------------------


def check_positions(tokens: int, max_positions: int, model: str, field: str = "--seq-len",
                    position: str = "rope") -> None:
    """A sequence no longer than a learned position table (it has no row beyond). RoPE has no
    table: a longer sequence is a quality question (context extension, RoPE scaling), not one of
    memory or time, so it is planned as asked."""
    if tokens > max_positions and position == "learned":
        raise InputError(field, tokens, f"at most {model}'s {max_positions:,} positions (its "
                         "learned position table has no more rows)")


def check_tp_heads(tp: int, heads: int, kv_heads: int, field: str = "--tp") -> None:
    """TP splits the query heads evenly; K/V heads are split, or replicated when tp is a
    multiple of them (Megatron-LM GQA)."""
    if heads % tp:
        raise InputError(field, tp, f"a divisor of the model's {heads} attention heads")
    if kv_heads % tp and tp % kv_heads:
        raise InputError(field, tp, f"a divisor or a multiple of the model's {kv_heads} K/V "
                                    "heads (a multiple replicates each K/V head tp/kv times)")


def check_pp_layers(pp: int, layers: int, field: str = "--pp") -> None:
    if pp > layers:
        raise InputError(field, pp, f"at most the model's {layers} layers (one per stage)")


def check_virtual_stages(virtual_stages: int, pp: int, layers: int,
                         field: str = "--virtual-stages") -> None:
    """Interleaving needs a pipeline, and each chunk at least one layer."""
    if virtual_stages > 1 and pp == 1:
        raise InputError(field, virtual_stages, "1 without pipeline parallelism (set --pp > 1)")
    if virtual_stages * pp > layers:
        raise InputError(field, virtual_stages,
                         f"at most layers / pp = {layers // pp} (one layer per chunk)")


def check_ep(ep: int, num_experts: int, field: str = "--ep") -> None:
    if num_experts == 0 and ep != 1:
        raise InputError(field, ep, "1 for a dense model (expert parallelism needs experts)")
    if num_experts and num_experts % ep:
        raise InputError(field, ep, f"a divisor of the model's {num_experts} experts")


def check_gpus_per_node(gpus_per_node: int, gpus: int, field: str = "--gpus-per-node") -> None:
    """Whole nodes, or a job smaller than one node (it uses `gpus` of that node's GPUs)."""
    if gpus > gpus_per_node and gpus % gpus_per_node:
        raise InputError(field, gpus_per_node, f"a divisor of --gpus ({gpus}), or at least "
                         f"--gpus (a job within one node)")


def check_degrees(gpus: int, dp: int, tp: int, pp: int, cp: int) -> None:
    used = dp * tp * pp * cp
    if used != gpus:
        raise InputError("--gpus", gpus, f"dp x tp x pp x cp = {dp}x{tp}x{pp}x{cp} = {used}")


def check_global_batch(global_batch: int, micro_batch: int, dp: int,
                       field: str = "--global-batch") -> None:
    if global_batch % (micro_batch * dp):
        raise InputError(field, global_batch,
                         f"a multiple of micro-batch x dp = {micro_batch} x {dp}")


def check_fsdp_zero(fsdp: str, zero: int, zero_given: bool) -> None:
    """FSDP full/hybrid shard is ZeRO-3; another ZeRO stage given with it is a contradiction."""
    if fsdp != "none" and zero_given and zero != 3:
        raise InputError("--zero", zero, f"3 or absent with --fsdp {fsdp} (FSDP shards "
                                         "parameters, gradients and optimizer states: ZeRO-3)")


def check_dtype_on_device(dtype: str, peaks: Mapping[str, float], device: str,
                          field: str = "--precision", shown: str | None = None) -> None:
    """fp8 compute needs fp8 tensor cores (H100, MI300, ...)."""
    if dtype == "fp8" and not peaks.get("fp8"):
        raise InputError(field, shown or dtype,
                         f"a precision {device} runs: it has no fp8 units (use bf16)")


class ConflictError(InputError):
    """Two options that contradict each other, or one the other would silently ignore."""

    def __init__(self, field: str, other: str, why: str) -> None:
        self.field, self.value, self.valid = field, other, why
        Exception.__init__(self, f"{field}: cannot be used with {other} ({why})")


def check_exclusive(given: Mapping[str, bool], reason: str) -> None:
    """At most one of the options is given."""
    on = [k for k, v in given.items() if v]
    if len(on) > 1:
        raise ConflictError(on[1], on[0], reason)


def check_not_with(option: str, ignored: list[str], why: str) -> None:
    """Options that `option` would silently ignore are refused instead."""
    if ignored:
        raise ConflictError(ignored[0], option, f"{why}; drop {ignored[0]}")
