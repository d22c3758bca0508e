"""Command-line guards shared by every command: bounded option callbacks, "was this option
given?", and the per-command cross-field rules (the rules themselves live in specs/limits.py,
pure, so the job models and the web API apply the same ones)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import typer

from gpuplan.errors import InputError, shorten
from gpuplan.specs import limits
from gpuplan.specs.device import Device
from gpuplan.specs.framework import ATTENTION_KERNELS
from gpuplan.specs.model import ModelSpec


def finite(lo: float, hi: float, *, lo_open: bool = False, unit: str = ""
           ) -> Callable[[float | None], float | None]:
    """A typer callback: the value (or None) must be finite and in [lo, hi] ((lo, hi])."""

    def check(value: float | None) -> float | None:
        if value is None:
            return value
        ok = math.isfinite(value) and (value > lo if lo_open else value >= lo) and value <= hi
        if not ok:
            low = f"above {lo:g}" if lo_open else f"from {lo:g}"
            raise typer.BadParameter(f"{shorten(value)} is not valid; expected a finite number "
                                     f"{low} to {hi:g}{unit}")
        return value

    return check


def given(ctx: typer.Context, *names: str) -> list[str]:
    """The options among `names` (parameter names) the user wrote on the command line, as
    their flags (e.g. '--tp')."""
    out = []
    for name in names:
        src = ctx.get_parameter_source(name)
        if src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP"):
            param = next((p for p in ctx.command.params if p.name == name), None)
            opts = [o for o in getattr(param, "opts", []) if o.startswith("--")]
            out.append(opts[0] if opts else f"--{name.replace('_', '-')}")
    return out


def model_layout(m: ModelSpec, *, tp: int = 1, pp: int = 1, ep: int = 1,
                 virtual_stages: int = 1) -> None:
    """Degrees the model can be split by."""
    limits.check_tp_heads(tp, m.num_heads, m.kv_heads)
    limits.check_pp_layers(pp, m.num_layers)
    limits.check_virtual_stages(virtual_stages, pp, m.num_layers)
    limits.check_ep(ep, m.num_experts)


def positions(m: ModelSpec, tokens: int, field: str) -> None:
    limits.check_positions(tokens, m.max_position_embeddings, m.name, field, m.position)


def precision(d: Device, value: str, field: str = "--precision") -> None:
    """fp8-mixed (or --dtype fp8) on a device without fp8 units is refused."""
    dtype = "fp8" if value.startswith("fp8") else value
    limits.check_dtype_on_device(dtype, d.peak_flops_per_s, d.name, field, shown=value)


def train_options(ctx: typer.Context, m: ModelSpec, d: Device, opts: dict[str, Any]) -> None:
    """Cross-field rules of `gpuplan train` (and `memory --mode train`)."""
    limits.check_fsdp_zero(opts["fsdp"], opts["zero"], bool(given(ctx, "zero")))
    precision(d, opts["precision"])
    positions(m, opts["seq_len"], "--seq-len")
    model_layout(m, tp=opts["tp"], pp=opts["pp"], ep=opts["ep"],
                 virtual_stages=opts["virtual_stages"])
    if opts["seq_len"] % opts["cp"]:
        raise InputError("--cp", opts["cp"], f"a divisor of --seq-len ({opts['seq_len']})")
    if opts.get("finetune", "full") == "full":
        limits.check_not_with("--finetune full", given(ctx, "lora_rank", "lora_targets"),
                              "adapters apply to --finetune lora or qlora")


INFER_ONLY = ("weight_dtype", "kv_dtype", "block_size", "margin")
"""options `memory --mode train` would ignore (the training-only options in inference are
refused by specs.workload.refuse_train_only)"""


def _value(v: Any) -> Any:
    return getattr(v, "value", v)


def memory_rules(ctx: typer.Context, m: ModelSpec, d: Device, mode: Any,
                 opts: dict[str, Any]) -> None:
    """`gpuplan memory`: options of the other mode are refused, then the mode's rules."""
    mode = _value(mode)
    if mode == "train":
        limits.check_not_with("--mode train", given(ctx, *INFER_ONLY),
                              "it applies to --mode infer")
        train_options(ctx, m, d, {k: _value(opts[k]) for k in (
            "fsdp", "zero", "precision", "seq_len", "tp", "pp", "ep", "virtual_stages", "cp",
            "finetune")})
        if opts["global_batch"] is not None:
            limits.check_global_batch(opts["global_batch"], opts["micro_batch"], opts["dp"])
    else:
        positions(m, opts["seq_len"], "--seq-len")
        model_layout(m, tp=opts["tp"])


SEARCHED = ("dp", "tp", "pp", "cp", "ep", "etp", "zero", "fsdp", "virtual_stages", "recompute",
            "sequence_parallel", "no_overlap", "tokens", "usd_per_hour")


