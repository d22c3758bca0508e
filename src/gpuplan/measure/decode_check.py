"""`gpuplan bench --only decode`: measured TTFT/TPOT of a ~100M-parameter decoder through
`transformers` next to the serving model's prediction from this machine's measured profile
(matmul FLOP/s, memory bandwidth, and the eager per-op cost measured here)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from gpuplan.measure.decode import DECODER_CONFIG, eager_op_overhead, measure_decode

DECODE_NEEDS = ("matmul", "memory")
"""Sections the prediction needs from the same run (the measured profile)."""
TOLERANCE = 0.25
"""The check's bar, fixed before measuring: predicted TTFT and TPOT each within 25% of the
measured."""


def decode_check(device: str, quick: bool, profile: dict[str, Any]) -> dict[str, Any]:
    """Measure, predict and compare; `profile` holds matmul and memory of this run."""
    from gpuplan.estimate.latency import latency, step_model
    from gpuplan.measure.profile import prediction_target
    from gpuplan.specs.hf_config import spec_from_hf_dict
    from gpuplan.specs.serving import ServeConfig

    dtype = "fp32" if device == "cpu" else "bf16"
    prompt, output, repeats = (32, 16, 2) if quick else (128, 64, 3)
    load_start = _load()
    over = eager_op_overhead(device, dtype, steps=15 if quick else 40,
                             repeats=3 if quick else 5,
                             # on a CPU the host's work shares the caches with the weight
                             # streams; on a GPU the streams run on the device, beside dispatch
                             stream_config=DECODER_CONFIG if device == "cpu" else None)
    dev, eff = prediction_target(profile)
    eff = replace(eff, kernel_overhead_s=over["time_s"])
    spec = spec_from_hf_dict(DECODER_CONFIG, "decoder-104m")
    cfg = ServeConfig(weight_dtype=dtype, kv_dtype=dtype, act_dtype=dtype, fused=False,
                      logits_all_positions=True)  # measure_decode calls the HF forward
    sm = step_model(spec, dev, cfg, eff, ops_per_layer=over["ops_per_step"] / spec.num_layers)
    pred = latency(sm, 1, prompt, output)
    meas = measure_decode(device, prompt, output, 1, dtype, repeats)
    err = {k: getattr(pred, k) / meas[k] - 1 for k in ("ttft_s", "tpot_s")}
    return {
        "model": "decoder-104m (Llama architecture, transformers config, random weights)",
        "params": meas["params"], "dtype": dtype, "batch": 1, "prompt_len": prompt,
        "output_len": output, "repeats": repeats, "threads": meas["threads"],
        "prediction_device": dev.name,
        "eager_op_overhead_s": over["time_s"], "ops_per_step": over["ops_per_step"],
        "eager_op_overhead_quiet_s": over["quiet_time_s"],
        "eager_overhead_what": over["what"],
        "measured": {"ttft_s": meas["ttft_s"], "tpot_s": meas["tpot_s"],
                     "ttft_runs_s": meas["ttft_runs_s"], "tpot_runs_s": meas["tpot_runs_s"]},
        "predicted": {"ttft_s": pred.ttft_s, "tpot_s": pred.tpot_s,
                      "weight_read_floor_s": pred.weight_read_floor_s,
                      "dispatch_per_step_s": over["time_s"] * over["ops_per_step"]},
        "ttft_error_ratio": err["ttft_s"], "tpot_error_ratio": err["tpot_s"],
        "tolerance_ratio": TOLERANCE, "tpot_within_tolerance": abs(err["tpot_s"]) <= TOLERANCE,
        "ttft_within_tolerance": abs(err["ttft_s"]) <= TOLERANCE,
        "load_average": {"start": load_start, "end": _load()},
        "unstable_reason": _disagreement(over.get("per_op_runs_s", []), meas["tpot_runs_s"]),
        "assumptions": sm.assumptions,
    }


def _disagreement(per_op: list[float], tpot: list[float]) -> str | None:
    """Why the runs cannot be trusted, if they disagree by more than the check's tolerance
    (max/min - 1): a busy machine changes both the per-op cost and the decode step."""
    for what, runs in (("per-op cost", per_op), ("TPOT", tpot)):
        if len(runs) >= 2 and min(runs) > 0 and max(runs) / min(runs) - 1 > TOLERANCE:
            return (f"{what} runs disagree by {max(runs) / min(runs) - 1:.0%} (> "
                    f"{TOLERANCE:.0%}): the machine is busy; re-run when it is quiet")
    return None


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        return None
