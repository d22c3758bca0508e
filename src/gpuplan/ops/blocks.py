"""Emitters for the pieces of a transformer: each appends its forward op(s) and, when training,
the matching backward op(s), op by op, with FLOPs, bytes and the bytes kept for backward.

What is saved mirrors what PyTorch autograd keeps for the eager implementation (checked against
the meta tracer in tests): a linear keeps its input, GELU/SiLU their input, a product both
factors, softmax its output, dropout its mask, LayerNorm its input and two fp32 statistics per
row, FlashAttention q, k, v, the output and the fp32 log-sum-exp per row (Dao 2023, §3.1).
Sizes are in elements; `Ctx.e` converts activations to bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from gpuplan.ops.op import Op, OpKind, Phase
from gpuplan.units import DTYPE_BYTES as DTYPE_BYTES  # the table lives in units; kept importable here

FP32 = 4
INDEX = 8  # int64 indices (token ids, top-k expert ids)


@dataclass
class Ctx:
    """Where emitted ops go and how they are sized."""

    phase: Phase
    dtype: str
    """matmul compute dtype (selects the device peak)"""
    e: float
    """bytes per activation element"""
    train: bool
    mask_bytes: float
    """bytes per dropout-mask element: 1 (CUDA native_dropout) or the activation size (CPU)"""
    grad_bytes: float
    """bytes per weight-gradient element"""
    weight_bytes: float
    """bytes per weight element read by matmuls (quantized inference reads fewer)"""
    fused: bool = False
    """norms, activations and RoPE as single fused kernels (torch.compile / Megatron / vLLM)"""
    cpu: bool = False
    """PyTorch CPU kernels (LayerNorm statistics in the input dtype, not fp32)"""
    fp8_inputs: bool = False
    """FP8 training with Transformer Engine: each linear of a transformer layer keeps its own
    FP8 copy of its input for the weight-gradient GEMM (1 byte per element), not the 16-bit one"""
    fp8_weights_cached: bool = False
    """FP8 training: the FP8 weights are made once per optimizer step, not per micro-batch
    (Impl.fp8_weights_cached), so a linear casts only its input and output gradient"""
    fp8_norm_casts: bool = False
    """FP8 training: the norm before a linear writes its output in FP8 itself (Impl.
    fp8_norm_casts), so that linear has no input cast of its own"""
    fp8_rowwise: bool = False
    """FP8 training with torchao's row-wise recipe (Impl.fp8_rowwise): blocks.fp8_rowwise_extra"""
    head_dtype: str | None = None
    """matmul dtype of the LM head when it differs from the layers' (FP8 training that keeps
    the output layer in 16 bits: Impl.fp8_blocks_only)"""
    count: int = 1
    layer: str | None = None
    component: str = "other"
    prefix: str = ""
    fwd: list[Op] = field(default_factory=list)
    bwd: list[Op] = field(default_factory=list)

    def op(self, name: str, kind: OpKind, flops: float, read: float, written: float,
           saved: float = 0.0, useful: float | None = None, shape: str = "",
           kernels: int = 1, skips_masked: bool = False, dtype: str | None = None,
           backward: bool = False, fused_bytes: tuple[float, float] | None = None,
           meta: dict[str, float] | None = None) -> None:
        phase: Phase = "backward" if backward else self.phase
        if kind == "attention" and self.train and self.dtype == "fp8" and dtype is None:
            dtype = "bf16"  # Transformer Engine's FP8 recipes keep attention in 16 bits
        op = Op(
            name=f"{self.prefix}{name}{'.grad' if backward and not name.endswith('grad') else ''}",
            kind=kind, flops=flops,
            bytes_read=read, bytes_written=written, dtype=dtype or self.dtype, phase=phase,
            component=self.component, count=self.count,
            saved_bytes=saved if self.train and not backward else 0.0,
            useful_flops=useful, layer=self.layer, shape=shape,
            fusable=kind in ("elementwise", "norm", "softmax") and not backward, kernels=kernels,
            skips_masked=skips_masked,
            meta={**({"fused_read": fused_bytes[0], "fused_written": fused_bytes[1]}
                     if fused_bytes and kernels > 1 else {}), **(meta or {})},
        )
        (self.bwd if backward else self.fwd).append(op)


