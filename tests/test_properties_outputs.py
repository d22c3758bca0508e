"""Properties of the commands test_properties_cli.py does not cover (issue 15): for any valid
input, `serve`, `cost`, `plan` and `advise` print one finite, non-negative JSON object that
round-trips (or refuse with one line, exit 2); `train`'s step-time breakdown sums to the step
time; the serving simulator conserves requests whichever way the load is given."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import main

N = int(os.environ.get("PROP_EXAMPLES", 25))
FAST = settings(max_examples=N, deadline=None, suppress_health_check=list(HealthCheck))
SLOW = settings(max_examples=max(2, N // 6), deadline=None,
                suppress_health_check=list(HealthCheck))  # plan/advise screen every device
SIGNED = ("margin",)
"""keys whose numbers may be negative by meaning (a memory margin below zero: does not fit)"""


def bad_numbers(x: Any, key: str = "") -> list[tuple[str, Any]]:
    if isinstance(x, dict):
        return [b for k, v in x.items() for b in bad_numbers(v, str(k))]
    if isinstance(x, list):
        return [b for v in x for b in bad_numbers(v, key)]
    if isinstance(x, (int, float)) and not isinstance(x, bool) and (
            not math.isfinite(x) or (x < 0 and not any(s in key for s in SIGNED))):
        return [(key, x)]
    return []


def run_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any] | None:
    """The command's JSON (finite, non-negative, round-tripping), or None when a rule refused
    the combination with one line and exit 2."""
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    if code == 2:
        assert err.count("\n") == 1 and "Traceback" not in err and out == "", err
        return None
    assert code == 0, err
    parsed: dict[str, Any] = json.loads(out)
    assert json.loads(json.dumps(parsed)) == parsed
    assert bad_numbers(parsed) == []
    return parsed


dtypes = st.sampled_from(["bf16", "fp8", "int8", "int4"])


@FAST
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b", "qwen2.5-7b", "mixtral-8x7b"]),
       gpu=st.sampled_from(["h100", "a10g", "mi300x", "l4"]), batch=st.integers(1, 4096),
       prompt=st.integers(1, 1024), output=st.integers(1, 1024),
       tp=st.sampled_from([1, 2, 4, 8]), w=dtypes, kv=dtypes)
def test_serve_latency_json_is_finite(model: str, gpu: str, batch: int, prompt: int,
                                      output: int, tp: int, w: str, kv: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(["serve", model, "--gpu", gpu, "--batch", str(batch), "--prompt-len",
                  str(prompt), "--output-len", str(output), "--tp", str(tp), "--weight-dtype",
                  w, "--kv-dtype", kv], capsys)
    if r is not None:  # one output token comes with the prefill: no time per further token
        assert r["ttft_s"] > 0 and (r["tpot_s"] > 0) == (output > 1)


@FAST
@given(gpu=st.sampled_from(["h100", "h200", "b200", "mi300x", "l40s"]),
       gpus=st.integers(1, 10**6), years=st.floats(0.01, 20), util=st.floats(0, 1),
       kwh=st.one_of(st.none(), st.floats(0, 10)), pue=st.one_of(st.none(), st.floats(1, 3)))
def test_cost_json_is_finite_and_buying_adds_up(gpu: str, gpus: int, years: float, util: float,
                                                kwh: float | None, pue: float | None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cost", gpu, "--gpus", str(gpus), "--years", repr(years), "--utilization",
            repr(util)]
    argv += ["--usd-per-kwh", repr(kwh)] if kwh is not None else []
    argv += ["--pue", repr(pue)] if pue is not None else []
    r = run_json(argv, capsys)
    if r is not None:
        b = r["buy"]
        assert b["capex_usd"] == pytest.approx(b["gpus_usd"] + b["servers_usd"]
                                               + b["network_usd"], rel=1e-9)
        assert b["energy_usd"] == pytest.approx(b["energy_gpu_usd"] + b["energy_host_usd"],
                                                rel=1e-9, abs=1e-9)


@FAST
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b", "mixtral-8x7b", "llama-3-8b"]),
       gpu=st.sampled_from(["h100", "a100", "mi300x", "l4"]), gpus=st.sampled_from([1, 8, 64]),
       mb=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "selective", "full"]))
def test_train_step_breakdown_sums_to_the_step_time(model: str, gpu: str, gpus: int, mb: int,
                                                    tp: int, recompute: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(["train", model, "--gpu", gpu, "--gpus", str(gpus), "--micro-batch", str(mb),
                  "--tp", str(tp), "--recompute", recompute], capsys)
    if r is not None:
        assert sum(r["breakdown_s"].values()) == pytest.approx(r["step_time_s"], rel=1e-9)


@SLOW
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b", "qwen2.5-7b"]),
       goal=st.sampled_from(["train", "serve", "both"]), gpus=st.sampled_from([1, 8, 512]),
       rate=st.floats(0.01, 1000))
def test_plan_json_is_finite(model: str, goal: str, gpus: int, rate: float,
                             capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", model, "--goal", goal]
    argv += ["--gpus", str(gpus)] if goal != "serve" else []
    argv += ["--rate", repr(rate)] if goal != "train" else []
    run_json(argv, capsys)


@SLOW
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b", "qwen2.5-7b"]),
       goal=st.sampled_from(["pretrain", "finetune", "lora", "qlora", "serve"]))
def test_advise_json_is_finite(model: str, goal: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    run_json(["advise", model, "--goal", goal], capsys)


TRACE_HEAD = "arrival_s,prompt_tokens,output_tokens\n"


@FAST
@given(n=st.integers(1, 40), how=st.sampled_from(["rate", "max", "trace"]),
       rate=st.floats(0.01, 1e4), p=st.integers(1, 500), o=st.integers(1, 200),
       seed=st.integers(0, 2**32))
def test_the_simulator_conserves_requests(n: int, how: str, rate: float, p: int, o: int,
                                          seed: int, tmp_path_factory: pytest.TempPathFactory,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "llama-3.2-1b", "--gpu", "l4"]
    if how == "trace":
        f = Path(tmp_path_factory.mktemp("trace")) / "t.csv"
        f.write_text(TRACE_HEAD + "".join(f"{i / rate!r},{p},{o}\n" for i in range(n)))
        argv += ["--trace", str(f)]
    else:
        argv += ["--requests", str(n), "--prompt-len", str(p), "--output-len", str(o),
                 "--seed", str(seed)]
        argv += ["--rate", repr(rate)] if how == "rate" else ["--max-throughput"]
    r = run_json(argv, capsys)
    assert r is not None
    assert r["completed_requests"] == n
