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


__all__ = ["__version__", "trace"]
