"""Attention kernel efficiency by device and implementation.

Fused attention kernels reach a device- and kernel-specific share of the dense peak, measured
in the kernel papers and written as sourced `[ceilings]` in the device files:
`attention_fa2` (FlashAttention-2, Dao 2023), `attention_fa3` (FlashAttention-3, Shah et al.
2024; Hopper only) and `attention_cudnn` (cuDNN fused attention, as Transformer Engine uses).
A kernel the device has no measurement for falls back along KERNEL_FALLBACK (FA3 and cuDNN
to FA2), and a device without any to ATTENTION_PRIOR.
"""

from __future__ import annotations

from gpuplan.errors import InputError
from gpuplan.specs.device import Device

KERNELS = ("fa2", "fa3", "cudnn", "sdpa")
KERNEL_FALLBACK: dict[str, tuple[str, ...]] = {
    "fa2": ("fa2",), "sdpa": ("fa2",), "fa3": ("fa3", "cudnn", "fa2"),
    "cudnn": ("cudnn", "fa2"),
}
"""PyTorch SDPA dispatches to FlashAttention-2 kernels on CUDA (torch.nn.attention docs)."""
ATTENTION_PRIOR = 0.5
"""Share of the dense peak for devices without a measurement: the middle of FlashAttention-2's
50-73% on A100 (Dao 2023) discounted for the causal backward (an assumption)."""


def attention_ceiling(device: Device, kernel: str) -> tuple[float, str]:
    """(share of the dense peak, which measurement) for `kernel` on `device`."""
    if kernel not in KERNEL_FALLBACK:
        raise InputError("attention kernel", kernel, f"one of {', '.join(KERNELS)}")
    for k in KERNEL_FALLBACK[kernel]:
        share = device.ceilings.get(f"attention_{k}")
        if share is not None:
            prov = device.provenance.get(f"ceiling.attention_{k}")
            where = prov.source.split(" (")[0] if prov else "device file"
            return share, f"attention {k} {share:.0%} of peak ({where})"
    return ATTENTION_PRIOR, f"attention {ATTENTION_PRIOR:.0%} prior (no {kernel} measurement " \
                            f"for {device.name})"
