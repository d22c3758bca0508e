"""gpuplan: will it fit, how fast, what does it cost, and what does my machine really do.

The planner core (units, specs, ops, estimate) needs no PyTorch; `gpuplan.trace` imports torch
only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from gpuplan.ops.tracer import Trace


def trace(module: Any, *example_inputs: Any, train: bool = True, **kwargs: Any) -> Trace:
    """Trace a torch.nn.Module on the meta device; see gpuplan.ops.tracer.trace."""
    from gpuplan.ops.tracer import trace as _trace

    return _trace(module, *example_inputs, train=train, **kwargs)


def profile(steps: int | None = None, warmup: int = 0, trace: str | None = None,
            device: str | None = None) -> Any:
    """Profile a training loop: `with gpuplan.profile() as prof:` and `prof.step()` after each
    step; `prof.result` holds what `gpuplan profile --json` prints. See
    gpuplan.measure.workload_api.Profile."""
    import importlib  # the measure layer (torch) loads only when called

    api = importlib.import_module("gpuplan.measure.workload_api")
    return api.Profile(steps=steps, warmup=warmup, trace=trace, device=device,
                       render=_render_profile)


def _render_profile(result: dict[str, Any]) -> None:
    from gpuplan.report.output import console
    from gpuplan.report.profile_render import render

    render(console(), result)


__all__ = ["__version__", "profile", "trace"]
