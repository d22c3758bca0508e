"""`gpuplan plan`: its numbers equal `train` and `serve` re-run on its own choices; the serving
screen behind its options and `advise --goal serve` keeps its invariants."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.cli.main import main
from gpuplan.estimate.latency import step_model
from gpuplan.estimate.serve_rank import ServeLoad, advise_serve, point, screen
from gpuplan.specs.catalog import device_catalog, get_device, get_model
from gpuplan.specs.serving import ServeConfig


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def rerun(capsys: pytest.CaptureFixture[str], command: str) -> dict:
    argv = shlex.split(command)
    assert argv[0] == "gpuplan"
    return run_json(capsys, *argv[1:])


@pytest.fixture(scope="module")
def plan_8b() -> dict:
    out = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "plan", "llama-3-8b",
                          "--json"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_plan_contract_keys(plan_8b):
    r = plan_8b
    assert {"train", "serve", "options", "advice", "assumptions", "commands"} <= set(r)
    assert {"device", "gpus", "global_batch", "layout"} <= set(r["train"])
    assert {"ttft_s", "tpot_s", "output_tokens_per_s", "cost_per_million_tokens_usd"} \
        <= set(r["serve"])
    assert len(r["options"]) == len(list(device_catalog()))
    assert r["advice"] and all(isinstance(a, str) for a in r["advice"])
    # Chinchilla default: 20 tokens per parameter (Hoffmann et al. 2022)
    assert r["train"]["run"]["tokens"] == pytest.approx(20 * get_model("llama-3-8b").params())


def test_plan_train_equals_train_rerun(plan_8b, capsys):
    assert rerun(capsys, plan_8b["commands"]["train"]) == plan_8b["train"]


def test_plan_serve_equals_serve_rerun(plan_8b, capsys):
    assert rerun(capsys, plan_8b["commands"]["serve"]) == plan_8b["serve"]


def test_plan_train_is_the_best_searched_layout(plan_8b, capsys):
    s = run_json(capsys, "train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--search",
                 "--top", "1")
    assert plan_8b["train"]["step_time_s"] == pytest.approx(s["top"][0]["step_time_s"])


def test_plan_other_device_and_goals_rerun(capsys):
    r = run_json(capsys, "plan", "qwen2.5-0.5b", "--gpu", "l4", "--gpus", "2", "--goal", "train",
                 "--tokens", "1e9")
    assert "serve" not in r and "serve" not in r["options"][0]
    assert r["train"]["run"]["tokens"] == 1e9
    assert rerun(capsys, r["commands"]["train"]) == r["train"]
    s = run_json(capsys, "plan", "qwen2.5-0.5b", "--gpu", "l4", "--goal", "serve", "--rate",
                 "5")
    assert "train" not in s
    assert rerun(capsys, s["commands"]["serve"]) == s["serve"]


def test_plan_training_that_does_not_fit_says_so(capsys):
    r = run_json(capsys, "plan", "llama-3-70b", "--gpu", "rtx-4090", "--gpus", "1", "--goal",
                 "train")
    assert r["train"]["fits"] is False
    assert "does not fit" in r["advice"][0]
    row = next(o for o in r["options"] if o["device"] == "RTX-4090")
    assert row["train"]["gpus"] is None or row["train"]["gpus"] > 1


def test_plan_bad_input_one_line_exit_2():
    out = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "plan", "llama-3-8b",
                          "--goal", "fly"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and out.stdout == ""
    out = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "plan", "llama-3-8b",
                          "--gpu", "nope"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_plan_imports_no_torch():
    """The README's first command must run where torch is not installed."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from gpuplan.cli.main import main\n"
            "raise SystemExit(main(['plan', 'qwen2.5-0.5b', '--gpu', 'l4', '--json']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "torch" not in out.stderr


# ---- the serving screen ----------------------------------------------------------------

M8 = get_model("llama-3-8b")
H100 = get_device("h100")
LOAD = ServeLoad(512, 256, 4.0, 2.0, 0.2)


