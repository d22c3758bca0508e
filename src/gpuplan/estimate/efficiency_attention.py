"""Attention kernel efficiency by device and implementation.

Fused attention kernels reach a device- and kernel-specific share of the dense peak, measured
in the kernel papers and written as sourced `[ceilings]` in the device files:
`attention_fa2` (FlashAttention-2, Dao 2023), `attention_fa3` (FlashAttention-3, Shah et al.
2024; Hopper only) and `attention_cudnn` (cuDNN fused attention, as Transformer Engine uses).
A kernel the device has no measurement for falls back along KERNEL_FALLBACK (FA3 and cuDNN
to FA2), and a device without any to ATTENTION_PRIOR. `fa1` (FlashAttention-1's CUDA kernels) is
FA1_SPEED_VS_FA2 of the device's FA2 ceiling unless the device file measures it.
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.device import Device
from gpuplan.specs.framework import ATTENTION_KERNELS as KERNELS

KERNEL_FALLBACK: dict[str, tuple[str, ...]] = {
    "fa2": ("fa2",), "sdpa": ("fa2",), "fa3": ("fa3", "cudnn", "fa2"),
    "cudnn": ("cudnn", "fa2"),
}
"""PyTorch SDPA dispatches to FlashAttention-2 kernels on CUDA (torch.nn.attention docs)."""
FA1_SPEED_VS_FA2 = 0.5
"""FlashAttention-1's speed as a share of FlashAttention-2's: Dao 2023 (arXiv:2307.08691,
abstract) reports FA2 'around 2x speedup compared to FlashAttention' on A100, FA1 at 25-40 % of
the peak. Neither uses Hopper's asynchronous tensor-core instructions, so the ratio is assumed to
hold on Hopper. Not applied to the Triton FlashAttention of that generation (llm-foundry's 2023
`attn_impl: triton`): timing llm-foundry's 2023 benchmark tables with it made their A100 rows
6-8 points worse by leave-one-family-out (stop 19, README), so that kernel's speed is not known."""
ATTENTION_KEY_OVERHEAD = {"forward": 178.0, "backward": 287.0}
"""A fused attention kernel's fixed work per query block, in keys: one call reaches
keys / (keys + overhead) of its long-sequence rate, where `keys` is the key loop of a query
row in that call (loading Q, the softmax epilogue and writing O are paid once per row block,
the loop once per key). Fitted to the Triton FlashAttention-2 tutorial's published
measurements (triton-lang.org, getting-started/tutorials/06-fused-attention, batch 4, 32 heads,
head dim 64, fp16; read 2026-12-03): forward non-causal N_CTX 1k-16k 141-167 TFLOP/s gives 178
(each point within 3 %); causal backward 1k-4k 60-88 TFLOP/s gives 372 with keys = N/2, i.e.
287 + the causal diagonal below. These set the curve's shape only; a device's ceiling
(`attention_*` in the device files) is its long-sequence rate."""
CAUSAL_DIAGONAL_KEYS = 85.0
"""Extra keys per query row that a causal kernel spends on the diagonal tiles it computes
whole and masks: the tutorial's causal forward (1k-16k, 112-164 TFLOP/s) fits 263 with
keys = N/2, 85 above the non-causal 178 (half a 128-row tile, 64, is the geometric part)."""
ATTENTION_PRIOR = 0.5
"""Share of the dense peak for devices without a measurement: the middle of FlashAttention-2's
50-73% on A100 (Dao 2023) discounted for the causal backward (an assumption)."""


def attention_ceiling(device: Device, kernel: str) -> tuple[float, str]:
    """(share of the dense peak, which measurement) for `kernel` on `device`."""
    if kernel not in KERNELS:
        raise InputError("attention kernel", kernel, f"one of {', '.join(KERNELS)}")
    if kernel == "fa1" and device.ceilings.get("attention_fa1") is None:
        fa2, src = attention_ceiling(device, "fa2")
        return (fa2 * FA1_SPEED_VS_FA2,
                f"attention fa1 {fa2 * FA1_SPEED_VS_FA2:.0%} of peak = {FA1_SPEED_VS_FA2:g} x "
                f"FA2's ({src}; Dao 2023: FA2 about 2x FA1)")
    chain = KERNEL_FALLBACK.get(kernel, (kernel,))
    for k in chain:
        share = device.ceilings.get(f"attention_{k}")
        if share is not None:
            prov = device.provenance.get(f"ceiling.attention_{k}")
            where = prov.source.split(" (")[0] if prov else "device file"
            return share, f"attention {k} {share:.0%} of peak ({where})"
    return ATTENTION_PRIOR, f"attention {ATTENTION_PRIOR:.0%} prior (no {kernel} measurement " \
                            f"for {device.name})"


def length_factor(keys: float, causal: bool, backward: bool) -> float:
    """Share of a fused attention kernel's long-sequence rate that one call whose query rows
    each loop over `keys` keys reaches (ATTENTION_KEY_OVERHEAD); 1.0 when `keys` is unknown."""
    if keys <= 0:
        return 1.0
    overhead = ATTENTION_KEY_OVERHEAD["backward" if backward else "forward"]
    return keys / (keys + overhead + (CAUSAL_DIAGONAL_KEYS if causal else 0.0))
