"""When it does not fit: the cheapest ordered chain of changes that makes it fit.

Training, cheapest first: a smaller micro-batch with gradient accumulation (same global batch,
some matmul efficiency lost) -> selective, then full activation recomputation (+~33% compute
for full; Chen et al. 2016) -> lower precision and an 8-bit optimizer -> ZeRO/FSDP stages over
the data-parallel GPUs -> tensor parallelism within the node, then pipeline parallelism (GPUs
that were data-parallel become model-parallel) -> optimizer offload to CPU -> more GPUs, or a
larger GPU. Each step keeps the previous ones; the chain stops at the first configuration that
fits and prints it as a command line.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from gpuplan.estimate.inference import InferConfig, infer_memory
from gpuplan.estimate.memory import (
    TrainConfig,
    train_memory,
)
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec


@dataclass(frozen=True)
class FixStep:
    change: str
    cost: str
    total_bytes: int
    capacity_bytes: int
    fits: bool
    """not declared out of memory (the same meaning as the memory result's `fits`)"""
    command: str
    device: str
    fits_with_margin: bool | None = None
    """what the chain aims for: inference, total <= capacity less the safety margin;
    training, the verdict 'fits' (not 'tight')"""


def train_command(model: str, device: str, c: TrainConfig) -> str:
    parts = [f"gpuplan memory {model} --gpu {device} --mode train",
             f"--micro-batch {c.micro_batch} --seq-len {c.seq_len}",
             f"--precision {c.precision} --optimizer {c.optimizer}"]
    if c.global_batch:
        parts.append(f"--global-batch {c.global_batch}")
    if c.fsdp != "none":
        parts.append(f"--fsdp {c.fsdp}")
    elif c.zero:
        parts.append(f"--zero {c.zero}")
    for k in ("dp", "tp", "pp", "cp", "ep"):
        if getattr(c, k) > 1:
            parts.append(f"--{k} {getattr(c, k)}")
    if c.sp:
        parts.append("--sequence-parallel")
    if c.recompute != "none":
        parts.append(f"--recompute {c.recompute}")
    if c.attention != "flash":
        parts.append(f"--attention {c.attention}")
    if c.offload_optimizer:
        parts.append("--offload-optimizer")
    if c.virtual_stages > 1:
        parts.append(f"--virtual-stages {c.virtual_stages}")
    for flag, on in (("--fused", c.fused), ("--grad-fp32", c.grad_dtype == "fp32"),
                     ("--grad-compute-dtype", c.grad_dtype == "compute"),
                     ("--no-dropout", not c.dropout)):
        if on:
            parts.append(flag)
    if c.target != "auto":
        parts.append(f"--target {c.target}")
    if c.loss != "auto":
        parts.append(f"--loss {c.loss}")
    if c.document_len:
        parts.append(f"--document-len {c.document_len}")
    return " ".join(parts)


def infer_command(model: str, device: str, c: InferConfig) -> str:
    s = (f"gpuplan memory {model} --gpu {device} --mode infer --batch {c.batch} "
         f"--context {c.context} --weight-dtype {c.weight_dtype} --kv-dtype {c.kv_dtype}")
    return s + (f" --tp {c.tp}" if c.tp > 1 else "")


def larger_devices(device: Device, catalog: list[Device]) -> list[Device]:
    """Devices of the same kind with more usable memory, same vendor first, smallest first."""
    same = [d for d in catalog if d.kind == device.kind and d.capacity_bytes > device.capacity_bytes]
    return sorted(same, key=lambda d: (d.vendor != device.vendor, d.capacity_bytes))


def _train_candidates(m: ModelSpec, cfg: TrainConfig,
                      gpus_per_node: int) -> Iterator[tuple[str, str, TrainConfig]]:
    c = cfg
    while c.micro_batch > 1:
        mb = c.micro_batch // 2
        gb = c.global_batch or c.micro_batch * c.dp
        c = replace(c, micro_batch=mb, global_batch=gb)
        yield (f"micro-batch {mb} with gradient accumulation x{c.grad_accum} (global batch "
               f"{gb} unchanged)", "smaller matmuls: some throughput lost", c)
    if c.recompute == "none" and c.attention == "naive":
        c = replace(c, recompute="selective")
        yield "selective recomputation (attention core)", "+2-4% compute", c
    if c.recompute != "full":
        c = replace(c, recompute="full")
        yield "full activation recomputation", "+~33% compute (one extra forward)", c
    if c.precision == "fp32":
        c = replace(c, precision="bf16-mixed")
        yield "bf16 mixed precision", "none on tensor-core GPUs; faster", c
    if c.optimizer in ("adamw", "adam"):
        c = replace(c, optimizer="adam8bit")
        yield "8-bit Adam (bitsandbytes)", "small convergence risk", c
    if c.dp > 1:
        for z in range(max(c.zero, 0) + 1, 4):
            c = replace(c, zero=z, fsdp="none")
            yield (f"ZeRO stage {z} over {c.dp} data-parallel GPUs",
                   "more communication" if z < 3 else "parameter all-gathers every step", c)
    while c.dp > 1 and c.tp * 2 <= gpus_per_node and m.num_heads % (c.tp * 2) == 0 \
            and (m.kv_heads % (c.tp * 2) == 0 or (c.tp * 2) % m.kv_heads == 0):
        c = replace(c, tp=c.tp * 2, dp=c.dp // 2, sp=True,
                    global_batch=c.global_batch or c.micro_batch * c.dp)
        yield (f"tensor parallel {c.tp} with sequence parallelism (data parallel now {c.dp})",
               "TP all-reduces on the critical path; keep TP inside a node", c)
    while c.dp > 1 and c.pp * 2 <= m.num_layers:
        c = replace(c, pp=c.pp * 2, dp=c.dp // 2,
                    global_batch=c.global_batch or c.micro_batch * c.dp)
        yield (f"pipeline parallel {c.pp} (data parallel now {c.dp})",
               "pipeline bubble (p-1)/(m+p-1)", c)
    if not c.offload_optimizer:  # ZeRO-Offload = ZeRO-2 + CPU optimizer (Ren et al. 2021)
        # the CPU runs its own Adam: the user's optimizer comes back (8-bit Adam is GPU-only)
        c = replace(c, offload_optimizer=True, optimizer=cfg.optimizer,
                    zero=max(c.zero, 2) if c.fsdp == "none" else c.zero)
        yield ("optimizer states and gradients offloaded to CPU (ZeRO-Offload)",
               "CPU optimizer step, PCIe traffic, CPU RAM ~12-16 bytes/parameter", c)
    base = c
    for n in (2, 4, 8, 16, 32, 64, 128, 256):
        dp = base.dp * n
        c = replace(base, dp=dp, zero=3, fsdp="none", offload_optimizer=False,
                    global_batch=(base.global_batch or base.micro_batch * base.dp) * n)
        yield (f"{dp * c.tp * c.pp} GPUs: data parallel {dp} with ZeRO-3",
               f"{n}x the GPUs", c)


def train_fix_chain(m: ModelSpec, device: Device, cfg: TrainConfig, model_arg: str,
                    gpus_per_node: int = 8, catalog: list[Device] | None = None) -> list[FixStep]:
    """Ordered changes, each applied on top of the previous, until the configuration is no
    longer declared out of memory (each step says whether it is 'tight'); none when it fits
    beyond doubt (`fits_with_margin`: verdict 'fits')."""
    steps: list[FixStep] = []
    if train_memory(m, device, cfg).fits_with_margin:
        return steps
    for change, cost, c in _train_candidates(m, cfg, gpus_per_node):
        r = train_memory(m, device, c)
        steps.append(FixStep(change, cost, r.total_bytes, r.capacity_bytes, r.fits,
                             train_command(model_arg, device.name, c), device.name,
                             r.fits_with_margin))
        if r.fits:
            return steps
    for bigger in larger_devices(device, catalog or []):
        r = train_memory(m, bigger, cfg)
        if r.fits_with_margin:
            steps.append(FixStep(f"a larger GPU: {bigger.name} with the original settings",
                                 "a more expensive device", r.total_bytes, r.capacity_bytes,
                                 True, train_command(model_arg, bigger.name, cfg), bigger.name))
            return steps
    return steps


def infer_fix_chain(m: ModelSpec, device: Device, cfg: InferConfig, model_arg: str,
                    gpus_per_node: int = 8, catalog: list[Device] | None = None) -> list[FixStep]:
    """Inference: fp8 KV cache, 8-bit then 4-bit weights, tensor parallel, fewer sequences,
    a larger GPU."""
    steps: list[FixStep] = []
    if infer_memory(m, device, cfg).fits_with_margin:
        return steps

    class _Fit:
        def __init__(self, ok: bool) -> None:
            self.fits = ok

    def add(change: str, cost: str, c: InferConfig, dev: Device = device) -> _Fit:
        r = infer_memory(m, dev, c)
        steps.append(FixStep(change, cost, r.total_bytes, r.capacity_bytes, r.fits,
                             infer_command(model_arg, dev.name, c), dev.name,
                             r.fits_with_margin))
        return _Fit(r.fits_with_margin)

    c = cfg
    fp8 = device.peak("fp8") is not None
    if c.kv_dtype in ("bf16", "fp16", "fp32"):
        c = replace(c, kv_dtype="fp8")
        if add("fp8 KV cache", "small accuracy cost", c).fits:
            return steps
    for w, cost in (("fp8" if fp8 else "int8", "small accuracy cost"),
                    ("int4", "weight-only 4-bit: accuracy cost, dequantization overhead")):
        if c.weight_dtype in ("bf16", "fp16", "fp32") or (w == "int4" and c.weight_dtype
                                                           in ("fp8", "int8")):
            c = replace(c, weight_dtype=w)
            if add(f"{w} weights", cost, c).fits:
                return steps
    while c.tp * 2 <= gpus_per_node and m.num_heads % (c.tp * 2) == 0:
        c = replace(c, tp=c.tp * 2)
        if add(f"tensor parallel over {c.tp} GPUs", f"{c.tp}x the GPUs, all-reduce per layer",
               c).fits:
            return steps
    r = infer_memory(m, device, c)
    if r.max_batch and r.max_batch < c.batch:
        c = replace(c, batch=r.max_batch)
        if add(f"batch {r.max_batch} (largest that fits)", "less throughput", c).fits:
            return steps
    for bigger in larger_devices(device, catalog or []):
        if infer_memory(m, bigger, cfg).fits_with_margin:
            add(f"a larger GPU: {bigger.name} with the original settings",
                "a more expensive device", cfg, bigger)
            return steps
    return steps