def linear(c: Ctx, name: str, m: float, k: int, n: int, bias: bool = False,
           saves_input: bool = True, weight_rows: float | None = None,
           saved_rows: float | None = None, weight_bytes: float | None = None,
           after_norm: bool = False) -> None:
    """Y[m,n] = X[m,k] W[k,n] (+ b): 2mkn FLOPs. Backward: dX = dY Wᵀ and dW = Xᵀ dY, 2mkn each.

    `weight_rows` (default k) lets MoE read only the experts a batch touches; `saved_rows`
    (default m) is how many input rows stay saved (sequence parallelism keeps a shard and
    gathers it again in backward). `after_norm`: the input is a norm's output (pre-norm QKV
    and first MLP linear), which FP8 training may quantize in the norm kernel (Ctx.fp8_norm_casts).
    """
    e, wb = c.e, c.weight_bytes if weight_bytes is None else weight_bytes
    wk = k if weight_rows is None else weight_rows
    weights = wk * n * wb + (n * e if bias else 0)
    shape = f"{int(m)}x{k} @ {k}x{n}"
    rows = m if saved_rows is None else saved_rows
    saved = rows * k * e if saves_input else 0.0
    if c.fp8_inputs and c.dtype == "fp8" and c.layer is not None:
        # Transformer Engine linear.py: the quantized input is saved with its row-wise data
        # discarded (update_usage(rowwise_usage=False, columnwise_usage=True)), one FP8 copy
        # per linear even where another op keeps the 16-bit tensor (attention output)
        saved = rows * k * 1.0
    c.op(name, "matmul", 2 * m * k * n, m * k * e + weights, m * n * e,
         saved=saved, shape=shape)
    if c.train and c.dtype == "fp8":
        fwd_cast = (0.0 if after_norm and c.fp8_norm_casts else m * k) \
            + (0.0 if c.fp8_weights_cached else wk * n)
        fp8_casts(c, name, fwd_cast, m * n)
        if c.fp8_rowwise:
            fp8_rowwise_extra(c, name, fwd_cast, m * n, m * k + wk * n)
    if c.train:
        c.op(f"{name}.dgrad", "matmul", 2 * m * k * n, m * n * e + weights, m * k * e,
             shape=f"{int(m)}x{n} @ {n}x{k}", backward=True)
        c.op(f"{name}.wgrad", "matmul", 2 * m * k * n, m * k * e + m * n * e,
             wk * n * c.grad_bytes + (n * c.grad_bytes if bias else 0),
             shape=f"{k}x{int(m)} @ {int(m)}x{n}", backward=True)


def fp8_casts(c: Ctx, name: str, fwd_elems: float, bwd_elems: float) -> None:
    """FP8 training (Transformer Engine, delayed scaling): before each FP8 GEMM its 16-bit
    input and weight are cast to FP8 with their amax recorded, and, as Hopper's FP8 GEMMs
    take only the TN layout, also written transposed for the backward GEMMs (one fused
    cast-transpose kernel: read 16 bits, write 8 + 8); the backward casts the output gradient
    the same way (TE docs "Using FP8 with Transformer Engine"; transformer_engine
    cast_transpose). Memory-bound work that FP8 does not make faster."""
    if fwd_elems:
        c.op(f"{name}.fp8_cast", "copy", fwd_elems, fwd_elems * c.e, 2 * fwd_elems, kernels=2,
             shape=f"{int(fwd_elems)}")
    c.op(f"{name}.fp8_cast", "copy", bwd_elems, bwd_elems * c.e, 2 * bwd_elems,
         shape=f"{int(bwd_elems)}", backward=True)


