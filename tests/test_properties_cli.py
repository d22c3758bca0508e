"""Properties across the estimators and the command line (hypothesis), complementing
test_memory_properties.py: for any valid input every JSON output is one finite, non-negative,
round-tripping object (or the input is refused with one line, exit 2); breakdowns sum to their
totals; memory is monotone in layers; time is never below the roofline floor; per-GPU model
states never rise with more GPUs under ZeRO-3."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpuplan.report.output as output
from gpuplan.cli.main import main
from gpuplan.estimate.flops import flops_summary
from gpuplan.estimate.memory import TrainConfig, train_memory
from gpuplan.estimate.training import step_time
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster

FAST = settings(max_examples=int(os.environ.get("PROP_EXAMPLES", 25)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
MODELS = ["gpt2", "llama-3-8b", "mixtral-8x7b", "qwen2.5-0.5b", "bert-base", "gemma-2-9b"]
GPUS = ["h100", "a100", "l4", "mi300x", "t4", "h200"]
SIGNED = {"margin_bytes"}
pow2 = st.sampled_from([1, 2, 4, 8, 16])


def _bad_numbers(x: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(x, dict):
        return [b for k, v in x.items() for b in _bad_numbers(v, f"{path}.{k}")]
    if isinstance(x, (list, tuple)):
        return [b for i, v in enumerate(x) for b in _bad_numbers(v, f"{path}[{i}]")]
    number = isinstance(x, (int, float)) and not isinstance(x, bool)
    if number and (not math.isfinite(x) or (x < 0 and path.rsplit(".", 1)[-1] not in SIGNED)):
        return [(path, x)]
    return []


def _run(argv: list[str], capsys: pytest.CaptureFixture[str],
         monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    seen: list[dict[str, Any]] = []
    real = output.print_json
    monkeypatch.setattr(output, "print_json", lambda obj: (seen.append(obj), real(obj)))
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    if code == 2:  # a valid-looking combination a rule refuses: one line, no traceback
        assert err.count("\n") == 1 and "Traceback" not in err and out == "", err
        return None
    assert code == 0, err
    parsed = json.loads(out)
    assert json.loads(json.dumps(parsed)) == parsed
    assert _bad_numbers(seen[0]) == []
    return parsed


@FAST
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS), mb=pow2, tp=pow2,
       pp=st.sampled_from([1, 2, 4]), zero=st.integers(0, 3),
       seq=st.sampled_from([1, 7, 512, 1024]), mode=st.sampled_from(["train", "infer"]))
def test_memory_json_is_finite_for_any_valid_input(model, gpu, mb, tp, pp, zero, seq, mode,
                                                   capsys, monkeypatch):
    if mode == "train":
        argv = ["memory", model, "--gpu", gpu, "--micro-batch", str(mb), "--tp", str(tp),
                "--pp", str(pp), "--zero", str(zero), "--seq-len", str(seq), "--fix"]
    else:
        argv = ["memory", model, "--gpu", gpu, "--mode", "infer", "--batch", str(mb),
                "--tp", str(tp), "--context", str(seq), "--fix"]
    r = _run(argv, capsys, monkeypatch)
    if r is not None:
        assert sum(r["per_gpu"].values()) == r["total_bytes"]


@FAST
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS),
       gpus=st.sampled_from([1, 2, 8, 64, 1024]), tp=pow2, mb=pow2,
       tokens=st.one_of(st.none(), st.floats(1, 1e18)),
       price=st.one_of(st.none(), st.floats(0, 1e4)))
def test_train_json_is_finite_for_any_valid_input(model, gpu, gpus, tp, mb, tokens, price,
                                                  capsys, monkeypatch):
    argv = ["train", model, "--gpu", gpu, "--gpus", str(gpus), "--tp", str(tp),
            "--micro-batch", str(mb), "--seq-len", "512"]
    argv += ["--tokens", repr(tokens)] if tokens is not None else []
    argv += ["--usd-per-gpu-hour", repr(price)] if price is not None else []
    r = _run(argv, capsys, monkeypatch)
    if r is not None and r["fits"]:
        assert sum(r["breakdown_s"].values()) == pytest.approx(r["step_time_s"], rel=1e-9)


@FAST
@given(model=st.sampled_from(MODELS), gpu=st.sampled_from(GPUS), batch=pow2,
       seq=st.sampled_from([1, 64, 512]), phase=st.sampled_from(["train", "prefill", "decode"]),
       fused=st.booleans())
def test_roofline_json_is_finite_and_time_above_the_floor(model, gpu, batch, seq, phase, fused,
                                                          capsys, monkeypatch):
    argv = ["roofline", model, "--gpu", gpu, "--batch", str(batch), "--seq-len", str(seq),
            "--phase", phase, "--top", "5"] + (["--fused"] if fused else [])
    r = _run(argv, capsys, monkeypatch)
    if r is None:
        return
    d = get_device(gpu)
    flops = sum(o["flops"] for o in r["ops"])
    nbytes = sum(o["bytes"] for o in r["ops"])
    # roofline floor (Williams et al. 2009): no step beats its FLOPs at the fastest peak or
    # its bytes at the memory bandwidth
    floor = max(flops / max(d.peak_flops_per_s.values()), nbytes / d.mem_bw_bytes_per_s)
    assert r["total_time_s"] >= floor * (1 - 1e-9)


@FAST
@given(model=st.sampled_from(MODELS), batch=st.integers(1, 64), seq=st.integers(1, 512),
       causal=st.booleans())
def test_flops_breakdown_sums_to_forward(model, batch, seq, causal):
    r = flops_summary(get_model(model), batch, seq, causal)
    assert sum(r["breakdown"].values()) == pytest.approx(r["forward_flops"], rel=1e-12)
    assert r["train_flops"] == pytest.approx(3 * r["forward_flops"], rel=1e-12)


@FAST
@given(layers=st.integers(1, 40), extra=st.integers(1, 8), mb=pow2,
       zero=st.integers(0, 3), gpu=st.sampled_from(GPUS))
def test_memory_monotone_in_layers(layers, extra, mb, zero, gpu):
    base = get_model("llama-3.2-1b")
    small = base.model_copy(update={"num_layers": layers})
    big = base.model_copy(update={"num_layers": layers + extra})
    cfg = TrainConfig(micro_batch=mb, seq_len=256, zero=zero, dp=4)
    d = get_device(gpu)
    assert train_memory(big, d, cfg).total_bytes >= train_memory(small, d, cfg).total_bytes


@FAST
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b", "mixtral-8x7b"]),
       dp=st.sampled_from([1, 2, 4, 8, 16, 64]), factor=st.sampled_from([2, 4, 8]))
def test_zero3_model_states_per_gpu_never_rise_with_more_gpus(model, dp, factor):
    m, d = get_model(model), get_device("h100")

    def states(n: int) -> int:
        r = train_memory(m, d, TrainConfig(micro_batch=1, seq_len=256, zero=3, dp=n))
        return r.per_gpu["weights"] + r.per_gpu["gradients"] + r.per_gpu["optimizer"]

    assert states(dp * factor) <= states(dp)


@FAST
@given(model=st.sampled_from(["gpt2", "llama-3.2-1b"]), gpus=st.sampled_from([1, 8, 64]),
       mb=pow2)
def test_step_time_never_below_the_compute_floor(model, gpus, mb):
    m, d = get_model(model), get_device("h100")
    cfg = TrainConfig(micro_batch=mb, seq_len=512, dp=gpus)
    res = step_time(m, default_cluster(d, gpus), cfg)
    floor = res.hardware_flops_per_step / (gpus * max(d.peak_flops_per_s.values()))
    assert res.step_time_s >= floor
