"""Op-list passes: kernel fusion of element-wise chains.

A compiler (torch.compile/Inductor, XLA, TensorRT) fuses a run of element-wise, norm and softmax
ops, and the element-wise epilogue of a matmul (bias + GELU, the SwiGLU product), into single
kernels: the intermediate tensors are never written to or read back from memory. The pass merges
each run of adjacent fusable ops of the same phase, layer and repeat count, optionally into the
matmul before it, and reports the bytes each chain saves. An intermediate that backward needs
(saved_bytes > 0) is still written, so training forward saves less than inference.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuplan.ops.op import Op, OpList

FUSABLE_KINDS = frozenset({"elementwise", "norm", "softmax"})


@dataclass(frozen=True)
class FusedChain:
    """A run of ops merged into one kernel."""

    names: tuple[str, ...]
    phase: str
    count: int
    bytes_before: float
    """per execution"""
    bytes_after: float
    kernels_before: int
    fused: Op

    @property
    def bytes_saved(self) -> float:
        return (self.bytes_before - self.bytes_after) * self.count


def _one_kernel(op: Op) -> Op:
    """An op written as several kernels, done as one: only its compulsory bytes remain."""
    if op.kernels > 1 and "fused_read" in op.meta:
        return replace(op, bytes_read=op.meta["fused_read"],
                       bytes_written=op.meta["fused_written"], kernels=1, meta={})
    return op


def _recomputed(op: Op) -> bool:
    return op.name.endswith(".recompute")


def _same_group(a: Op, b: Op) -> bool:
    """Same phase, repeat count and layer-ness; a recomputed forward never fuses with the
    backward kernels around it."""
    return (a.phase == b.phase and a.count == b.count and a.per_layer == b.per_layer
            and _recomputed(a) == _recomputed(b))


def _merge(a: Op, b: Op) -> Op:
    """b consumes a's output inside one kernel: a's output is not re-read; it is not written
    unless backward keeps it."""
    reread = min(a.bytes_written, b.bytes_read)
    keep_a_output = a.saved_bytes > 0 or (a.kind not in FUSABLE_KINDS and b.saved_bytes > 0)
    return replace(
        a,
        name=f"{a.name}+{b.name.rsplit('.', 1)[-1]}",
        kind=a.kind if a.kind not in FUSABLE_KINDS else b.kind if b.kind != "elementwise"
        else a.kind,
        flops=a.flops + b.flops,
        useful_flops=None if a.useful_flops is None and b.useful_flops is None
        else a.useful + b.useful,
        bytes_read=a.bytes_read + b.bytes_read - reread,
        bytes_written=b.bytes_written + (a.bytes_written if keep_a_output else 0.0),
        saved_bytes=a.saved_bytes + b.saved_bytes,
        kernels=1,
        fusable=True,
        skips_masked=a.skips_masked,
    )


def fuse_elementwise(ops: OpList, into_matmul: bool = True) -> tuple[OpList, list[FusedChain]]:
    """Merge runs of adjacent fusable ops (and a matmul's epilogue when `into_matmul`)."""
    out: list[Op] = []
    chains: list[FusedChain] = []
    run: list[Op] = []

    def close() -> None:
        if not run:
            return
        merged = _one_kernel(run[0])
        for nxt in run[1:]:
            merged = _merge(merged, _one_kernel(nxt))
        before = sum(o.bytes for o in run)
        kernels = sum(o.kernels for o in run)
        if len(run) > 1 or kernels > 1:
            merged = replace(merged, kernels=1)
            chains.append(FusedChain(tuple(o.name for o in run), run[0].phase, run[0].count,
                                     before, merged.bytes, kernels, merged))
        out.append(merged)
        run.clear()

    for op in ops:
        fusable = op.kind in FUSABLE_KINDS
        # a matmul takes only element-wise epilogues (bias, activation, residual); a norm or
        # softmax needs whole rows and starts a kernel of its own
        epilogue_ok = run and (run[0].kind != "matmul" or op.kind == "elementwise")
        if run and fusable and epilogue_ok and _same_group(run[-1], op):
            run.append(op)
            continue
        close()
        if fusable or (into_matmul and op.kind == "matmul"):
            run.append(op)
        else:
            out.append(op)
    close()
    # a lone matmul is not a chain; put it back unchanged
    return OpList(tuple(out)), chains