def fp8_rowwise_extra(c: Ctx, name: str, fwd_elems: float, bwd_elems: float,
                      grad_out_elems: float) -> None:
    """What torchao's row-wise FP8 recipe adds to the per-tensor casts of fp8_casts.

    Each GEMM scales its operands along its own reduction axis, and the forward, dgrad and
    wgrad GEMMs reduce a tensor along different axes. So input, weight and output gradient are
    each quantized once per axis, each pass reading the 16-bit tensor again, where one
    per-tensor scale lets a single cast-transpose serve both (torchao float8 config.py,
    Float8LinearRecipeName.ROWWISE: AXISWISE casts of input, weight and grad_output). The two
    backward GEMMs run without fast accumulation, for which torchao calls the per-tensor cuBLAS
    kernel with unit scales and multiplies the row and column scales into the output after it
    (torchao float8_ops.py addmm_float8_unwrapped, post_inverse_scale): one more read and
    write of the dgrad and wgrad outputs."""
    if fwd_elems:
        c.op(f"{name}.fp8_cast_axis", "copy", fwd_elems, fwd_elems * c.e, 0.0,
             shape=f"{int(fwd_elems)}")
    c.op(f"{name}.fp8_cast_axis", "copy", bwd_elems, bwd_elems * c.e, 0.0,
         shape=f"{int(bwd_elems)}", backward=True)
    c.op(f"{name}.fp8_rescale", "elementwise", grad_out_elems, grad_out_elems * c.e,
         grad_out_elems * c.e, shape=f"{int(grad_out_elems)}", backward=True)


def elementwise(c: Ctx, name: str, elems: float, reads: float, saved: float = 0.0,
                kernels: int = 1, kind: OpKind = "elementwise", flops_per_elem: float = 1.0,
                grad_inputs: float = 1.0, out_elems: float | None = None) -> None:
    """An element-wise op over `elems` outputs reading `reads` input elements.

    Backward reads the output gradient and the saved operands and writes one gradient per
    differentiable input (`grad_inputs` of them).
    """
    e = c.e
    out = elems if out_elems is None else out_elems
    c.op(name, kind, flops_per_elem * max(elems, reads), reads * e, out * e, saved=saved,
         kernels=kernels, shape=f"{int(elems)}",
         fused_bytes=(min(reads, elems) * e, elems * e))
    if c.train and grad_inputs > 0:
        c.op(name, kind, flops_per_elem * max(elems, reads), out * e + saved,
             grad_inputs * elems * e, kernels=kernels, shape=f"{int(elems)}", backward=True)


def dropout(c: Ctx, name: str, elems: float, p: float) -> None:
    """Dropout keeps its mask: 1 byte/element on CUDA (native_dropout), the input dtype on CPU
    (bernoulli_ + div_ + mul: three kernels)."""
    if p <= 0 or not c.train:
        return
    mask = elems * c.mask_bytes
    kernels = 1 if c.mask_bytes == 1 else 3
    c.op(name, "elementwise", 2 * elems, elems * c.e, elems * c.e + mask, saved=mask,
         kernels=kernels, shape=f"{int(elems)}", fused_bytes=(elems * c.e, elems * c.e + elems))
    c.op(name, "elementwise", elems, elems * c.e + mask, elems * c.e, backward=True,
         shape=f"{int(elems)}")


