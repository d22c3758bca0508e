"""FLOP formulas on shapes, one small pure function per aten operator (no torch import).

Arguments arrive as the op's positional arguments with every tensor replaced by its shape
(a tuple of ints); `out` is the tuple of output shapes. Matmul-class formulas follow the
convention of torch.utils.flop_counter (2 FLOPs per multiply-add; bias adds not counted) so the
two agree wherever both count an op. Attention counts the full score matrix (the FlopCounter and
PaLM Appendix B convention); the causal-useful share is reported separately.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

Shape = tuple[int, ...]
Formula = Callable[[Sequence[Any], dict[str, Any], Sequence[Shape]], float]

FORMULAS: dict[str, Formula] = {}


def formula(*names: str) -> Callable[[Formula], Formula]:
    """Register a FLOP formula for aten op packet names ('mm', 'addmm', ...)."""

    def register(fn: Formula) -> Formula:
        for n in names:
            FORMULAS[n] = fn
        return fn

    return register


def matmul_flops(m: int, k: int, n: int, batch: int = 1) -> float:
    """[m,k] @ [k,n]: m*n*k multiply-adds = 2mnk FLOPs."""
    return 2.0 * batch * m * n * k


@formula("mm", "_scaled_mm", "_int_mm")
def _mm(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    (m, k), (_, n) = args[0], args[1]
    return matmul_flops(m, k, n)


@formula("addmm")
def _addmm(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    (m, k), (_, n) = args[1], args[2]
    return matmul_flops(m, k, n)


@formula("bmm")
def _bmm(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    (b, m, k), (_, _, n) = args[0], args[1]
    return matmul_flops(m, k, n, b)


@formula("baddbmm")
def _baddbmm(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    (b, m, k), (_, _, n) = args[1], args[2]
    return matmul_flops(m, k, n, b)


@formula("_grouped_mm", "grouped_mm")
def _grouped_mm(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    """MoE grouped GEMM: every row meets one group's matrix, so FLOPs = 2 x rows x K x N."""
    a, b = args[0], args[1]
    if len(a) == 2 and len(b) == 2:  # weight grad: (K, T) @ (T, N) split over T
        return matmul_flops(a[0], a[1], b[1])
    if len(a) == 2:  # (T, K) @ (G, K, N)
        return matmul_flops(a[0], a[1], b[-1])
    return matmul_flops(a[-2], a[-1], b[-1], a[0])  # (G, M, K) @ (G, K, N)


def conv_flops(x: Shape, w: Shape, out: Shape, transposed: bool) -> float:
    """2 x batch x spatial points x c_out x c_in/groups x kernel points (torch flop_counter)."""
    spatial = (x if transposed else out)[2:]
    c_out, c_in, *kernel = w
    return 2.0 * x[0] * prod(spatial) * prod(kernel) * c_out * c_in


@formula("convolution", "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
         "convolution_overrideable", "mkldnn_convolution")