def test_screen_point_formula():
    """cycle = O x step + B x p1 (prefills stall decode): at B = 1 requests/s = 1 / cycle and
    TPOT = cycle / O, so requests/s x TPOT x O = B exactly."""
    sm = step_model(M8, H100, ServeConfig())
    for b in (1, 7, 64):
        pt = point(sm, b, LOAD)
        assert pt.requests_per_s * pt.tpot_s * LOAD.output == pytest.approx(b)
        assert pt.ttft_s < pt.tpot_s * LOAD.output  # one prefill + one step, not the batch


def test_screen_meets_slo_and_cost_formula():
    o = screen(M8, H100, ServeConfig(), LOAD, 2.0)
    assert o.meets_slo and o.batch >= 1
    assert o.ttft_s <= LOAD.slo_ttft_s and o.tpot_s <= LOAD.slo_tpot_s
    # $/M output tokens = GPUs x $/GPU-h / 3600 / (rate x output) x 1e6
    assert o.usd_per_million_tokens == pytest.approx(o.gpus * 2.0 / 3600 / (4.0 * 256) * 1e6)
    assert o.replicas * o.requests_per_s_per_replica >= LOAD.rate


def test_screen_memory_failure_names_memory():
    o = screen(get_model("llama-3-70b"), get_device("rtx-4090"), ServeConfig(), LOAD, 1.0)
    assert not o.fits and o.bottleneck == "memory" and o.gpus == 0


@settings(max_examples=15, deadline=None)
@given(rate=st.floats(0.1, 200), tpot=st.floats(0.01, 0.5))
def test_screen_monotone(rate, tpot):
    """More load never needs fewer GPUs; a tighter TPOT never allows a larger batch."""
    lo = screen(M8, H100, ServeConfig(), ServeLoad(512, 256, rate, 2.0, tpot), 1.0)
    hi = screen(M8, H100, ServeConfig(), ServeLoad(512, 256, rate * 2, 2.0, tpot), 1.0)
    tight = screen(M8, H100, ServeConfig(), ServeLoad(512, 256, rate, 2.0, tpot / 2), 1.0)
    if lo.meets_slo:
        assert hi.gpus >= lo.gpus
        assert tight.batch <= lo.batch


def test_advise_serve_ranking():
    devs = [get_device(n) for n in ("h100", "a100-80gb", "l4", "rtx-4090", "xeon-8480+")]
    prices = {"H100-SXM": 2.49, "A100-SXM-80GB": 1.49, "L4": 0.8, "RTX-4090": 0.5}
    r = advise_serve(get_model("llama-3-70b"), devs, LOAD, lambda d: prices.get(d.name), True)
    met = [o for o in r["ranking"] if o["meets_goal"] and o["usd_per_million_tokens"]]
    assert [o["usd_per_million_tokens"] for o in met] == sorted(
        o["usd_per_million_tokens"] for o in met)
    assert r["best"] == met[0] and r["runner_up"] == met[1]
    assert r["best"]["why"].startswith("best:")
    assert any(o["method"] == "cpu" for o in r["ranking"])  # the CPU row is always there
    assert r["best"]["gpus"] >= r["best"]["tp"] >= 1


def test_advise_goal_serve_cli(capsys):
    r = run_json(capsys, "advise", "llama-3-70b", "--goal", "serve", "--rate", "10")
    q = run_json(capsys, "advise", "llama-3-70b", "--goal", "serve", "--rate", "10",
                 "--quantized")
    assert r["goal"]["kind"] == "serve" and r["best"]["meets_goal"]
    assert r["best"]["weight_dtype"] == "bf16"
    assert {"device", "gpus", "fits", "usd_per_million_tokens", "why", "tp"} <= set(r["best"])
    assert r["runner_up"] is not None
    assert any(o["method"] == "cpu" for o in r["ranking"])
    # more choices (fp8, int4 weight-only) never make the best option dearer
    assert q["best"]["usd_per_million_tokens"] <= r["best"]["usd_per_million_tokens"]
    assert r["price_basis"]["on_demand"]


def test_plan_encoder_only_model_trains_only(capsys):
    r = run_json(capsys, "plan", "bert-base", "--gpus", "1")
    assert r["goal"] == "train" and "serve" not in r
    assert "not a decoder" in r["advice"][-1]
    assert main(["plan", "bert-base", "--goal", "serve"]) == 2