def layernorm(c: Ctx, name: str, rows: float, d: int, bias: bool = True,
              input_kept: bool = False, kernel: str = "native", plus_one: bool = False) -> None:
    """LayerNorm (native kernel): keeps its input and the mean and rstd per row (Ba et al.
    2016); fp32 statistics on GPUs, the input dtype on the CPU. `input_kept`: another op
    already keeps that same input tensor (a second norm of a parallel layer). Other eager
    forms (`kernel`): "fp32_copy" runs the native kernel on an fp32 copy (HF OlmoLayerNorm),
    which keeps that copy and fp32 statistics; "fp32_ops" writes it out in fp32 ops (HF
    CohereLayerNorm: x - mean twice, rsqrt, two products), which keeps both x - mean, the
    normalized value and the rstd in fp32 and an fp32 copy of the weight. `plus_one` (Nemotron
    LayerNorm1P) also keeps the weight + 1 it builds."""
    e = c.e
    params = d * c.weight_bytes * (2 if bias else 1)
    stats = 2 * rows * (e if c.cpu else FP32)
    saved = (0.0 if input_kept else rows * d * e) + stats
    if kernel != "native" and not c.fused:
        saved = _layernorm_eager_saved(e, rows, d, kernel, input_kept)
    saved += d * e if plus_one else 0.0
    c.op(name, "norm", 5 * rows * d, rows * d * e + params, rows * d * e + stats,
         saved=saved, shape=f"{int(rows)}x{d}")
    if c.train:
        c.op(name, "norm", 8 * rows * d, 2 * rows * d * e + stats + params,
             rows * d * e + params * c.grad_bytes / c.weight_bytes, shape=f"{int(rows)}x{d}",
             backward=True)


def _layernorm_eager_saved(e: float, rows: float, d: int, kernel: str, input_kept: bool) -> float:
    n, upcast = rows * d, e != FP32
    if kernel == "fp32_copy":  # in fp32 the copy is the input itself
        return (n * FP32 if upcast else (0.0 if input_kept else n * e)) + 2 * rows * FP32
    # x - mean is computed twice (for the variance and for the output): both are kept
    return 3 * n * FP32 + rows * FP32 + (d * FP32 if upcast else 0.0)


def rmsnorm(c: Ctx, name: str, rows: float, d: int, plus_one: bool = False,
            fp32_weight: bool = False) -> None:
    """RMSNorm (Zhang & Sennrich 2019). Fused: keeps input and rstd. Eager (HF LlamaRMSNorm):
    upcasts to fp32 and keeps the fp32 input, the rstd and the normalized value in the model
    dtype (x.float(), pow, mean, add, rsqrt, mul, cast, mul: up to 8 kernels).
    `plus_one` is Gemma's (1 + weight) scaling, which also keeps the fp32 normalized value;
    `fp32_weight`: the weight multiplies the fp32 normalized value before the cast back (HF
    Olmo2RMSNorm), which keeps that fp32 value instead of a model-dtype copy."""
    e, n = c.e, rows * d
    params = d * c.weight_bytes
    if c.fused:
        saved = n * e + rows * FP32
        c.op(name, "norm", 4 * n, n * e + params, n * e + rows * FP32, saved=saved,
             shape=f"{int(rows)}x{d}")
        backward_read = 2 * n * e + rows * FP32 + params
    else:
        cast = e != FP32
        kernels = 6 + (2 if cast else 0)
        read = n * e + (n * FP32 if cast else 0) + 3 * n * FP32 + 2 * rows * FP32 + params
        written = (n * FP32 if cast else 0) + 2 * n * FP32 + 3 * rows * FP32 + n * e
        written += n * e if cast else 0
        # Gemma: (x * rstd) * (1 + w) in fp32 keeps the fp32 normalized value and 1 + w
        saved = (2 * n * FP32 + rows * FP32 + (d * FP32 if plus_one else 0.0)
                 if plus_one or fp32_weight else n * FP32 + rows * FP32 + n * e)
        c.op(name, "norm", 4 * n, read, written, saved=saved, kernels=kernels,
             shape=f"{int(rows)}x{d}", fused_bytes=(n * e + params, n * e + rows * FP32))
        backward_read = n * e + saved + params
    if c.train:
        c.op(name, "norm", 6 * n, backward_read, n * e + d * c.grad_bytes,
             kernels=1 if c.fused else 6, shape=f"{int(rows)}x{d}", backward=True)