def _conv(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    transposed = bool(args[6]) if len(args) > 6 and isinstance(args[6], bool) else False
    return conv_flops(args[0], args[1], out[0], transposed)


@formula("convolution_backward")
def _conv_backward(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    grad_out, x, w = args[0], args[1], args[2]
    transposed, mask = bool(args[7]), args[10]

    def t(s: Shape) -> Shape:
        return (s[1], s[0], *s[2:])

    flops = 0.0
    # grad_input has the shape of x and grad_weight that of w; `out` cannot be indexed by
    # position because the tracer drops the None outputs of a partial output_mask.
    if mask[0]:  # grad_input = conv_transpose(grad_out, weight)
        flops += conv_flops(grad_out, w, x, not transposed)
    if mask[1]:  # grad_weight = conv(input, grad_out)
        if transposed:
            flops += conv_flops(t(grad_out), t(x), t(w), False)
        else:
            flops += conv_flops(t(x), t(grad_out), t(w), False)
    return flops


def attention_flops(q: Shape, k: Shape, v: Shape) -> float:
    """Scores q·kᵀ and probs·v: 2·b·h·s_q·s_k·(d_qk + d_v), full matrix (FlashAttention-2 §3.3)."""
    b, h, sq, dq = q[-4], q[-3], q[-2], q[-1]
    sk, dv = k[-2], v[-1]
    return 2.0 * b * h * sq * sk * (dq + dv)


def attention_backward_flops(q: Shape, k: Shape, v: Shape) -> float:
    """Recompute scores, dV, dP, dQ, dK: 2·b·h·s_q·s_k·(3·d_qk + 2·d_v) (torch flop_counter)."""
    b, h, sq, dq = q[-4], q[-3], q[-2], q[-1]
    sk, dv = k[-2], v[-1]
    return 2.0 * b * h * sq * sk * (3 * dq + 2 * dv)


@formula("_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_fused_attention_overrideable")
def _sdpa(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    return attention_flops(args[0], args[1], args[2])  # (batch, heads, seq, dim)


@formula("_flash_attention_forward", "_efficient_attention_forward")
def _flash_forward(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    return attention_flops(*(_bshd(s) for s in args[:3]))


@formula("_flash_attention_backward", "_efficient_attention_backward")
def _flash_backward(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    return attention_backward_flops(*(_bshd(s) for s in args[1:4]))


def _bshd(s: Shape) -> Shape:
    """Low-level flash/efficient kernels take (batch, seq, heads, dim); packed varlen inputs
    (total, heads, dim) count as one sequence (an upper bound)."""
    if len(s) == 3:
        return (1, s[1], s[0], s[2])
    return (s[0], s[2], s[1], s[3])


@formula("_scaled_dot_product_flash_attention_for_cpu_backward",
         "_scaled_dot_product_flash_attention_backward",
         "_scaled_dot_product_efficient_attention_backward",
         "_scaled_dot_product_cudnn_attention_backward")
def _sdpa_backward(args: Sequence[Any], kw: dict[str, Any], out: Sequence[Shape]) -> float:
    q, k, v = args[1], args[2], args[3]
    return attention_backward_flops(q, k, v)


# ---- op classification -------------------------------------------------------------------

VIEW_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "unsqueeze",
    "squeeze", "slice", "select", "alias", "detach", "as_strided", "split", "split_with_sizes",
    "unbind", "chunk", "narrow", "view_as_real", "view_as_complex", "unfold", "diagonal",
    "lift_fresh", "_reshape_alias", "expand_as", "view_as", "movedim", "numpy_T", "mT",
    "_to_copy_noop", "resolve_conj", "resolve_neg", "_local_scalar_dense", "is_same_size",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "dim", "size", "stride",
    "_has_compatible_shallow_copy_type", "set_", "_fused_sdp_choice", "item",
})
"""Metadata-only ops: no FLOPs, no bytes; not recorded."""

KIND_BY_OP: dict[str, str] = {
    "embedding": "embedding", "embedding_dense_backward": "embedding",
    "native_layer_norm": "norm", "native_layer_norm_backward": "norm",
    "native_group_norm": "norm", "native_group_norm_backward": "norm",
    "native_batch_norm": "norm", "native_batch_norm_backward": "norm",
    "_native_batch_norm_legit": "norm", "_native_batch_norm_legit_functional": "norm",
    "_fused_rms_norm": "norm", "_fused_rms_norm_backward": "norm", "rms_norm": "norm",
    "_softmax": "softmax", "_softmax_backward_data": "softmax", "_safe_softmax": "softmax",
    "_log_softmax": "softmax", "_log_softmax_backward_data": "softmax",
    "nll_loss_forward": "loss", "nll_loss_backward": "loss", "nll_loss2d_forward": "loss",
    "nll_loss2d_backward": "loss", "cross_entropy_loss": "loss",
    "sum": "reduction", "mean": "reduction", "amax": "reduction", "amin": "reduction",
    "max": "reduction", "min": "reduction", "var": "reduction", "var_mean": "reduction",
    "std": "reduction", "norm": "reduction", "linalg_vector_norm": "reduction",
    "logsumexp": "reduction", "argmax": "reduction", "cumsum": "reduction", "prod": "reduction",
    "topk": "reduction", "sort": "reduction",
    "clone": "copy", "_to_copy": "copy", "copy_": "copy", "copy": "copy", "cat": "copy",
    "stack": "copy", "index_select": "copy", "gather": "copy", "scatter": "copy",
    "scatter_add": "copy", "index": "copy", "index_put": "copy", "index_add": "copy",
    "constant_pad_nd": "copy", "slice_backward": "copy", "select_backward": "copy",
    "zeros": "copy", "ones": "copy", "empty": "copy", "full": "copy", "zeros_like": "copy",
    "ones_like": "copy", "empty_like": "copy", "full_like": "copy", "new_zeros": "copy",
    "new_empty": "copy", "new_ones": "copy", "new_empty_strided": "copy", "fill_": "copy",
    "zero_": "copy", "arange": "copy",
    "empty_strided": "copy", "scalar_tensor": "copy", "masked_fill": "copy", "where": "copy",
    "tril": "copy", "triu": "copy", "repeat": "copy", "roll": "copy", "flip": "copy",
    "index_put_": "copy", "masked_fill_": "copy", "contiguous": "copy",
}

MATMUL_OPS = frozenset({"mm", "addmm", "bmm", "baddbmm", "_scaled_mm", "_int_mm", "_grouped_mm"})
CONV_OPS = frozenset({"convolution", "_convolution", "cudnn_convolution", "_slow_conv2d_forward",
                      "convolution_overrideable", "mkldnn_convolution", "convolution_backward"})


def kind_of(op_name: str) -> str:
    """Classify an aten op packet name into an OpKind."""
    if op_name in MATMUL_OPS:
        return "matmul"
    if op_name in CONV_OPS:
        return "conv"
    if "attention" in op_name:
        return "attention"
    return KIND_BY_OP.get(op_name, "elementwise")


NO_FLOP_KINDS = frozenset({"copy", "embedding"})


def elementwise_flops(kind: str, in_numels: Sequence[int], out_numels: Sequence[int]) -> float:
    """Element-wise, norm, softmax, reduction, loss: one FLOP per element of the largest tensor.

    The convention the issue asks for ("by element count"); copies and gathers do no arithmetic.
    """
    if kind in NO_FLOP_KINDS:
        return 0.0
    return float(max([*in_numels, *out_numels, 0]))
