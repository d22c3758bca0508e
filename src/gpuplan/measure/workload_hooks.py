"""The process-wide hooks of a WorkloadSession (measure/workload.py). Every hook is undone when
the session exits; each records only while the session's measured window is open."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from gpuplan.measure.workload import READ_METHODS, user_frame

if TYPE_CHECKING:
    from gpuplan.measure.workload import WorkloadSession


def _patch(session: WorkloadSession, owner: Any, name: str,
           make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """Replace owner.name by make(original); remember how to put it back."""
    had = name in owner.__dict__
    orig = getattr(owner, name)
    setattr(owner, name, functools.wraps(orig)(make(orig)))

    def undo() -> None:
        if had:
            setattr(owner, name, orig)
        else:
            delattr(owner, name)

    session.undo.append(undo)


def install(s: WorkloadSession) -> None:
    _optimizer_hooks(s)
    _loader_hook(s)
    _module_hook(s)
    _backward_hooks(s)
    _copy_hooks(s)
    for method in READ_METHODS:
        _read_hook(s, method)


def _optimizer_hooks(s: WorkloadSession) -> None:
    from torch.optim.optimizer import (
        register_optimizer_step_post_hook,
        register_optimizer_step_pre_hook,
    )

    pre = register_optimizer_step_pre_hook(lambda opt, args, kwargs: s.optimizer_pre())
    post = register_optimizer_step_post_hook(
        lambda opt, args, kwargs: s.optimizer_post(type(opt).__name__))
    s.undo += [pre.remove, post.remove]


def _loader_hook(s: WorkloadSession) -> None:
    from torch.utils.data import dataloader

    base = getattr(dataloader, "_BaseDataLoaderIter", None)
    if base is None:  # pragma: no cover - a torch without it: input wait is not measured
        return

    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __next__(it: Any) -> Any:
            s.note_iterator(it)
            t0 = time.perf_counter()
            try:
                return orig(it)
            finally:
                s.record("input_wait", t0, time.perf_counter())
        return __next__

    _patch(s, base, "__next__", make)


def _module_hook(s: WorkloadSession) -> None:
    depth = s.depth

    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def __call__(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
            if depth["module"] or depth["backward"]:
                return orig(module, *args, **kwargs)
            s.note_model_call(module, args, kwargs)
            depth["module"] += 1
            t0 = time.perf_counter()
            try:
                return orig(module, *args, **kwargs)
            finally:
                depth["module"] -= 1
                s.record("forward", t0, time.perf_counter())
        return __call__

    _patch(s, torch.nn.Module, "__call__", make)


def _timed(s: WorkloadSession, label: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    depth = s.depth

    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if depth[label]:
                return orig(*args, **kwargs)
            depth[label] += 1
            t0 = time.perf_counter()
            try:
                return orig(*args, **kwargs)
            finally:
                depth[label] -= 1
                s.record(label, t0, time.perf_counter())
        return timed
    return make


def _backward_hooks(s: WorkloadSession) -> None:
    _patch(s, torch.Tensor, "backward", _timed(s, "backward"))
    _patch(s, torch.autograd, "backward", _timed(s, "backward"))


def _copy_hooks(s: WorkloadSession) -> None:
    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def to(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if not s.active:
                return orig(t, *args, **kwargs)
            src = t.device.type
            where = user_frame() if src != "cpu" else None
            t0 = time.perf_counter()
            out = orig(t, *args, **kwargs)
            t1 = time.perf_counter()
            dst = out.device.type if isinstance(out, torch.Tensor) else src
            if src == "cpu" and dst != "cpu" and out is not t:
                nb = bool(kwargs.get("non_blocking") or any(a is True for a in args))
                s.raw.copies.append((t.numel() * t.element_size(), t.is_pinned(), nb, t0, t1))
            elif src != "cpu" and dst == "cpu" and where is not None:
                s.raw.reads.append(("to_cpu", where[0], where[1], t0, t1))
            return out
        return to

    _patch(s, torch.Tensor, "to", make)
    _patch(s, torch.Tensor, "cuda", make)
    _read_hook(s, "cpu", device_only=True)


def _read_hook(s: WorkloadSession, method: str, device_only: bool = False) -> None:
    depth = s.depth

    def make(orig: Callable[..., Any]) -> Callable[..., Any]:
        def read(t: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if not s.active or depth["read"] or (device_only and t.device.type == "cpu"):
                return orig(t, *args, **kwargs)
            where = user_frame()
            if where is None:
                return orig(t, *args, **kwargs)
            depth["read"] += 1
            t0 = time.perf_counter()
            try:
                with torch.profiler.record_function("gpuplan::host_read"):
                    return orig(t, *args, **kwargs)
            finally:
                depth["read"] -= 1
                s.raw.reads.append((method.strip("_"), where[0], where[1], t0,
                                    time.perf_counter()))
        return read

    _patch(s, torch.Tensor, method, make)