def norm(c: Ctx, kind: str, name: str, rows: float, d: int, bias: bool = True,
         plus_one: bool = False, fp32_weight: bool = False, input_kept: bool = False,
         kernel: str = "native") -> None:
    """LayerNorm or RMSNorm; `input_kept` applies to LayerNorm (eager RMSNorm keeps its own
    fp32 copy of the input)."""
    if kind == "layernorm":
        layernorm(c, name, rows, d, bias, input_kept, kernel, plus_one)
    else:
        rmsnorm(c, name, rows, d, plus_one, fp32_weight)


def activation(c: Ctx, name: str, act: str, elems: float, keeps_input: bool = True) -> None:
    """MLP non-linearity. Fused kernels keep their input (ReLU its output); GPT-2's gelu_new
    written in Python ops keeps four tensors: x (pow), tanh(...), 0.5·x and 1 + tanh(...).
    keeps_input=False: a later op keeps that input (a fused gated unit, `gated_unit`)."""
    if act == "gelu_new" and not c.fused:
        elementwise(c, name, elems, 8 * elems, saved=4 * elems * c.e, kernels=8,
                    flops_per_elem=1.0, out_elems=8 * elems)
        return
    flops = {"gelu": 8.0, "gelu_tanh": 8.0, "gelu_new": 8.0, "silu": 4.0, "relu": 1.0}[act]
    elementwise(c, name, elems, elems, saved=elems * c.e if keeps_input else 0.0,
                flops_per_elem=flops)


def gated_unit(c: Ctx, name: str, act: str, elems: float) -> None:
    """act(gate) * up of a gated MLP over `elems` outputs. Eager PyTorch keeps three tensors:
    the gate (for act's backward), act(gate) and up (the product's factors). A fused kernel
    keeps only its input, gate and up, and recomputes act(gate) in backward: two tensors
    (Megatron-Core megatron/core/fusions/fused_bias_swiglu.py SwiGLUFunction saves `input`
    only; torch.compile's min-cut partitioner recomputes the cheap pointwise act likewise)."""
    activation(c, f"{name}.act", act, elems, keeps_input=not c.fused)
    elementwise(c, f"{name}.gate_mul", elems, 2 * elems, saved=2 * elems * c.e,
                grad_inputs=2)


def attention_flash(c: Ctx, b: float, sq: int, sk: float, h: int, hkv: int, dqk: int, dv: int,
                    causal: bool, useful_keys: float, qkv_saved: float | None = None,
                    recomputed: bool = False, calls: int = 1) -> None:
    """FlashAttention (Dao et al. 2022/2023): scores stay on chip; reads q, k, v, writes the
    output and an fp32 log-sum-exp per row; keeps q, k, v, out, lse for backward, O(s) extra.
    FLOPs: 2·b·h·s_q·s_k·(d_qk + d_v) forward, recompute + 4 matmuls backward (2.5x).
    `recomputed`: the core runs inside a checkpoint (Megatron-Core selective recompute of
    core_attn: tensor_parallel.checkpoint saves its inputs q, k, v and reruns the kernel in
    backward), so out and lse are not kept by it. `calls`: kernel calls the keys are split
    over (context parallelism's ring steps, Liu et al. 2023): each call's key loop is
    useful_keys / calls long, which the roofline's length factor reads from the op's meta
    (estimate/efficiency_attention.py)."""
    e = c.e
    kernel = {"kernel_keys": useful_keys / max(1, calls), "causal": 1.0 if causal else 0.0}
    q, k, v = b * sq * h * dqk, b * sk * hkv * dqk, b * sk * hkv * dv
    out, lse = b * sq * h * dv, b * h * sq * FP32
    flops = 2 * b * h * sq * sk * (dqk + dv)
    useful = 2 * b * h * sq * useful_keys * (dqk + dv)
    shape = f"b{int(b)} h{h}/{hkv} s{sq}x{int(sk)} d{dqk}/{dv}"
    qkv_saved = (q + k + v) * e if qkv_saved is None else qkv_saved
    c.op("attn.core", "attention", flops, (q + k + v) * e, out * e + lse,
         saved=qkv_saved + (0.0 if recomputed else out * e + lse), useful=useful, shape=shape,
         skips_masked=True, meta=kernel)
    if c.train:
        bflops = 2 * b * h * sq * sk * (3 * dqk + 2 * dv)
        c.op("attn.core", "attention", bflops, (q + k + v + 2 * out) * e + lse,
             (q + k + v) * e, useful=bflops * useful / flops if flops else 0.0, shape=shape,
             skips_masked=True, backward=True, meta=kernel)


