"""Finish a profiling session (counting pass, roofline, summary) and the Python API:

    with gpuplan.profile(steps=20, warmup=5) as prof:
        for x, y in loader:
            ...
            opt.step()
            prof.step()
    print(prof.result["step_time_s"])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuplan.estimate.efficiency import default_efficiency, efficiency_from_profile
from gpuplan.estimate.workload_summary import Counted, summarize
from gpuplan.measure.workload import WorkloadSession
from gpuplan.measure.workload_count import count_pass, roofline_target


def finish(session: WorkloadSession) -> dict[str, Any]:
    """The profile result of a session whose window has closed."""
    tr, model = count_pass(session)
    device, prof, source = roofline_target(session.device)
    eff = efficiency_from_profile(prof, device) if prof else default_efficiency(device)
    counted = Counted(tr.ops if tr else None, tr.param_count if tr else 0, model)
    out = summarize(session.raw, counted, device, eff, source)
    if tr is None:
        out["assumptions"]["counting"] = f"no FLOPs, bytes or prediction: {model}"
    return out


class Profile:
    """`with gpuplan.profile() as prof:` ... `prof.step()` at the end of each training step.
    Steps come from prof.step() calls (optimizer hooks only time the optimizer). Without
    `steps`, every step after the warm-up until the block ends is measured."""

    def __init__(self, steps: int | None = None, warmup: int = 0, trace: str | None = None,
                 device: str | None = None,
                 render: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.render = render
        self.session = WorkloadSession(steps or 10**9, warmup, device=device, trace_path=trace,
                                       use_optimizer_hooks=False)
        self.result: dict[str, Any] | None = None

    def __enter__(self) -> Profile:
        self.session.__enter__()
        return self

    def step(self) -> None:
        self.session.step()

    def __exit__(self, *exc: object) -> None:
        self.session.__exit__(*exc)
        if exc[0] is None and self.session.measured_steps > 0:
            self.result = finish(self.session)

    def report(self) -> None:
        """Print the terminal report (the renderer comes from the report layer, given by
        `gpuplan.profile`)."""
        if self.result is None:
            raise RuntimeError("no measured step: call prof.step() at the end of each step")
        if self.render is None:
            raise RuntimeError("no renderer: use gpuplan.profile(), or print prof.result")
        self.render(self.result)
