"""`gpuplan profile` on real scripts with injected problems (issue 13), run as the user would."""

from __future__ import annotations

import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "profile_scripts"
CONTRACT = {"steps", "step_time_s", "breakdown_s", "input_wait_fraction", "host_reads_per_step",
            "ops", "predicted", "advice"}
PHASES = {"input_wait", "host_to_device", "forward", "backward", "optimizer", "communication",
          "other"}


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The CLI with PYTHONPATH=src and its own cache (the first run measures the roofline
    quickly and saves it there; the later runs reuse it)."""
    cache = tmp_path_factory.mktemp("cache")
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "XDG_CACHE_HOME": str(cache)}


def profile(env: dict[str, str], script: str, *opts: str, args: tuple[str, ...] = (),
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "gpuplan.cli.main", "profile", str(SCRIPTS / script), *opts]
    if args:
        cmd += ["--", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=ROOT)


def profile_json(env: dict[str, str], script: str, *opts: str, **kw: object) -> dict:
    r = profile(env, script, "--json", *opts, **kw)  # type: ignore[arg-type]
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


@pytest.mark.slow
def test_input_wait_share_matches_the_scripts_own_measurement(env, tmp_path):
    log = tmp_path / "steps.jsonl"
    # 12 measured steps, not 5: the shares are ratios of a few tens of ms, and on a loaded
    # 2-core machine 5 steps left the two within 0.051 once (profiler overhead per step varies)
    r = profile_json(env, "slow_loader.py", "--steps", "12", "--warmup", "2",
                     args=(str(log), "0.004", "0"))
    assert r.keys() >= CONTRACT and set(r["breakdown_s"]) == PHASES
    assert r["steps"] == 12
    # the script logs each step after opt.step(); the last measured step is stopped inside
    # opt.step(), so it logs measured steps 1-11 of 12 (lines 3-13)
    rows = [json.loads(line) for line in log.read_text().splitlines()][2:]
    assert len(rows) == 11
    own = sum(x["wait_s"] for x in rows) / sum(x["step_s"] for x in rows)
    assert abs(r["input_wait_fraction"] - own) <= 0.05, (r["input_wait_fraction"], own)
    assert r["advice"][0]["kind"] == "input_pipeline"
    assert r["advice"][0]["evidence"]["num_workers"] == 0
    assert sum(r["breakdown_s"].values()) == pytest.approx(r["step_time_s"], rel=1e-9)


@pytest.mark.slow
def test_one_item_per_step_is_counted_exactly_with_its_line(env):
    r = profile_json(env, "item_per_step.py", "--steps", "4", "--warmup", "1")
    assert r["host_reads_per_step"] == 1.0
    site = r["host_reads"]["sites"][0]
    assert (site["call"], Path(site["file"]).name, site["line"]) == ("item", "item_per_step.py", 19)
    assert r["advice"][0]["kind"] == "host_sync"


@pytest.mark.slow
def test_unfused_elementwise_model_gets_fusion_first(env, tmp_path):
    html, trace = tmp_path / "p.html", tmp_path / "p.json"
    r = profile_json(env, "elementwise.py", "--steps", "3", "--warmup", "1", "--html", str(html),
                     "--trace", str(trace))
    assert r["advice"][0]["kind"] == "fusion"
    ev = r["advice"][0]["evidence"]
    assert ev["predicted_fused_s"] < ev["predicted_unfused_s"]
    page = html.read_text()
    assert "<svg" in page and "http" not in page.replace("http-equiv", "")  # nothing external
    assert json.loads(trace.read_text())["traceEvents"]
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_gpt2_from_config_end_to_end_within_a_minute(env):
    pytest.importorskip("transformers")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = profile_json(env, "gpt2_tiny.py", "--steps", "3", "--warmup", "1")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds of the whole run (imports, script, profiling, tracing): wall time on an idle
    # machine; on this shared machine the wall time depends on the other jobs' load
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert cpu_s < 60, cpu_s
    assert r["model"] == "GPT2LMHeadModel"
    comps = r["predicted"]["components"]
    for k in ("forward", "backward", "optimizer"):
        assert comps[k]["predicted_s"] > 0 and comps[k]["measured_s"] > 0
        assert comps[k]["error"] == pytest.approx(comps[k]["predicted_s"] / comps[k]["measured_s"]
                                                  - 1)
    mm = next(o for o in r["ops"] if o["name"] == "aten::mm")
    assert mm["flops"] > 0 and 0 < mm["roofline_share"] <= 1


def test_a_script_that_raises_shows_its_own_traceback(env):
    r = profile(env, "raises.py", "--warmup", "1", "--steps", "5")
    assert r.returncode == 1
    assert "ValueError: boom in the user's script" in r.stderr
    assert 'raises.py", line 9' in r.stderr
    assert "gpuplan/" not in r.stderr.split("gpuplan: error:")[0]  # the user's frames only
    assert "gpuplan: error: the script raised ValueError at raises.py:9" in r.stderr
    assert r.stdout == ""


def test_a_script_that_hangs_stops_at_the_timeout(env):
    t0 = time.perf_counter()
    r = profile(env, "hangs.py", "--timeout", "8")
    assert r.returncode == 1 and time.perf_counter() - t0 < 60
    assert "gpuplan: error: the script ran past --timeout 8 s after" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_script_without_an_optimizer_says_so(env):
    r = profile(env, "no_optimizer.py")
    assert r.returncode == 1
    assert "without ever calling optimizer.step()" in r.stderr
    assert "Traceback" not in r.stderr


def test_too_few_steps_and_bad_input(env):
    r = profile(env, "raises.py", "--steps", "0")
    assert r.returncode == 2 and "--steps" in r.stderr and "Traceback" not in r.stderr
    r = profile(env, "missing.py")
    assert r.returncode == 2 and "SCRIPT" in r.stderr and "missing.py" in r.stderr


@pytest.mark.slow
def test_data_loader_workers_are_cleaned_up(tmp_path):
    from gpuplan.measure.workload import WorkloadSession
    from gpuplan.measure.workload_run import run_script

    s = WorkloadSession(2, 1, stop_script=True)
    out = run_script(SCRIPTS / "slow_loader.py", [str(tmp_path / "l.jsonl"), "0.001", "2"], s)
    assert out.status == "done" and s.raw.loaders[0]["num_workers"] == 2
    deadline = time.time() + 10
    while multiprocessing.active_children() and time.time() < deadline:
        time.sleep(0.1)
    assert multiprocessing.active_children() == []
    assert torch.nn.Module.__call__.__name__ == "_wrapped_call_impl"  # hooks removed


@pytest.mark.slow
def test_python_api_counts_steps_and_formatted_reads(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import api_loop

    r = api_loop.main(steps=4, warmup=1)
    assert r["steps"] == 4
    assert r["host_reads_per_step"] == 1.0
    assert r["host_reads"]["sites"][0]["call"] == "format"
    assert r["predicted"]["components"]["forward"]["predicted_s"] > 0
    assert "api_loop.py" in r["host_reads"]["sites"][0]["file"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pageable_copies_on_cuda(env):
    r = profile_json(env, "pageable.py", "--steps", "5", "--warmup", "3")
    pg = r["host_to_device"]["pageable"]
    assert pg["bytes"] == 16384 * 1024 * 4 and pg["copies_per_step"] == 1
    assert r["advice"][0]["kind"] == "pageable_copy"
    assert r["device_idle"] is not None