def attention_naive(c: Ctx, b: float, s: int, h: int, dqk: int, dv: int, causal: bool,
                    useful_keys: float, p_drop: float, softmax_fp32: bool,
                    sk: int | None = None, internal_bytes: float | None = None,
                    selective: bool = False, kv_view_heads: int | None = None) -> None:
    """Eager attention: S = QKᵀ·scale + mask, P = softmax(S), O = P·V; the b·h·s² scores and
    probabilities go through memory (bytes grow with s²). K and V are expanded to all query
    heads first (HF repeat_kv). Keeps q, k, the softmax output (fp32 when upcast), its cast,
    the dropout mask and dropped probabilities, and v. `internal_bytes`=4 is PyTorch's CPU
    math path, which computes bf16/fp16 attention in fp32. `selective` (Korthikanti et al.
    2022 §5): keep only q, k, v and recompute the s² part in backward. `kv_view_heads`: the
    expanded K and V are views of this many heads (no copy), so only those are kept."""
    if internal_bytes is not None and internal_bytes != c.e:
        inner = Ctx(phase=c.phase, dtype="fp32", e=internal_bytes, train=c.train,
                    mask_bytes=internal_bytes if c.mask_bytes != 1 else 1,
                    grad_bytes=c.grad_bytes, weight_bytes=c.weight_bytes, fused=c.fused,
                    cpu=c.cpu,
                    count=c.count, layer=c.layer, component=c.component, prefix=c.prefix,
                    fwd=c.fwd, bwd=c.bwd)
        n_in = b * s * h * (2 * dqk + dv)
        c.op("attn.upcast", "copy", 0.0, n_in * c.e, n_in * internal_bytes, kernels=3)
        attention_naive(inner, b, s, h, dqk, dv, causal, useful_keys, p_drop, False, sk,
                        selective=selective)
        n_out = b * s * h * dv
        c.op("attn.downcast", "copy", 0.0, n_out * internal_bytes, n_out * c.e)
        return
    e = c.e
    start = len(c.fwd)
    sk = s if sk is None else sk
    q, k, v, o = b * s * h * dqk, b * sk * h * dqk, b * sk * h * dv, b * s * h * dv
    kv_keep = (kv_view_heads or h) / h  # share of the expanded K/V storage autograd keeps
    ss = b * h * s * sk
    useful = ss * useful_keys / sk if sk else 0.0
    shape = f"b{int(b)} h{h} s{s}x{sk} d{dqk}"
    c.op("attn.scores", "attention", 2 * ss * dqk, (q + k) * e, ss * e,
         saved=(q + k * kv_keep) * e, useful=2 * useful * dqk, shape=shape)
    sm_bytes = FP32 if softmax_fp32 else e
    # scale and mask (2 kernels), softmax (in fp32 when upcast), cast back
    c.op("attn.mask_scale", "elementwise", 2 * ss, 2 * ss * e, 2 * ss * e, kernels=2,
         shape=shape, fused_bytes=(ss * e, ss * e))
    cast = softmax_fp32 and e != FP32
    c.op("attn.softmax", "softmax", 5 * ss, ss * e, ss * sm_bytes + (ss * e if cast else 0),
         saved=ss * sm_bytes + (ss * e if cast and p_drop <= 0 else 0),
         kernels=2 if cast else 1, shape=shape, fused_bytes=(ss * e, ss * e))
    if p_drop > 0 and c.train:
        dropout(c, "attn.dropout", ss, p_drop)
        c.fwd[-1] = _with_saved(c.fwd[-1], c.fwd[-1].saved_bytes + ss * e)  # dropped probs
    c.op("attn.pv", "attention", 2 * ss * dv, ss * e + v * e, o * e, saved=v * kv_keep * e,
         useful=2 * useful * dv, shape=shape)
    if selective and c.train:
        for i in range(start, len(c.fwd)):
            op = c.fwd[i]
            keep = ((q + k * kv_keep) * e if op.name.endswith("scores") else
                    v * kv_keep * e if op.name.endswith("pv") else 0.0)
            c.fwd[i] = _with_saved(op, keep)
            c.bwd.append(recomputed(op))
    if c.train:
        c.op("attn.pv", "attention", 4 * ss * dv, ss * e + v * e + o * e, ss * e + v * e,
             useful=4 * useful * dv, shape=shape, backward=True)
        c.op("attn.softmax", "softmax", 4 * ss, ss * sm_bytes + ss * e, ss * e, shape=shape,
             backward=True)
        c.op("attn.mask_scale", "elementwise", ss, ss * e, ss * e, shape=shape, backward=True)
        c.op("attn.scores", "attention", 4 * ss * dqk, ss * e + (q + k) * e, (q + k) * e,
             useful=4 * useful * dqk, shape=shape, backward=True)


