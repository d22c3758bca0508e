"""Achievable fractions of the datasheet peaks: the efficiency factors every estimate states.

Defaults are documented priors, replaceable by a measured machine profile (`gpuplan bench`):

- Matmul ceiling per device: best achievable bf16/fp8 matmul share of the dense peak, measured
  with mamf-finder (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS comparison table",
  2026-08-22), written with its source in the device file's `[ceilings]`.
- GEMM shape (training): tile and wave quantization on the device's SMs
  (estimate/efficiency_gemm.py, NVIDIA Deep Learning Performance Guide).
- Matmul size curve: Calculon's A100/H100 system files (Isaev et al. SC'23): 0.95 of peak for
  ops of >= 128 GFLOP, 0.9 >= 16, 0.6 >= 1, 0.1 below; we scale it so the largest ops reach the
  device ceiling above and interpolate in log(FLOPs) to avoid cliffs.
- Memory size curve: Calculon: HBM 0.9 for >= 100 MB transfers, 0.75 >= 10 MB, 0.6 >= 1 MB
  (0.3 at 100 kB is our extrapolation).
- Kernel overhead: 4 µs per launch (typical eager PyTorch dispatch + launch; replace with the
  launch overhead `gpuplan bench` measures).
- Attention: fused attention kernels reach a device- and kernel-specific share of the peak
  (FlashAttention-2/-3, cuDNN), from the device file's `[ceilings]`
  (estimate/efficiency_attention.py); 50% of the dense peak where none is measured.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.errors import InputError
from gpuplan.estimate.accuracy import LOFO_RESULTS, regime_accuracy
from gpuplan.estimate.efficiency_attention import attention_ceiling
from gpuplan.estimate.efficiency_gemm import shape_efficiency
from gpuplan.ops.op import Op
from gpuplan.specs.device import DTYPES, Device
from gpuplan.specs.framework import Framework, resolve_framework
from gpuplan.specs.workload import TrainConfig

DEFAULT_CEILING = 0.78
"""Median of the measured bf16 ceilings in the device files (mamf-finder); used for devices
without a measurement."""

_MATMUL_CURVE = ((1e8, 0.1), (1e9, 0.6), (1.6e10, 0.9), (1.28e11, 0.95))
_MEMORY_CURVE = ((1e5, 0.3), (1e6, 0.6), (1e7, 0.75), (1e8, 0.9))


def _interp_log(x: float, points: tuple[tuple[float, float], ...]) -> float:
    if x <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x <= x1:
            f = (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
            return y0 + f * (y1 - y0)
    return points[-1][1]


@dataclass(frozen=True)
class Efficiency:
    """Efficiency factors for one device; `source` says where they come from."""

    matmul_ceiling: float
    """best achievable share of the dense matmul peak for large matmuls"""
    fp8_ceiling: float | None = None
    memory_ceiling: float = 0.9
    """best achievable share of the datasheet memory bandwidth"""
    size_dependent: bool = True
    """apply the size curves (small ops reach less of the ceilings)"""
    kernel_overhead_s: float = 4e-6
    attention_ceiling: float = 0.5
    """share of the dense peak attention kernels reach (scores and values matmuls)"""
    attention_kernel: str = "fa2"
    """which attention implementation the ceiling is for (fa2, fa3, cudnn, sdpa)"""
    attention_length: bool = False
    """read the ceiling as the kernel's long-sequence rate, each call reaching less of it by
    its key loop's length (efficiency_attention.length_factor). Off: tried at stop 20 and not
    kept (leave-one-family-out p90 24.1 -> 24.9 %, benchmarks/compare_attention_length.py);
    meant for GPUs only (a CPU's attention is blocked BLAS GEMMs at the matmul rate)"""
    end_to_end: float = 1.0
    """share of the kernel ceilings that tensor-core ops (matmul and attention) realise inside a
    whole training step (sustained clocks under load, kernel gaps, framework work between
    kernels); applied to matmul-class ops only: memory-bound and vector ops keep their own
    ceilings. 1.0 for the single-op roofline"""
    gemm_quantization: bool = False
    """apply tile/wave quantization to matmuls from their shapes (estimate/efficiency_gemm.py)"""
    compute_units: int | None = None
    """SMs/CUs for the wave quantization"""
    gemm_epilogue: bool = False
    """add each GEMM's output store to its math time (estimate/efficiency_gemm.py)"""
    tp_comm_overlap: float = 0.0
    """share of tensor-parallel collectives hidden behind GEMMs (Megatron-Core
    --tp-comm-overlap, async TP); 0 = all exposed"""
    tp_comm_overlap_sp: float = 0.0
    """with sequence parallelism (Megatron-Core --tp-comm-overlap needs --sequence-parallel):
    share of the pipelined overlap realised; see tp_overlap"""
    tp_backward_overlap: bool = False
    """the backward input-gradient TP collectives run beside the weight-gradient GEMMs
    (Megatron-LM async TP all-reduce; estimate.step.tp_hidden_per_layer)"""
    param_gather_overlap: bool = False
    """ZeRO-1/2 parameter all-gather overlapped with the next step's forward (Megatron-Core
    --overlap-param-gather); False = exposed after the optimizer step"""
    grad_reduce_overlap: bool = True
    """ZeRO-0/1/2 gradient reduction bucketed and overlapped with the last micro-batch's
    backward (torch DDP, FSDP, Megatron-Core --overlap-grad-reduce); False = after it"""
    zero3_prefetch_params: float | None = None
    """ZeRO-3 parameters gathered ahead of use (DeepSpeed stage3_prefetch_bucket_size); the
    share of each layer's gather that can overlap compute is min(1, this / layer params);
    None = the whole next block (FSDP prefetch)"""
    fused_optimizer: bool = True
    """the optimizer step is one fused kernel pass (else one pass per op: estimate.step)"""
    overlap_slowdown: float = 0.0
    """share by which compute slows while overlapped communication runs beside it
    (estimate.step.overlap_slowdown); 0 = overlap is free"""
    vector_ceiling: float = 0.7
    """share of the vector (non-tensor) peak that element-wise ops reach when compute-bound
    (an assumption; element-wise ops are almost always memory-bound, so it rarely matters)"""
    source: str = ""
    measured: dict[str, float] = field(default_factory=dict)
    """measured absolute rates from a machine profile (FLOP/s per dtype, 'memory' bytes/s)"""
    measured_curves: dict[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    """per dtype, the profile's matmul size sweep as (FLOPs of one matmul, FLOP/s) points,
    non-decreasing; a measured matmul of that dtype runs at the rate interpolated at its FLOPs
    (the measured counterpart of the datasheet size curve)"""

    def compute(self, flops: float, dtype: str) -> float:
        ceiling = self.fp8_ceiling if dtype == "fp8" and self.fp8_ceiling else self.matmul_ceiling
        if not self.size_dependent:
            return ceiling
        return ceiling * _interp_log(flops, _MATMUL_CURVE) / _MATMUL_CURVE[-1][1]

    def measured_rate(self, dtype: str, flops: float) -> float:
        """Measured matmul FLOP/s of `dtype` for one matmul of `flops`: the size sweep
        interpolated in log(FLOPs), capped at the sustained rate; the sustained rate alone
        where the profile has no sweep."""
        rate = self.measured[dtype]
        curve = self.measured_curves.get(dtype)
        if not curve:
            return rate
        return min(rate, _interp_log(max(flops, 1.0), curve))

    def matmul_share(self, op: Op) -> float:
        """Share of the matmul peak `op` reaches: the size-dependent ceiling, times tile/wave
        quantization of its shape when enabled."""
        share = self.compute(op.executed_flops, op.dtype)
        if self.gemm_quantization and op.kind == "matmul":
            share *= shape_efficiency(op.shape, self.compute_units)
        return share

    def tp_overlap(self, sp: bool, tp: int) -> float:
        """Share of each TP collective hidden behind GEMMs. With SP and a stack that overlaps
        (tp_comm_overlap_sp), Transformer Engine's userbuffers split each all-gather+GEMM and
        GEMM+reduce-scatter into tp chunks exchanged around the ring, each chunk's transfer
        beside the previous chunk's GEMM: all but one chunk is hidden, (tp - 1)/tp
        (Transformer Engine docs, "Communication-GEMM overlap"; Wang et al. 2023, ASPLOS,
        "Overlap communication with dependent computation via decomposition")."""
        share = self.tp_comm_overlap
        if sp and tp > 1:
            share = max(share, self.tp_comm_overlap_sp * (tp - 1) / tp)
        return share

    def memory(self, nbytes: float) -> float:
        if not self.size_dependent:
            return self.memory_ceiling
        return self.memory_ceiling * _interp_log(nbytes, _MEMORY_CURVE) / _MEMORY_CURVE[-1][1]

    def describe(self) -> dict[str, object]:
        return {
            "matmul_ceiling": self.matmul_ceiling, "fp8_ceiling": self.fp8_ceiling,
            "memory_ceiling": self.memory_ceiling, "vector_ceiling": self.vector_ceiling,
            "attention_ceiling": self.attention_ceiling,
            "attention_kernel": self.attention_kernel,
            "attention_length_factor": self.attention_length, "end_to_end": self.end_to_end,
            "end_to_end_applies_to": "matmul and attention ops",
            "gemm_quantization": self.gemm_quantization,
            "gemm_epilogue": self.gemm_epilogue,
            "tp_comm_overlap": self.tp_comm_overlap,
            "tp_comm_overlap_sp": self.tp_comm_overlap_sp,
            "tp_backward_overlap": self.tp_backward_overlap,
            "param_gather_overlap": self.param_gather_overlap,
            "grad_reduce_overlap": self.grad_reduce_overlap,
            "zero3_prefetch_params": self.zero3_prefetch_params,
            "overlap_slowdown": self.overlap_slowdown,
            "fused_optimizer": self.fused_optimizer,
            "size_dependent": self.size_dependent,
            "kernel_overhead_s": self.kernel_overhead_s, "source": self.source,
            "measured": dict(self.measured),
        }


CPU_ATTENTION_CEILING = 1.0
"""On a CPU, fused attention (PyTorch's CPU flash-attention kernel, ATen
native/cpu/FlashAttentionKernel.cpp) runs its QKᵀ and PV blocks through the same BLAS GEMM
as a plain matmul, with the scores of a block held in cache: it reaches the matmul rate (a
mechanism, not a fit; `gpuplan bench` measures it as attention_flops_per_s)."""
CPU_ATTENTION_SOURCE = ("attention kernels at the matmul rate (CPU flash attention = blocked "
                        "BLAS GEMMs, scores in cache)")


def default_efficiency(device: Device, attention_kernel: str = "fa2") -> Efficiency:
    """Documented priors for a device (see module docstring): its measured ceilings from the
    device file, else the median of measured devices."""
    bf16 = device.ceilings.get("matmul_bf16")
    fp8 = device.ceilings.get("matmul_fp8")
    prov = device.provenance.get("ceiling.matmul_bf16")
    where = prov.source.split(" (")[0] if prov else "device file"
    src = (f"matmul ceiling {bf16:.0%} measured with mamf-finder ({where})"
           if bf16 is not None else
           f"matmul ceiling {DEFAULT_CEILING:.0%} = median of measured devices (no measurement "
           f"for {device.name})")
    attn, attn_src = attention_ceiling(device, attention_kernel)
    if device.kind == "cpu":
        attn, attn_src = CPU_ATTENTION_CEILING, CPU_ATTENTION_SOURCE
    src += (f"; size curves from Calculon (Isaev et al. SC'23); memory ceiling 90%; "
            f"{attn_src}")
    return Efficiency(matmul_ceiling=bf16 if bf16 is not None else DEFAULT_CEILING,
                      fp8_ceiling=fp8, attention_ceiling=attn, attention_kernel=attention_kernel,
                      compute_units=device.compute_units, source=src)


OVERLAP_COMPUTE_SLOWDOWN = 0.189
"""Compute slowdown while a collective runs beside it: the average over GPT and LLaMA
training kernels on 4 x A100 and 4 x H100 measured by Lee et al. 2025, "Characterizing
Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning" (arXiv:2507.03114,
abstract: 18.9% average, 40.0% maximum). A measurement, not fitted here."""

END_TO_END_BY_STACK: dict[str, float] = {"pytorch": 0.68, "megatron": 0.72,
                                         "megatron-lm-hopper": 0.62}
"""End-to-end factor for training steps (see Efficiency.end_to_end), one per stack class
(stack_class): 'megatron' = Megatron-LM / Megatron-Core / NeMo, which run
Transformer Engine or apex fused kernels under their own schedules; 'pytorch' = the PyTorch-native
stacks (FSDP/torchtitan, llm-foundry/Composer, DeepSpeed, Hugging Face); 'megatron-lm-hopper' =
Megatron-LM launched with its own defaults (profile megatron-lm) on NVIDIA GPUs with FP8 tensor
cores, where NVIDIA's performance recipes and such launches part (stop 17: four sources, FlagPerf's
Megatron-Core, FP8-LM, Fujii et al.'s 4D sweep on TSUBAME and FlagScale on H800, are 12-26 % slower
than the megatron class predicts on Hopper while NVIDIA's recipes there are 5-13 % faster; on
Ampere both sit at the megatron class; no mechanism found so far separates them, so this is a
fitted constant, not a derived one). The only fitted
constants: fitted on all calibration families at once by benchmarks/fit_training.py (each class
on its own rows: objective the median |error| over them, chosen among four candidates by
leave-one-family-out, benchmarks/compare_fit_objectives.py), with the mechanisms above in place
(GEMM output store, overlap slowdown, Megatron TP overlaps, unfused optimizers, llm-foundry's
eager element-wise kernels, fp32 gradient reduction under FSDP mixed precision, Transformer
Engine's FP8 weight caching, PyTorch's early-stopped recomputation). Fitted 2026-12-02 (stop
12) on the 62 calibration families on modelled devices; refitted at stop 15 on 116 of the 120
(Megatron 0.74 -> 0.76 once the MLPerf submissions of data19 joined; the four on devices the
catalog does not model are scored, not fitted: benchmarks/training_runs.NOT_FITTED_FAMILIES);
refitted at stop 16 (Megatron 0.76 -> 0.74) once sequence parallelism's exposed backward
all-gathers (estimate.step.SP_BACKWARD_GATHER) joined the mechanisms; unchanged by the stop-17
hold-outs' promotion (134 families); for PyTorch 0.66 -> 0.68 once the third stop-17 set joined
(141 families: FlagPerf's PaddlePaddle cases, timed as the deepspeed profile, 7-13 % too slow at
0.66) and back to 0.66 once the fourth did (143 families: torchao's float8nocompile tables,
40-96 % too fast), the row median stepping between two grid points as families join; for
PyTorch 0.66 -> 0.68 at stop 18 once torchtitan's per-op selective checkpointing was timed as
it runs (estimate.sac: every second matmul rerun; the selective rows of torchtitan-class
stacks became slower, so the factor that centres the class moved up); PyTorch 0.68 -> 0.70 and
Megatron 0.74 -> 0.72 at stop 22 once the first stop-22 hold-outs joined (151 families; Hagemann
et al.'s 401-trial layout sweep, 16.9 % too fast at 0.74, is half of the Megatron class's rows,
and llm-foundry's large-scale H100 and MosaicML's 2023-04 A100 rows sit below the PyTorch
class), Megatron back to 0.74 once the second stop-22 set joined (154 families: the row median
8.64 % at 0.74 against 8.65 % at 0.72, a near-tie the objective breaks by the median alone, at a
p90 of 33.8 % against 30.6 %; the row median still leaves the lowest row errors among the four
objectives, benchmarks/results/fit-objectives-2026-12-04-stop22.txt); Megatron 0.74 -> 0.72
at stop 23 once GB200 NVL72 jobs kept their NVLink domain (specs.cluster.scale_up_group: TP 8
and the data-parallel groups had run over the network between 4-GPU trays, which had hidden
that the GB200 rows' compute is timed 7-29 % too fast), megatron-lm-hopper 0.60 -> 0.62 once
the first stop-23 hold-outs joined (Kwai's Megatron-LM runs on H800, 14 % too slow at 0.60),
PyTorch 0.70 -> 0.68 once the second did (torchtitan's 405B, Open-Llama and Olmo 3, 14-22 % too
fast at 0.70); the
megatron-lm-hopper class split off at stop 17, judged
by leave-one-family-out on calibration (benchmarks/results/
split-megatron-lm-hopper-2026-12-02-stop17.txt: median over families 9.30 -> 8.96 %, pooled
left-out rows 7.54 / 23.71 -> 7.34 / 22.73 %; a class of its own for megatron-lm on every device,
or one per class and GPU generation, did worse; still the best on the 141 families after the
third stop-17 set, ...-stop17-after-data27to28.txt: 9.14 -> 8.98 %, 8.21 / 24.05 -> 7.77 / 23.18 %,
and on the 143 after the fourth, ...-after-data29to30.txt: 9.49 -> 9.22 %, 8.17 / 25.37 -> 7.70 /
23.60 %);
with any one family left out the first two move by at most 0.02 and the third by 0.04
(leave-one-family-out table in the
README)."""
TRAINING_END_TO_END = END_TO_END_BY_STACK["pytorch"]
"""the factor of a job whose stack is not known (training_efficiency without a framework)"""


HELD_OUT_ERROR_BY_STACK: dict[str, tuple[float, float, int]] = {
    "pytorch": (9.6, 24.5, 467), "megatron": (8.8, 31.8, 842),
    "megatron-lm-hopper": (7.8, 21.3, 38)}
"""Per stack class: (median, 90th percentile) |error| % of tokens/s, and the row count, of the
published calibration runs each predicted with its own family (source x device) left out of
the end-to-end fit (`benchmarks/validate_training.py --lofo`, accuracy.LOFO_RESULTS; families
on device configurations the catalog does not model excluded): what a run from a source the
model has not seen can expect."""
HELD_OUT_ERROR_SOURCE = ("leave-one-family-out over the published training runs of the "
                         f"calibration set ({LOFO_RESULTS})")
FRESH_HOLDOUT_ERROR: tuple[float, float, int] = (12.0, 53.5, 669)
"""(median, p90) |error| % of tokens/s and the run count of the A100/H100 runs in the fresh
hold-out sets scored since stop 14, each scored once with the model of its day (stop 14:
benchmarks/results/training-validation-data1{3,4,5}-2026-12-02-stop14-rows.txt; stop 15:
...-data1{6,7,8,9}-2026-12-02-stop15-rows.txt; stop 16:
...-data2{0,1}-2026-12-02-stop16-rows.txt; stop 17: ...-data22to24-2026-12-02-stop17-rows.txt,
6 A100 rows of its 13, ...-data25to26-2026-12-02-stop17-rows.txt, all 31, and
...-data27to28-2026-12-02-stop17-rows.txt, all 25, and ...-data29to30-2026-12-02-stop17-rows.txt,
all 15; stop 18: ...-data31-2026-12-02-stop18-rows.txt, both; stop 19:
...-data32-2026-12-03-stop19-rows.txt, all 4; stop 21: ...-data33-2026-12-04-stop21-rows.txt, all
5; stop 22: ...-data34to35-2026-12-04-stop22-rows.txt, all 448, 401 of them one family,
Hagemann et al. 2023's layout sweep, and ...-data36to37-2026-12-04-stop22-rows.txt, its 1 H100
row of 4; stop 23: ...-data38to40-2026-12-04-stop23-rows.txt, its 6 A100/H100 rows of 22, and
...-data41to43-2026-12-04-stop23-rows.txt, all 9; stop 24: ...-data44to45-2026-12-04-stop24-rows.txt,
its 11 A100/H100 rows of 19; 9.2 / 47.5 % over the 268 without that family): its tail is longer than the
leave-one-family-out figure's, because new sources bring stacks the calibration set lacks;
printed beside it so neither is read alone."""


def fp8_generation_nvidia(device: Device) -> bool:
    """An NVIDIA GPU with FP8 tensor cores (Hopper, Ada, Blackwell): a dense fp8 peak in its
    device file."""
    return device.vendor == "NVIDIA" and device.kind == "gpu" and device.peak("fp8") is not None


def stack_class(profile_class: str, device: Device) -> str:
    """The end-to-end class (END_TO_END_BY_STACK) of a stack whose profile says `profile_class`
    (Framework.end_to_end_class), on `device`: 'megatron-lm' (Megatron-LM's own defaults) is
    'megatron-lm-hopper' on NVIDIA GPUs with FP8 tensor cores (the calibration rows are H100,
    H800 and H200) and 'megatron' elsewhere; the others are their own."""
    if profile_class == "megatron-lm":
        return "megatron-lm-hopper" if fp8_generation_nvidia(device) else "megatron"
    return profile_class


def held_out_accuracy(cls: str, regime: str | None = None) -> dict[str, object]:
    """The step-time error a user should expect for a stack of `cls`
    (HELD_OUT_ERROR_BY_STACK), as printed with every training estimate; with `regime`
    (estimate.accuracy.training_regime of the job) also that of the published runs in it."""
    median, p90, rows = HELD_OUT_ERROR_BY_STACK[cls]
    f_med, f_p90, f_rows = FRESH_HOLDOUT_ERROR
    extra = {"regime": regime_accuracy(regime)} if regime is not None else {}
    return {**extra, "stack_class": cls, "median_abs_error_pct": median,
            "p90_abs_error_pct": p90, "rows": rows, "basis": HELD_OUT_ERROR_SOURCE,
            "fresh_holdout": {"median_abs_error_pct": f_med, "p90_abs_error_pct": f_p90,
                              "rows": f_rows, "basis": "A100/H100 runs of the stop-14 to stop-24 "
                              "hold-out sets, every stack, each scored once (README)"}}


def training_efficiency(device: Device, attention_kernel: str = "fa2",
                        end_to_end: float | None = None) -> Efficiency:
    """Efficiency for whole training steps: the device's measured ceilings, GEMM tile/wave
    quantization, the attention kernel's measured ceiling, and the fitted end-to-end factor."""
    base = default_efficiency(device, attention_kernel)
    e2e = TRAINING_END_TO_END if end_to_end is None else end_to_end
    return replace(base, end_to_end=e2e, gemm_quantization=True, gemm_epilogue=True,
                   overlap_slowdown=OVERLAP_COMPUTE_SLOWDOWN,
                   source=base.source + f"; GEMM tile/wave quantization on "
                   f"{device.compute_units or '?'} SMs; GEMM output store after the math; "
                   f"compute {OVERLAP_COMPUTE_SLOWDOWN:.1%} slower "
                   "beside overlapped collectives (Lee et al. 2025); end-to-end "
                   f"{e2e:.0%} fitted on the calibration families (benchmarks/fit_training.py)")


def framework_efficiency(device: Device, framework: Framework,
                         end_to_end: float | Mapping[str, float] | None = None) -> Efficiency:
    """Training efficiency as `framework` runs: its attention kernel's measured ceiling on
    `device`, its communication overlaps and its stack class's end-to-end factor
    (END_TO_END_BY_STACK; `end_to_end` overrides it: one value, or one per class)."""
    table = end_to_end if isinstance(end_to_end, Mapping) else END_TO_END_BY_STACK
    cls = stack_class(framework.end_to_end_class, device)
    e2e = end_to_end if isinstance(end_to_end, (int, float)) else table[cls]
    eff = training_efficiency(device, framework.attention_kernel, e2e)
    return replace(eff, tp_comm_overlap=framework.tp_comm_overlap,
                   tp_comm_overlap_sp=framework.tp_comm_overlap_sp,
                   fused_optimizer=framework.fused_optimizer,
                   tp_backward_overlap=framework.tp_backward_overlap,
                   param_gather_overlap=framework.param_gather_overlap,
                   grad_reduce_overlap=framework.grad_reduce_overlap,
                   zero3_prefetch_params=framework.zero3_prefetch_params,
                   source=eff.source + f" for the {cls} stack class; "
                   f"framework profile {framework.name}")


Retime = Callable[[TrainConfig], tuple[TrainConfig, Efficiency]]
"""A layout -> (the job as its stack runs it, that stack's efficiency)."""


def auto_retime(device: Device, job: TrainConfig, overlap: str | None = None,
                attention_kernel: str | None = None) -> Retime:
    """For a job whose stack is not named: each layout timed with the profile its own layout
    implies (specs.framework.auto_framework), from the kernels the user stated in `job` (and
    the overlaps, `overlap`: Framework.with_overlap; the attention kernel, `attention_kernel`:
    Framework.with_attention_kernel); so a searched layout re-run by `gpuplan train` gets the
    same numbers."""
    def retime(cfg: TrainConfig) -> tuple[TrainConfig, Efficiency]:
        fw = resolve_framework(None, cfg).with_overlap(overlap) \
            .with_attention_kernel(attention_kernel)
        own = replace(cfg, fused=job.fused, grad_dtype=job.grad_dtype)
        return fw.apply(own, named=False), framework_efficiency(device, fw)
    return retime


def ideal_efficiency() -> Efficiency:
    """100% of every datasheet peak, no overheads: the roofline as a pure bound."""
    return Efficiency(matmul_ceiling=1.0, fp8_ceiling=1.0, memory_ceiling=1.0,
                      size_dependent=False, kernel_overhead_s=0.0, vector_ceiling=1.0,
                      attention_ceiling=1.0,
                      source="ideal: 100% of datasheet peaks (a bound, not a prediction)")


def _positive(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InputError(f"profile {key}", value, "a positive number")
    return float(value)


def efficiency_from_profile(profile: Mapping[str, Any], device: Device,
                            base: Efficiency | None = None) -> Efficiency:
    """Efficiency whose `measured` rates come from a machine profile (`gpuplan bench`): the
    sustained matmul FLOP/s per dtype, the memory bandwidth and the launch overhead. Dtypes
    the profile lacks keep `base`'s datasheet x ceiling model (default: default_efficiency).
    Pure: the caller reads the file."""
    flops = profile.get("matmul_flops_per_s")
    if not isinstance(flops, Mapping) or not flops:
        raise InputError("profile matmul_flops_per_s", flops, "{dtype: FLOP/s} with >= 1 dtype")
    measured = {str(dt): _positive(f"matmul_flops_per_s.{dt}", v)
                for dt, v in flops.items() if dt in DTYPES}
    bw = _positive("memory_bw_bytes_per_s", profile.get("memory_bw_bytes_per_s"))
    measured["memory"] = bw
    if profile.get("attention_flops_per_s"):  # fused attention, measured by `gpuplan bench`
        measured["attention"] = _positive("attention_flops_per_s",
                                          profile["attention_flops_per_s"])
    launch = profile.get("launch_overhead_s")
    base = base or default_efficiency(device)
    curves = {dt: c for dt in measured if (c := size_curve(profile, dt))}
    rates = ", ".join(f"{dt} {v / 1e12:.3g} TFLOP/s" for dt, v in measured.items()
                      if dt != "memory")
    where = profile.get("path") or "profile"
    src = (f"measured machine profile {where} ({profile.get('device', '?')}, "
           f"{profile.get('date', '?')}): matmul {rates}, memory {bw / 1e9:.3g} GB/s")
    if launch:
        src += f", launch {_positive('launch_overhead_s', launch) * 1e6:.3g} µs"
    src += f"; applied to {device.name}; other factors: {base.source}"
    if curves:
        src += "; matmuls at the rate of their size in the measured sweep"
    return replace(base, measured=measured, measured_curves=curves, source=src,
                   kernel_overhead_s=float(launch) if launch else base.kernel_overhead_s)


def size_curve(profile: Mapping[str, Any], dtype: str) -> tuple[tuple[float, float], ...]:
    """The square shapes of a profile's matmul sweep for `dtype` as (FLOPs, median FLOP/s),
    made non-decreasing in size (a larger matmul is never slower per FLOP than a smaller one
    that the same library ran faster: noise, not physics); () when the profile has none."""
    sizes = (profile.get("matmul") or {}).get(dtype, {})
    sizes = sizes.get("sizes") if isinstance(sizes, Mapping) else None
    if not isinstance(sizes, list):
        return ()
    pts = sorted((float(p["flops"]), float(p["flops_per_s"])) for p in sizes
                 if isinstance(p, Mapping) and _is_pos(p.get("m"))
                 and p.get("m") == p.get("n") == p.get("k")
                 and _is_pos(p.get("flops")) and _is_pos(p.get("flops_per_s")))
    out: list[tuple[float, float]] = []
    for f, r in pts:
        out.append((f, max(r, out[-1][1]) if out else r))
    return tuple(out) if len(out) >= 2 else ()


def _is_pos(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
