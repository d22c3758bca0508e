"""Profile a real PyTorch training loop: step boundaries, where each step's wall time goes, host
reads, host-to-device copies and per-operator time.

A `WorkloadSession` installs process-wide hooks while it is active and removes them on exit:

- step boundaries: `torch.optim` global optimizer-step hooks (the end of `optimizer.step()`) or
  explicit `step()` calls (the Python API);
- input wait: time inside the data loader iterator's `__next__`;
- forward: time inside outermost `nn.Module.__call__` (nested modules are inside it);
- backward: time inside `Tensor.backward` / `torch.autograd.backward`;
- optimizer: from the pre- to the post-step hook;
- host-to-device: `Tensor.to` / `Tensor.cuda` from the CPU to a device (bytes, pinned or not);
- host reads (`.item()`, `.tolist()`, `.numpy()`, `.cpu()` of a device tensor, printing or
  formatting a tensor, `bool()`/`float()`/`int()` of one) called from user code, each with the
  user's file and line;
- per-op time: torch.profiler over the measured steps only (warm-up steps are skipped).

All timestamps are `time.perf_counter()` seconds; the pure analysis is in
`gpuplan.estimate.workload`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch

from gpuplan.errors import GpuplanError
from gpuplan.estimate.workload import WorkloadRecord


class StopProfiling(BaseException):
    """Raised from the optimizer hook after the last measured step to stop the user's script.
    A BaseException so that a script's `except Exception` does not swallow it."""


_SKIP_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules["gpuplan"])
                   if m.__file__)
READ_METHODS = ("item", "tolist", "numpy", "__repr__", "__format__", "__bool__", "__float__",
                "__int__")


def user_frame(depth: int = 2) -> tuple[str, int] | None:
    """(file, line) of the caller `depth` frames up when it is user code (not torch, not
    gpuplan), else None: reads made inside torch itself are not the user's."""
    f = sys._getframe(depth)
    name = f.f_code.co_filename
    if name.startswith(_SKIP_DIRS):
        return None
    return name, f.f_lineno


class WorkloadSession:
    """Hooks around a training loop; `steps` measured steps after `warmup` skipped ones.

    With `stop_script=True` the optimizer hook raises StopProfiling after the last measured
    step (the CLI's runner stops the script that way)."""

    def __init__(self, steps: int, warmup: int, device: str | None = None,
                 stop_script: bool = False, trace_path: str | None = None,
                 use_optimizer_hooks: bool = True) -> None:
        if steps < 1:
            raise GpuplanError(f"--steps: {steps} is not valid; expected >= 1")
        if warmup < 0:
            raise GpuplanError(f"--warmup: {warmup} is not valid; expected >= 0")
        self.steps, self.warmup, self.stop_script = steps, warmup, stop_script
        self.trace_path = trace_path
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.raw = WorkloadRecord(self.device)
        self.active = False
        self.finished = False
        self.model: torch.nn.Module | None = None
        self.model_inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._calls: dict[int, tuple[weakref.ref[torch.nn.Module], int, int]] = {}
        self.undo: list[Callable[[], None]] = []
        self._iters: list[weakref.ref[Any]] = []
        self.depth = {"module": 0, "backward": 0, "read": 0}
        self._opt_start = 0.0
        self._prof: Any = None
        self._use_opt = use_optimizer_hooks
        self._manual = False

    # -- public ---------------------------------------------------------------------------
    def __enter__(self) -> WorkloadSession:
        from gpuplan.measure import workload_hooks

        workload_hooks.install(self)
        if self.warmup == 0:
            self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.active:
                self._stop()
        finally:
            for undo in reversed(self.undo):
                undo()
            self.undo.clear()
            self.shutdown_loaders()

    def step(self) -> None:
        """Mark the end of one training step (the Python API)."""
        self._manual = True
        self._boundary()

    @property
    def measured_steps(self) -> int:
        return max(len(self.raw.bounds) - 1, 0)

    def shutdown_loaders(self) -> None:
        """Stop the worker processes of every data loader iterator seen (persistent or not)."""
        for ref in self._iters:
            it = ref()
            if it is not None and hasattr(it, "_shutdown_workers"):
                with contextlib.suppress(Exception):
                    it._shutdown_workers()
        self._iters.clear()

    # -- recording (called by the hooks) ----------------------------------------------------
    def record(self, label: str, t0: float, t1: float) -> None:
        if self.active:
            self.raw.intervals.append((label, t0, t1))

    def optimizer_pre(self) -> None:
        self._opt_start = time.perf_counter()

    def optimizer_post(self, name: str) -> None:
        t = time.perf_counter()
        self.record("optimizer", self._opt_start, t)
        if self.active and name not in self.raw.optimizers:
            self.raw.optimizers.append(name)
        if self._use_opt and not self._manual:
            self._boundary()

    def note_iterator(self, it: Any) -> None:
        if any(r() is it for r in self._iters):
            return
        self._iters.append(weakref.ref(it))
        self.raw.loaders.append({
            "num_workers": int(getattr(it, "_num_workers", 0)),
            "pin_memory": bool(getattr(it, "_pin_memory", False)),
            "prefetch_factor": getattr(it, "_prefetch_factor", None),
            "persistent_workers": bool(getattr(it, "_persistent_workers", False)),
        })

    def note_model_call(self, module: torch.nn.Module, args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> None:
        """Outermost module calls: the one with most parameters is the trained model."""
        if not self.active:
            return
        key = id(module)
        if key not in self._calls:
            n = sum(p.numel() for p in module.parameters())
            self._calls[key] = (weakref.ref(module), n, 0)
            best = self.model
            if n > 0 and (best is None or n > sum(p.numel() for p in best.parameters())):
                self.model, self.model_inputs = module, (args, kwargs)
        ref, n, c = self._calls[key]
        self._calls[key] = (ref, n, c + 1)

    # -- window -----------------------------------------------------------------------------
    def _boundary(self) -> None:
        self.raw.steps_seen += 1
        if not self.active and not self.finished and self.raw.steps_seen == self.warmup:
            self._start()
        elif self.active:
            self._sync()
            self.raw.bounds.append(time.perf_counter())
            if self.measured_steps >= self.steps:
                self._stop()
                if self.stop_script:
                    raise StopProfiling

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def _start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU]
        if self.device == "cuda":
            acts.append(ProfilerActivity.CUDA)
            torch.cuda.reset_peak_memory_stats()
        self._prof = profile(activities=acts, record_shapes=False)
        self._prof.start()
        self._sync()
        self.raw.mark_s = time.perf_counter()
        with torch.profiler.record_function("gpuplan::mark"):
            pass
        self.active = True
        self.raw.bounds.append(time.perf_counter())

    def _stop(self) -> None:
        self.active, self.finished = False, True
        if self.device == "cuda":
            self.raw.peak_memory_bytes = int(torch.cuda.max_memory_allocated())
            self.raw.capacity_bytes = int(torch.cuda.get_device_properties(0).total_memory)
        prof, self._prof = self._prof, None
        if prof is None:
            return
        prof.stop()
        if self.model is not None:
            self.raw.model_calls = self._calls.get(id(self.model), (None, 0, 0))[2]
        from gpuplan.measure.workload_ops import collect

        collect(prof, self.raw)
        if self.trace_path:
            prof.export_chrome_trace(self.trace_path)