def train_rules(ctx: typer.Context, m: ModelSpec, d: Device, opts: dict[str, Any]) -> None:
    """`gpuplan train`: options the chosen mode would ignore, then the layout's rules."""
    o = {k: _value(v) for k, v in opts.items()}
    if o["search"]:
        limits.check_exclusive({"--search": True, "--scaling": o["scaling"]},
                               "the search ranks layouts at one GPU count")
        limits.check_not_with("--search", given(ctx, *SEARCHED),
                              "the search chooses the layout and times one step")
    elif given(ctx, "top"):
        raise InputError("--top", o["top"], "only with --search (rows of the ranking)")
    if o.get("overlap") is not None and not o["overlap"].strip():
        raise InputError("--overlap", o["overlap"], "none, or a comma list of grad, param, tp")
    if o["no_overlap"] and o.get("overlap") is not None:
        raise limits.ConflictError("--overlap", "--no-overlap", "--no-overlap exposes every "
                                   "collective; --overlap names the ones hidden")
    kernel = o.get("attention_kernel")
    if kernel is not None and not kernel.strip():
        raise InputError("--attention-kernel", kernel, "one of " + ", ".join(ATTENTION_KERNELS))
    if kernel is not None and d.kind != "gpu":
        raise InputError("--attention-kernel", kernel, f"a GPU --gpu: the FlashAttention and "
                         f"cuDNN kernels run on GPUs, and {d.name} is a {d.kind}")
    if kernel is not None and o["attention"] == "naive":
        raise limits.ConflictError("--attention-kernel", "--attention naive", "naive attention "
                                   "materialises the scores and runs no fused kernel")
    if o["scaling"] and o["ep"] > 1:
        raise limits.ConflictError("--ep", "--scaling", "the curve starts at one GPU, where "
                                   "expert parallelism has no data-parallel ranks to span")
    gpus = o["gpus"]
    if o["gpus_per_node"] is not None:
        limits.check_gpus_per_node(o["gpus_per_node"], gpus)
    mp = o["tp"] * o["pp"] * o["cp"]
    if o["dp"] is not None:
        limits.check_degrees(gpus, o["dp"], o["tp"], o["pp"], o["cp"])
    elif gpus % mp:
        raise InputError("--gpus", gpus, f"a multiple of tp x pp x cp = {mp}")
    dp = o["dp"] or gpus // mp
    if o["global_batch"] is not None and not o["search"]:
        limits.check_global_batch(o["global_batch"], o["micro_batch"], dp)
    train_options(ctx, m, d, o)


SIM_ONLY = ("requests", "scheduler", "chunked_prefill", "seed", "slo_ttft", "slo_tpot",
            "max_batch", "max_tokens", "kv_fraction")
"""`serve` options only a simulated stream reads (a single batch's latency ignores them)"""
TRACE_GIVES = ("rate", "max_throughput", "prompt_len", "output_len", "requests", "seed")
"""`serve` options a --trace file replaces (arrivals and lengths come from the file)"""


def serve_rules(ctx: typer.Context, o: dict[str, Any]) -> None:
    """`gpuplan serve`: one source of load, and no option the chosen mode would ignore."""
    if o["trace"] is not None:
        limits.check_not_with("--trace", given(ctx, *TRACE_GIVES),
                              "the trace gives each request's arrival time and lengths")
    elif o["max_throughput"] and o["rate"] is not None:
        raise limits.ConflictError("--rate", "--max-throughput", "a saturating load queues "
                                   "every request at once; give one of the two")
    if o["max_throughput"] or o["rate"] is not None or o["trace"] is not None or o["curve"] \
            or o["plot"] is not None:
        limits.check_not_with("a simulated stream (--rate, --max-throughput, --trace, --curve)",
                              given(ctx, "batch"), "it forms its own batches up to --max-batch")
    else:
        limits.check_not_with("a single batch (no --rate, --max-throughput, --trace or "
                              "--curve)", given(ctx, *SIM_ONLY),
                              "it applies to a simulated request stream")


def goal_rules(ctx: typer.Context, goal: Any, uses: dict[str, tuple[str, ...]]) -> None:
    """Options the chosen --goal does not read are refused (`uses`: option -> the goals that
    read it)."""
    g = _value(goal)
    limits.check_not_with(f"--goal {g}", given(ctx, *(k for k, gs in uses.items() if g not in gs)),
                          "that goal does not use it")


TRAIN_GOALS = ("pretrain", "finetune", "lora", "qlora")
ADVISE_USES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("tokens", "budget", "deadline", "seq_len", "global_batch"), TRAIN_GOALS),
    "lora_rank": ("lora", "qlora"),
    **dict.fromkeys(("rate", "prompt_len", "output_len", "slo_ttft", "slo_tpot", "quantized"),
                    ("serve",))}
PLAN_USES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("gpus", "tokens"), ("train", "both")),
    **dict.fromkeys(("rate", "prompt_len", "output_len", "slo_ttft", "slo_tpot"),
                    ("serve", "both"))}


def default_len(m: ModelSpec, value: int | None, default: int) -> int:
    """A sequence option left out: `default` tokens, or the model's positions if fewer (so a
    default is never refused: GPT-2 gets 1,024)."""
    return value if value is not None else min(default, m.max_position_embeddings)