def _with_saved(op: Op, saved: float) -> Op:
    return replace(op, saved_bytes=saved)


RECOMPUTE = ".recompute"


def recomputed(op: Op) -> Op:
    """The forward op run again during backward (activation recomputation): hardware FLOPs,
    not model FLOPs."""
    return replace(op, name=op.name + RECOMPUTE, phase="backward", saved_bytes=0.0)


def embedding(c: Ctx, name: str, tokens: float, vocab: int, d: int, index_rows: float) -> None:
    """A gather: reads the rows it returns; keeps the indices. Backward scatters into a dense
    vocab x d gradient (written whole)."""
    e = c.e
    c.op(name, "embedding", 0.0, index_rows * INDEX + tokens * d * c.weight_bytes,
         tokens * d * e, saved=index_rows * INDEX, shape=f"{int(tokens)} of {vocab}x{d}")
    if c.train:
        c.op(name, "embedding", tokens * d, tokens * d * e + index_rows * INDEX,
             vocab * d * c.grad_bytes, shape=f"{int(tokens)} into {vocab}x{d}", backward=True)


def cross_entropy(c: Ctx, tokens: float, vocab: int, target_rows: float | None = None) -> None:
    """HF causal-LM loss: logits upcast to fp32, log_softmax (keeps its fp32 output), NLL
    (keeps the targets and the total weight). `target_rows`: int64 labels kept (HF pads the
    labels by one and shifts; at batch 1 the shifted view keeps the padded storage)."""
    n = tokens * vocab
    cast = c.e != FP32
    c.op("loss.log_softmax", "softmax", 5 * n, n * c.e + (n * FP32 if cast else 0),
         n * FP32 + (n * FP32 if cast else 0), saved=n * FP32, kernels=2 if cast else 1,
         dtype="fp32", shape=f"{int(tokens)}x{vocab}")
    rows = tokens if target_rows is None else target_rows
    c.op("loss.nll", "loss", n, n * FP32 + tokens * INDEX, FP32,
         saved=rows * INDEX + FP32, dtype="fp32", shape=f"{int(tokens)}")
    if c.train:
        c.op("loss.nll", "loss", tokens, tokens * INDEX + FP32, n * FP32, dtype="fp32",
             backward=True, shape=f"{int(tokens)}")
        c.op("loss.log_softmax", "softmax", 3 * n, 2 * n * FP32, n * c.e, dtype="fp32",
             backward=True, shape=f"{int(tokens)}x{vocab}")
