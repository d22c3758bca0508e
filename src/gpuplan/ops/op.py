"""The operator list: what a workload computes and moves, op by op.

An Op is one kernel-sized piece of work with its FLOPs and bytes for ONE execution; `count`
says how many times it runs (e.g. once per layer), so a 126-layer model is as cheap to analyse
as a 2-layer one. Totals multiply by `count`.

Conventions: FLOPs count a multiply-add as 2. Bytes are compulsory traffic: each input read
once and each output written once per execution (no cache reuse, no re-reads). `flops` is what
the kernel executes; `useful_flops` excludes work thrown away (masked half of causal scores).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Literal

OpKind = Literal[
    "matmul", "attention", "conv", "elementwise", "norm", "softmax", "embedding", "reduction",
    "loss", "copy", "optimizer", "communication",
]
Phase = Literal["forward", "backward", "optimizer", "prefill", "decode"]

MATMUL_KINDS = frozenset({"matmul", "attention", "conv"})
"""Kinds whose FLOPs are 'model FLOPs' (tensor-core work): the 6·N·D / MFU convention."""


@dataclass(frozen=True, slots=True)
class Op:
    """One operator, per execution; totals are per-execution values x `count`."""

    name: str
    """dotted name, e.g. 'layers.attn.q_proj' or 'layers.attn.q_proj.grad_input'"""
    kind: OpKind
    flops: float
    """FLOPs executed by one execution (2 per multiply-add)"""
    bytes_read: float
    bytes_written: float
    dtype: str
    """compute dtype (selects the device peak): fp32, bf16, fp16, fp8, int8..."""
    phase: Phase
    component: str = "other"
    """embedding, attention, mlp, moe, norm, head, loss, optimizer, other"""
    count: int = 1
    """how many times it runs per step (per layer x layers, per expert x experts...)"""
    saved_bytes: float = 0.0
    """bytes this op keeps alive for backward (per execution)"""
    useful_flops: float | None = None
    """FLOPs that count as useful work; None = all of `flops` (causal masking halves scores)"""
    layer: str | None = None
    """None for once-only ops; for ops repeated in every layer 'layer' (tracer) or the block
    kind 'layer.attention', 'layer.attention.window', 'layer.mlp', 'layer.moe' (builders)"""
    shape: str = ""
    """human-readable shape, e.g. '8192x4096 @ 4096x4096'"""
    fusable: bool = False
    """element-wise/norm op a compiler can fuse into a neighbour (see ops.passes)"""
    kernels: int = 1
    """kernel launches per execution (an unfused chain written as one op launches several)"""
    skips_masked: bool = False
    """the kernel skips fully masked tiles (FlashAttention with a causal or window mask), so it
    executes about `useful_flops`, not `flops`"""
    recompute_tail: bool = False
    """forward op of a layer's tail after its last op that saves a tensor for backward (the
    last linear, which saves only its input, and what follows it): under full recomputation
    with PyTorch's non-reentrant checkpoint it is not run again (early stop)"""
    meta: dict[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte moved (Williams et al. 2009)."""
        return self.flops / self.bytes if self.bytes else float("inf")

    @property
    def executed_flops(self) -> float:
        """FLOPs the kernel really performs (what timing uses)."""
        return self.useful if self.skips_masked else self.flops

    @property
    def useful(self) -> float:
        return self.flops if self.useful_flops is None else self.useful_flops

    @property
    def total_flops(self) -> float:
        return self.flops * self.count

    @property
    def total_useful_flops(self) -> float:
        return self.useful * self.count

    @property
    def total_bytes(self) -> float:
        return self.bytes * self.count

    @property
    def total_saved_bytes(self) -> float:
        return self.saved_bytes * self.count

    @property
    def per_layer(self) -> bool:
        return self.layer is not None and self.layer.startswith("layer")

    def scaled(self, count: int) -> Op:
        return replace(self, count=self.count * count)


@dataclass(frozen=True)
class OpList:
    """An ordered list of ops with sums and groupings."""

    ops: tuple[Op, ...]

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __add__(self, other: OpList) -> OpList:
        return OpList(self.ops + other.ops)

    def filter(self, pred: Callable[[Op], bool]) -> OpList:
        return OpList(tuple(o for o in self.ops if pred(o)))

    def phase(self, *phases: str) -> OpList:
        return self.filter(lambda o: o.phase in phases)

    def flops(self, matmul_only: bool = False) -> float:
        """Executed FLOPs; matmul_only keeps tensor-core work (the MFU/6ND convention)."""
        return sum(o.total_flops for o in self.ops if not matmul_only or o.kind in MATMUL_KINDS)

    def useful_flops(self, matmul_only: bool = False) -> float:
        return sum(o.total_useful_flops for o in self.ops
                   if not matmul_only or o.kind in MATMUL_KINDS)

    def bytes(self) -> float:
        return sum(o.total_bytes for o in self.ops)

    def saved_bytes(self) -> float:
        return sum(o.total_saved_bytes for o in self.ops)

    def group(self, key: Callable[[Op], str] | str) -> dict[str, OpList]:
        """Group by an attribute name ('kind', 'component', 'phase', 'layer') or a function."""
        fn: Callable[[Op], str] = (lambda o: str(getattr(o, key))) if isinstance(key, str) else key
        groups: dict[str, list[Op]] = defaultdict(list)
        for o in self.ops:
            groups[fn(o)].append(o)
        return {k: OpList(tuple(v)) for k, v in groups.items()}

    def totals_by(self, key: Callable[[Op], str] | str,
                  value: Callable[[OpList], float] | None = None) -> dict[str, float]:
        value = value or (lambda ol: ol.flops())
        return {k: value(v) for k, v in self.group(key).items()}

    @staticmethod
    def of(ops: Iterable[Op]) -> OpList:
        return OpList(tuple(ops))
