"""Trace any torch.nn.Module on the meta device: every aten op's FLOPs and bytes, and the bytes
autograd saves for backward. No weights are materialised, so a 70B model traces on a laptop.

How: parameters and buffers are replaced by meta tensors through `torch.func.functional_call`
(the user's module is left untouched); a TorchDispatchMode records each aten op (FLOPs from
`gpuplan.ops.formulas`, bytes = inputs read + outputs written, each storage once per op, views
free); `torch.autograd.graph.saved_tensors_hooks` records every saved storage once, parameters
excluded; module forward hooks and autograd-node metadata attribute forward and backward ops to
modules.

The meta device chooses kernels differently from a real one; the tracer emulates the target's
choice where it changes what is computed or saved: scaled_dot_product_attention (the CPU picks
its flash kernel unless dropout is on; a CUDA GPU flash or memory-efficient attention) and
dropout (CUDA keeps a 1-byte mask, the CPU a mask in the input dtype).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from gpuplan.ops.formulas import FORMULAS, VIEW_OPS, elementwise_flops, kind_of
from gpuplan.ops.op import MATMUL_KINDS, Op, OpList

Target = Literal["cpu", "cuda"]

_DTYPES = {
    torch.float32: "fp32", torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16",
    torch.int8: "int8", torch.uint8: "int8",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = "fp8"


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPES.get(dtype, str(dtype).replace("torch.", ""))


def _storage_key(t: torch.Tensor) -> int:
    return int(t.untyped_storage()._cdata)


def _tensor_bytes(tensors: list[torch.Tensor]) -> float:
    """Bytes touched, each storage once: the largest view of it, capped by the storage size."""
    per_storage: dict[int, float] = {}
    for t in tensors:
        key = _storage_key(t)
        view = t.numel() * t.element_size()
        cap = t.untyped_storage().nbytes()
        per_storage[key] = max(per_storage.get(key, 0.0), min(view, cap) if cap else view)
    return sum(per_storage.values())


def _shape_args(obj: Any) -> Any:
    return tree_map(lambda x: tuple(x.shape) if isinstance(x, torch.Tensor) else x, obj)


_LAYER_INDEX = re.compile(r"\.(\d+)(?=\.|$)")


def _normalize_path(path: str) -> tuple[str, bool]:
    norm = _LAYER_INDEX.sub(".*", path)
    return norm, norm != path


def _component(path: str, kind: str) -> str:
    p = path.lower()
    if kind == "loss" or (not p and kind == "softmax"):
        return "loss"
    if kind == "norm" or re.search(r"(^|\.)(ln_\w+|\w*norm\w*|layernorm)($|\.)", p):
        return "norm"
    if "expert" in p or "moe" in p or "router" in p or re.search(r"(^|\.)gate($|\.)", p):
        return "moe"
    if "attn" in p or "attention" in p:
        return "attention"
    if "mlp" in p or "ffn" in p or "feed_forward" in p or "intermediate" in p or ".output" in p:
        return "mlp"
    if "embed" in p or "wte" in p or "wpe" in p:
        return "embedding"
    if "lm_head" in p or "head" in p or "cls" in p or "pooler" in p:
        return "head"
    return "other"


@dataclass
class _Event:
    path: str
    aten: str
    phase: str
    kind: str
    dtype: str
    flops: float
    bytes_read: float
    bytes_written: float
    shapes: str
    saved: float = 0.0
    useful: float | None = None
    counted: bool = True


@dataclass
class ModuleStats:
    """Inclusive totals for one module (its own ops and its children's)."""

    forward_flops: float = 0.0
    backward_flops: float = 0.0
    saved_activation_bytes: float = 0.0
    param_bytes: float = 0.0


@dataclass
class Trace:
    """What a traced module computes, moves and saves. FLOPs: matmul-class (the FlopCounterMode
    and 6·N·D convention) unless the name says `_all`; element-wise work is in `ops`."""

    forward_flops: float
    backward_flops: float
    forward_flops_all: float
    useful_forward_flops: float
    param_bytes: int
    param_count: int
    saved_activation_bytes: int
    param_tensors: int
    ops: OpList
    modules: dict[str, ModuleStats]
    uncounted_ops: dict[str, int] = field(default_factory=dict)
    target: str = "cpu"

    @property
    def train_flops(self) -> float:
        return self.forward_flops + self.backward_flops

    def summary(self) -> dict[str, float]:
        return {
            "forward_flops": self.forward_flops, "backward_flops": self.backward_flops,
            "train_flops": self.train_flops, "param_bytes": self.param_bytes,
            "param_count": self.param_count, "saved_activation_bytes": self.saved_activation_bytes,
        }


class _Recorder(TorchDispatchMode):
    def __init__(self, tracer: _Tracer) -> None:
        super().__init__()
        self.t = tracer

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        name = func._overloadpacket.__name__
        if name == "_grouped_mm" and args[0].device.type == "meta":
            out = _grouped_mm_meta(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        if (name == "native_layer_norm" and self.t.target == "cpu"
                and args[0].dtype in (torch.bfloat16, torch.float16)):
            # the CPU kernel returns mean/rstd in the input dtype; the meta kernel in fp32
            out = (out[0], out[1].to(args[0].dtype), out[2].to(args[0].dtype))
        if name in VIEW_OPS:
            return out
        self.t.record(name, args, kwargs, out)
        return out


def _grouped_mm_meta(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None = None,
                     bias: Any = None, out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """Output of torch._grouped_mm on meta for any dtype (its meta kernel insists on bf16, the
    CPU kernel does not)."""
    dtype = out_dtype or a.dtype
    if a.dim() == 2 and b.dim() == 2:
        shape: tuple[int, ...] = (offs.shape[0] if offs is not None else 1, a.shape[0], b.shape[1])
    elif a.dim() == 2:
        shape = (a.shape[0], b.shape[-1])
    elif b.dim() == 2:
        shape = (a.shape[1], b.shape[-1])
    else:
        shape = (a.shape[0], a.shape[1], b.shape[-1])
    return torch.empty(shape, dtype=dtype, device="meta")


class _Tagger(TorchFunctionMode):
    """Tags autograd nodes with the module that created them; emulates the target's kernels."""

    def __init__(self, tracer: _Tracer) -> None:
        super().__init__()
        self.t = tracer

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func is torch.nn.functional.scaled_dot_product_attention:
            out = self.t.sdpa(*args, **kwargs)
        elif func is torch.nn.functional.dropout and self.t.target == "cuda":
            out = self.t.dropout(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        path = self.t.path()
        for o in tree_flatten(out)[0]:
            if isinstance(o, torch.Tensor) and o.grad_fn is not None:
                o.grad_fn.metadata.setdefault("gpuplan_module", path)
        return out


class _Tracer:
    def __init__(self, target: Target) -> None:
        self.target = target
        self.stack: list[str] = [""]
        self.events: list[_Event] = []
        self.param_keys: set[int] = set()
        self.saved: dict[int, float] = {}
        self.saved_by_module: dict[str, float] = defaultdict(float)
        self.uncounted: dict[str, int] = defaultdict(int)
        self.last_forward: _Event | None = None
        self.last_outputs: set[int] = set()
        self.pending: list[float] = []

    def path(self) -> str:
        return self.stack[-1]

    # -- recording ------------------------------------------------------------------------
    def record(self, name: str, args: Any, kwargs: dict[str, Any], out: Any) -> None:
        ins = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        node = torch._C._current_autograd_node()
        phase = "backward" if node is not None else "forward"
        path = self.path()
        if node is not None:
            path = node.metadata.get("gpuplan_module", "") if hasattr(node, "metadata") else ""
        kind = kind_of(name)
        counted = True
        if name in FORMULAS:
            flops = FORMULAS[name](_shape_args(args), _shape_args(kwargs),
                                   [tuple(o.shape) for o in outs])
        else:
            flops = elementwise_flops(kind, [t.numel() for t in ins], [t.numel() for t in outs])
            if kind in MATMUL_KINDS:
                counted = False
                self.uncounted[name] += 1
        if name == "embedding":  # a gather reads the rows it returns, not the whole table
            read = float(ins[1].numel() * ins[1].element_size() + _tensor_bytes(outs))
        else:
            read = _tensor_bytes(ins)
        written = _tensor_bytes(outs)
        ref = next((t for t in ins if t.is_floating_point()), outs[0] if outs else None)
        dtype = dtype_name(ref.dtype) if ref is not None else "fp32"
        useful = None
        if kind == "attention" and self._is_causal(name, args, kwargs):
            q = args[1] if name.endswith("_backward") else args[0]
            k = args[2] if name.endswith("_backward") else args[1]
            sq, sk = q.shape[-2], k.shape[-2]
            # query i attends to i + 1 keys: (s + 1) / 2 on average (as the analytic builder)
            useful = flops * (sq + 1) / (2 * sk) if sq == sk else flops / 2
        shapes = ", ".join("x".join(map(str, t.shape)) for t in ins[:3])
        ev = _Event(path, name, phase, kind, dtype, float(flops), read, written, shapes,
                    useful=useful, counted=counted)
        self.events.append(ev)
        if phase == "forward":
            # autograd saves an op's inputs before the kernel runs and its outputs after
            ev.saved += sum(self.pending)
            self.pending.clear()
            self.last_forward = ev
            self.last_outputs = {_storage_key(o) for o in outs}

    @staticmethod
    def _is_causal(name: str, args: Any, kwargs: dict[str, Any]) -> bool:
        if kwargs.get("is_causal"):
            return True
        if name.endswith("_backward"):
            flags = [a for a in args[4:] if isinstance(a, bool)]
        else:
            flags = [a for a in args[3:] if isinstance(a, bool)]
        return bool(flags and flags[0])

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key in self.param_keys or key in self.saved:
            return t
        nbytes = float(t.untyped_storage().nbytes())
        self.saved[key] = nbytes
        path = self.path()
        self.saved_by_module[path] += nbytes
        if self.last_forward is not None and key in self.last_outputs:
            self.last_forward.saved += nbytes
        else:
            self.pending.append(nbytes)
        return t

    # -- kernel emulation -------------------------------------------------------------------
    def sdpa(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None,
             dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
             enable_gqa: bool = False) -> torch.Tensor:
        f = torch.nn.functional.scaled_dot_product_attention
        fused_ok = (q.dim() == 4 and q.shape[-1] == k.shape[-1] == v.shape[-1]
                    and q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1
                    and q.dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64)
                    and (q.shape[1] == k.shape[1] or (enable_gqa and q.shape[1] % k.shape[1] == 0)))
        if self.target == "cpu":
            # ATen sdp_utils_cpp: the CPU flash kernel is chosen unless dropout is on.
            if fused_ok and dropout_p == 0.0:
                return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                    q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
            return f(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                     scale=scale, enable_gqa=enable_gqa)
        # CUDA (sdp_utils.cpp): flash for fp16/bf16 without an explicit mask, head_dim <= 256;
        # memory-efficient otherwise (masks, fp32); math as the last resort.
        if fused_ok and q.shape[1] != k.shape[1]:
            rep = q.shape[1] // k.shape[1]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if (fused_ok and attn_mask is None and q.dtype in (torch.float16, torch.bfloat16)
                and q.shape[-1] <= 256):
            return torch.ops.aten._scaled_dot_product_flash_attention(
                q, k, v, dropout_p, is_causal, False, scale=scale)[0]
        if fused_ok and q.dtype != torch.float64:
            return torch.ops.aten._scaled_dot_product_efficient_attention(
                q, k, v, attn_mask, True, dropout_p, is_causal, scale=scale)[0]
        return f(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                 scale=scale, enable_gqa=enable_gqa)

    def dropout(self, x: torch.Tensor, p: float = 0.5, training: bool = True,
                inplace: bool = False) -> torch.Tensor:
        if training and 0.0 < p < 1.0:
            return torch.ops.aten.native_dropout(x, p, True)[0]  # CUDA: fused, bool mask
        return x

    # -- result -----------------------------------------------------------------------------
    def ops(self) -> OpList:
        groups: dict[tuple[str, ...], list[_Event]] = {}
        for ev in self.events:
            norm, _ = _normalize_path(ev.path)
            key = (norm, ev.aten, ev.phase, ev.shapes, ev.dtype)
            groups.setdefault(key, []).append(ev)
        ops = []
        for (norm, aten, phase, shapes, dtype), evs in groups.items():
            e, n = evs[0], len(evs)
            suffix = ".grad" if phase == "backward" else ""
            useful = None if e.useful is None else sum(x.useful or 0.0 for x in evs) / n
            ops.append(Op(
                name=f"{norm}.{aten}{suffix}" if norm else f"{aten}{suffix}",
                kind=e.kind,  # type: ignore[arg-type]
                flops=sum(x.flops for x in evs) / n,
                bytes_read=sum(x.bytes_read for x in evs) / n,
                bytes_written=sum(x.bytes_written for x in evs) / n,
                dtype=dtype, phase=phase,  # type: ignore[arg-type]
                component=_component(norm, e.kind), count=n,
                saved_bytes=sum(x.saved for x in evs) / n, useful_flops=useful,
                layer="layer" if "*" in norm else None, shape=shapes,
                fusable=e.kind in ("elementwise", "norm", "softmax"),
            ))
        return OpList(tuple(ops))


@contextmanager
def _module_hooks(module: torch.nn.Module, tracer: _Tracer) -> Iterator[None]:
    handles = []
    for name, sub in module.named_modules():
        def pre(_m: Any, _a: Any, name: str = name) -> None:
            tracer.stack.append(name)

        def post(_m: Any, _a: Any, _o: Any) -> None:
            tracer.stack.pop()

        handles.append(sub.register_forward_pre_hook(pre))
        handles.append(sub.register_forward_hook(post, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _to_meta(x: Any, memo: dict[int, torch.Tensor]) -> Any:
    """Meta copies of CPU tensors; one tensor passed twice (input_ids=ids, labels=ids) stays
    one storage."""

    def conv(t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.device.type != "meta":
            if id(t) not in memo:
                memo[id(t)] = torch.empty_like(t, device="meta").requires_grad_(t.requires_grad)
            return memo[id(t)]
        return t

    return tree_map(conv, x)


def _backward_roots(out: Any) -> list[torch.Tensor]:
    """A scalar output (a loss) is the root; else every floating output (= grad of their sum)."""
    loss = getattr(out, "loss", None)
    if loss is None and isinstance(out, dict):
        loss = out.get("loss")
    if isinstance(loss, torch.Tensor) and loss.requires_grad:
        return [loss]
    if isinstance(out, torch.Tensor):
        return [out] if out.requires_grad else []
    leaves = out.to_tuple() if hasattr(out, "to_tuple") else out
    return [t for t in tree_flatten(leaves)[0]
            if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]


def trace(module: torch.nn.Module, *example_inputs: Any, train: bool = True,
          target: Target | None = None, **example_kwargs: Any) -> Trace:
    """Trace `module(*example_inputs, **example_kwargs)` on the meta device.

    The module and inputs may be on the CPU or on meta; nothing is copied. With train=True the
    backward pass runs from the output (a scalar loss, else the sum of the outputs) and its ops
    are recorded. `target` ("cpu" or "cuda") selects whose kernel choices to emulate; by default
    the device of the module's parameters (meta counts as cpu).
    """
    if target is None:
        devs = {p.device.type for p in module.parameters()}
        target = "cuda" if "cuda" in devs else "cpu"
    tracer = _Tracer(target)
    params: dict[str, torch.Tensor] = {}
    param_bytes = param_count = 0
    param_tensors = 0
    for name, p in module.named_parameters():
        mp = p if p.device.type == "meta" else torch.nn.Parameter(
            torch.empty_like(p, device="meta"), requires_grad=p.requires_grad)
        if not train:
            mp = mp.detach()
        params[name] = mp
        tracer.param_keys.add(_storage_key(mp))
        param_bytes += p.numel() * p.element_size()
        param_count += p.numel()
        param_tensors += 1
    for name, b in module.named_buffers():
        params[name] = b if b.device.type == "meta" else torch.empty_like(b, device="meta")
    memo: dict[int, torch.Tensor] = {}
    args, kwargs = _to_meta(example_inputs, memo), _to_meta(example_kwargs, memo)
    was_training = module.training
    module.train(train)
    try:
        grad_ctx = torch.enable_grad() if train else torch.no_grad()
        with grad_ctx, _module_hooks(module, tracer), _Tagger(tracer), _Recorder(tracer), \
                torch.autograd.graph.saved_tensors_hooks(tracer.pack, lambda t: t):
            out = torch.func.functional_call(module, params, args, kwargs)
        if train:
            roots = _backward_roots(out)
            grads = [torch.ones_like(r) for r in roots]
            with _Recorder(tracer):
                torch.autograd.backward(roots, grads)
    finally:
        module.train(was_training)
    return _result(tracer, module, param_bytes, param_count, param_tensors)


def _prefixes(path: str) -> list[str]:
    """'a.b.c' -> ['', 'a', 'a.b', 'a.b.c']: the module and all its parents."""
    parts = path.split(".") if path else []
    return [""] + [".".join(parts[: i + 1]) for i in range(len(parts))]


def _result(tracer: _Tracer, module: torch.nn.Module, param_bytes: int, param_count: int,
            param_tensors: int) -> Trace:
    ops = tracer.ops()
    fwd, bwd = ops.phase("forward"), ops.phase("backward")
    modules: dict[str, ModuleStats] = defaultdict(ModuleStats)
    for ev in tracer.events:
        if ev.kind in MATMUL_KINDS:
            for name in _prefixes(ev.path):
                if ev.phase == "forward":
                    modules[name].forward_flops += ev.flops
                else:
                    modules[name].backward_flops += ev.flops
    for path, nbytes in tracer.saved_by_module.items():
        for name in _prefixes(path):
            modules[name].saved_activation_bytes += nbytes
    for name, sub in module.named_modules():
        modules[name].param_bytes = float(sum(p.numel() * p.element_size()
                                              for p in sub.parameters()))
    return Trace(
        forward_flops=fwd.flops(matmul_only=True), backward_flops=bwd.flops(matmul_only=True),
        forward_flops_all=fwd.flops(), useful_forward_flops=fwd.useful_flops(matmul_only=True),
        param_bytes=param_bytes, param_count=param_count,
        saved_activation_bytes=int(sum(tracer.saved.values())), param_tensors=param_tensors,
        ops=ops,
        modules=dict(modules), uncounted_ops=dict(tracer.uncounted), target=tracer.target,
    )
