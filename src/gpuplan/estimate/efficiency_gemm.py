"""GEMM shape efficiency: tile and wave quantization on the device's SMs.

A GEMM's M x N output is cut into tiles, one thread block each; the blocks run in waves of
one per SM. Partial tiles (M or N not a multiple of the tile) and a partial last wave leave
tensor cores idle (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication Background",
sections "Tile Quantization" and "Wave Quantization"). cuBLAS picks among several tile shapes;
we take the best of the common CUTLASS/cuBLAS tiles below, so the factor is the share of the
launched tile-slots that hold useful work. The measured matmul ceiling (mamf-finder's best
shape, in the device file) already has full waves, so this factor multiplies it.

Epilogue: each tile's mainloop accumulates in registers; the epilogue then writes the M x N
output to memory after the tile's last K step (CUTLASS "Efficient GEMM in CUDA": mainloop,
then epilogue). Within a wave every SM writes its tiles at about the same time, so the store
is not hidden behind the tile's own math: a GEMM takes its math time plus M x N output bytes
at the memory bandwidth. Relative to the math it costs (peak x ceiling / bandwidth) / K, which
is ~240/K on H100 and ~130/K on A100: small-K GEMMs (small hidden sizes, TP shards) lose more
on H100, whose math grew 3x over A100 but its bandwidth 1.6x. The measured ceiling comes from
large-K shapes where the store is ~1-3%, so the term is added to it, not divided out.
"""

from __future__ import annotations

import math
import re

TILES: tuple[tuple[int, int], ...] = ((128, 256), (256, 128), (128, 128), (64, 128))
"""Output tile shapes (rows x cols) cuBLAS/CUTLASS use for 16-bit GEMMs on Ampere/Hopper."""

_SHAPE = re.compile(r"^\s*(\d+)x(\d+)\s*@\s*(\d+)x(\d+)")


def gemm_dims(shape: str) -> tuple[int, int, int] | None:
    """(M, N, K) of an 'MxK @ KxN' shape string (ops/blocks.py writes them so), else None."""
    m = _SHAPE.match(shape)
    if not m:
        return None
    rows, k, _, cols = (int(g) for g in m.groups())
    return rows, cols, k


def quantization_efficiency(m: int, n: int, sms: int) -> float:
    """Best share of launched tile-slots doing useful work over the candidate tiles:
    useful area / (waves x SMs x tile area)."""
    if m <= 0 or n <= 0 or sms <= 0:
        return 1.0
    best = 0.0
    for tm, tn in TILES:
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        waves = math.ceil(tiles / sms)
        best = max(best, (m * n) / (waves * sms * tm * tn))
    return min(1.0, best)


def output_elements(shape: str) -> int | None:
    """M x N: the elements a GEMM's epilogue writes (None when the shape is unknown)."""
    dims = gemm_dims(shape)
    return dims[0] * dims[1] if dims else None


def shape_efficiency(shape: str, sms: int | None) -> float:
    """Quantization factor of one matmul op from its shape string; 1.0 when unknown."""
    dims = gemm_dims(shape)
    if dims is None or not sms:
        return 1.0
    return quantization_efficiency(dims[0], dims[1], sms)
