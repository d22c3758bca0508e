"""Achievable fractions of the datasheet peaks: the efficiency factors every estimate states.

Defaults are documented priors, replaceable by a measured machine profile (`gpuplan bench`):

- Matmul ceiling per device: best achievable bf16/fp8 matmul share of the dense peak, measured
  with mamf-finder (stas00/ml-engineering, "Maximum Achievable Matmul FLOPS comparison table",
  @744d01e 2026-08-22).
- Matmul size curve: Calculon's A100/H100 system files (Isaev et al. SC'23): 0.95 of peak for
  ops of >= 128 GFLOP, 0.9 >= 16, 0.6 >= 1, 0.1 below; we scale it so the largest ops reach the
  device ceiling above and interpolate in log(FLOPs) to avoid cliffs.
- Memory size curve: Calculon: HBM 0.9 for >= 100 MB transfers, 0.75 >= 10 MB, 0.6 >= 1 MB
  (0.3 at 100 kB is our extrapolation).
- Kernel overhead: 4 µs per launch (typical eager PyTorch dispatch + launch; replace with the
  launch overhead `gpuplan bench` measures).
- Attention: fused attention kernels reach less of the peak than large GEMMs: FlashAttention-2
  50-73% of A100 peak forward and less backward (Dao 2023, §4.1); on H100 FlashAttention-2
  ~35-40% and FlashAttention-3 ~75% (Shah et al. 2024). Prior: 50% of the dense peak.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplan.errors import InputError
from gpuplan.specs.device import DTYPES, Device

MAMF_SOURCE = ("Bekman, Machine Learning Engineering (github.com/stas00/ml-engineering), "
               "mamf-finder maximum achievable matmul FLOPS table @744d01e (2026-08-22)")

# Best measured dense matmul share of peak: (bf16, fp8) per catalog device.
MATMUL_CEILING: dict[str, tuple[float, float | None]] = {
    "A100-SXM-40GB": (0.869, None), "A100-SXM-80GB": (0.869, None),
    "A100-PCIE-40GB": (0.811, None), "A100-PCIE-80GB": (0.811, None),
    "H100-SXM": (0.803, 0.709), "H800": (0.803, 0.709), "H200": (0.803, 0.734),
    "B200": (0.776, 0.763), "GB200": (0.729, 0.723),
    "MI300X": (0.514, None), "MI325X": (0.604, None),
}
DEFAULT_CEILING = 0.78
"""Median of the measured bf16 ceilings above; used for devices without a measurement."""

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
    end_to_end: float = 1.0
    """share of the kernel ceilings a whole training step realises (real shapes, clocks under
    sustained load, kernel gaps, framework work between kernels); 1.0 for single-op roofline"""
    vector_ceiling: float = 0.7
    """share of the vector (non-tensor) peak that element-wise ops reach when compute-bound
    (an assumption; element-wise ops are almost always memory-bound, so it rarely matters)"""
    source: str = ""
    measured: dict[str, float] = field(default_factory=dict)
    """measured absolute rates from a machine profile (FLOP/s per dtype, 'memory' bytes/s)"""

    def compute(self, flops: float, dtype: str) -> float:
        ceiling = self.fp8_ceiling if dtype == "fp8" and self.fp8_ceiling else self.matmul_ceiling
        if not self.size_dependent:
            return ceiling
        return ceiling * _interp_log(flops, _MATMUL_CURVE) / _MATMUL_CURVE[-1][1]

    def memory(self, nbytes: float) -> float:
        if not self.size_dependent:
            return self.memory_ceiling
        return self.memory_ceiling * _interp_log(nbytes, _MEMORY_CURVE) / _MEMORY_CURVE[-1][1]

    def describe(self) -> dict[str, object]:
        return {
            "matmul_ceiling": self.matmul_ceiling, "fp8_ceiling": self.fp8_ceiling,
            "memory_ceiling": self.memory_ceiling, "vector_ceiling": self.vector_ceiling,
            "attention_ceiling": self.attention_ceiling, "end_to_end": self.end_to_end,
            "size_dependent": self.size_dependent,
            "kernel_overhead_s": self.kernel_overhead_s, "source": self.source,
            "measured": dict(self.measured),
        }


def default_efficiency(device: Device) -> Efficiency:
    """Documented priors for a catalog device (see module docstring)."""
    bf16, fp8 = MATMUL_CEILING.get(device.name, (DEFAULT_CEILING, None))
    measured = device.name in MATMUL_CEILING
    src = (f"matmul ceiling {bf16:.0%} measured ({MAMF_SOURCE})" if measured
           else f"matmul ceiling {bf16:.0%} = median of measured devices (no measurement for "
                f"{device.name})")
    src += ("; size curves from Calculon (Isaev et al. SC'23); memory ceiling 90%; attention "
            "kernels 50% of peak (FlashAttention-2/3 papers)")
    return Efficiency(matmul_ceiling=bf16, fp8_ceiling=fp8, source=src)


TRAINING_END_TO_END = 0.64
"""End-to-end factor for training steps: fitted by benchmarks/fit_training.py on the train
half (93 rows) of the published training runs it reads, 2026-11-30; median |error| 6.9% there and
8.0% on the held-out half. Physically: sustained clocks, real GEMM shapes, kernel gaps and
framework work between kernels, relative to the best-shape GEMM microbenchmark (MAMF)."""
TRAINING_ATTENTION_CEILING = 0.5
"""Fitted with the factor above (grid 0.2-0.6); equal to the FlashAttention-2 prior."""


def training_efficiency(device: Device) -> Efficiency:
    """Efficiency for whole training steps: the roofline priors with the end-to-end factor
    and attention ceiling fitted on the train half of published training runs
    (benchmarks/fit_training.py) and checked on the other half."""
    base = default_efficiency(device)
    return replace(base, end_to_end=TRAINING_END_TO_END,
                   attention_ceiling=TRAINING_ATTENTION_CEILING,
                   source=base.source + f"; end-to-end {TRAINING_END_TO_END:.0%} and attention "
                   f"{TRAINING_ATTENTION_CEILING:.0%} fitted on published training runs")


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
    launch = profile.get("launch_overhead_s")
    base = base or default_efficiency(device)
    rates = ", ".join(f"{dt} {v / 1e12:.3g} TFLOP/s" for dt, v in measured.items()
                      if dt != "memory")
    where = profile.get("path") or "profile"
    src = (f"measured machine profile {where} ({profile.get('device', '?')}, "
           f"{profile.get('date', '?')}): matmul {rates}, memory {bw / 1e9:.3g} GB/s")
    if launch:
        src += f", launch {_positive('launch_overhead_s', launch) * 1e6:.3g} µs"
    src += f"; applied to {device.name}; other factors: {base.source}"
    return replace(base, measured=measured, source=src,
                   kernel_overhead_s=float(launch) if launch else base.kernel_overhead_s)
