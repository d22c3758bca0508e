"""Machine profiles (issue 6): efficiency_from_profile, save/load, catalog matching, and the
command line: `gpuplan bench` contract, --device cuda without a GPU, --profile on estimates."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.estimate.efficiency import default_efficiency, efficiency_from_profile
from gpuplan.estimate.roofline import op_time
from gpuplan.measure import compute, memory
from gpuplan.ops.op import Op
from gpuplan.specs import get_device

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parents[1]
GPU = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


# ---- profiles --------------------------------------------------------------------------------


PROFILE = {"device": "Test CPU", "date": "2026-11-30", "identity": {"kind": "cpu", "host": "h"},
           "matmul_flops_per_s": {"bf16": 5e14, "fp32": 5e13}, "memory_bw_bytes_per_s": 2e12,
           "launch_overhead_s": 6e-6}


def test_efficiency_from_profile_fills_measured_and_names_its_source():
    h100 = get_device("h100")
    eff = efficiency_from_profile({**PROFILE, "path": "/p.json"}, h100)
    assert eff.measured == {"bf16": 5e14, "fp32": 5e13, "memory": 2e12}
    assert eff.kernel_overhead_s == 6e-6
    assert "/p.json" in eff.source and "2026-11-30" in eff.source and "Test CPU" in eff.source
    big = Op("mm", "matmul", flops=1e15, bytes_read=1e6, bytes_written=1e6, dtype="bf16",
             phase="forward")
    assert op_time(big, h100, eff).compute_s == pytest.approx(1e15 / 5e14)
    assert op_time(big, h100, eff).time_s != op_time(big, h100, default_efficiency(h100)).time_s
    with pytest.raises(GpuplanError, match="memory_bw_bytes_per_s"):
        efficiency_from_profile({**PROFILE, "memory_bw_bytes_per_s": -1}, h100)
    with pytest.raises(GpuplanError, match="matmul_flops_per_s"):
        efficiency_from_profile({**PROFILE, "matmul_flops_per_s": {}}, h100)


def test_profile_save_load_and_cache_dir(tmp_path, monkeypatch):
    from gpuplan.measure.profile import load_profile, profile_dir, save_profile

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert profile_dir() == tmp_path / "gpuplan" / "profiles"
    p = save_profile(dict(PROFILE))
    assert p == tmp_path / "gpuplan" / "profiles" / "h-test-cpu-2026-11-30.json"
    assert load_profile(p)["matmul_flops_per_s"] == PROFILE["matmul_flops_per_s"]
    with pytest.raises(GpuplanError, match="does not exist"):
        load_profile(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text(json.dumps({"device": "x"}))
    with pytest.raises(GpuplanError, match="lacks date, matmul_flops_per_s"):
        load_profile(tmp_path / "bad.json")


@pytest.mark.parametrize(("name", "kind", "mem", "want"), [
    ("NVIDIA H100 80GB HBM3", "cuda", 85e9, "H100-SXM"),
    ("NVIDIA H100 PCIe", "cuda", 85e9, "H100-PCIE"),
    ("NVIDIA H200", "cuda", 150e9, "H200"),
    ("NVIDIA A100-SXM4-80GB", "cuda", 85e9, "A100-SXM-80GB"),
    ("AMD EPYC 9654 96-Core Processor", "cpu", None, "EPYC-9654"),
    ("AMD EPYC", "cpu", None, None),
])
def test_match_catalog_by_gpu_name_and_aliases(name, kind, mem, want):
    from gpuplan.measure.profile import compare, match_catalog

    ident = {"name": name, "kind": kind, "gpu_memory_bytes": mem}
    got = match_catalog(ident)
    assert (got.name if got else None) == want
    c = compare({**PROFILE, "device": name, "identity": ident})
    assert c["catalog_device"] == want
    if want is None:
        assert "no catalog entry" in c["note"]


# ---- the command line ------------------------------------------------------------------------


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv], capture_output=True,
                          text=True, timeout=180, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_bench_quick_json_contract_saved_profile_and_roofline_with_it(tmp_path):
    p = _cli("bench", "--quick", "--only", "matmul,memory", "--json", "--compare",
             env={"XDG_CACHE_HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)  # stdout is exactly one JSON object; the progress bar is stderr
    assert {"device", "matmul_flops_per_s", "memory_bw_bytes_per_s"} <= set(r)
    assert r["matmul_flops_per_s"]["fp32"] > 1e9 and r["memory_bw_bytes_per_s"] > 1e9
    assert isinstance(r["device"], str) and r["compare"]["catalog_device"] is None
    saved = Path(r["profile_path"])
    assert saved.parent == tmp_path / "gpuplan" / "profiles" and saved.is_file()
    rf = _cli("roofline", "gpt2", "--gpu", "h100", "--seq-len", "256", "--profile", str(saved),
              "--json")
    assert rf.returncode == 0, rf.stderr
    assert json.loads(rf.stdout)["assumptions"]["profile"]["path"] == str(saved)


def test_roofline_train_memory_with_profile_change_and_say_so(tmp_path, capsys):
    from gpuplan.cli.main import main

    f = tmp_path / "prof.json"
    f.write_text(json.dumps(PROFILE))

    def run(*argv: str) -> dict:
        assert main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    base = ["roofline", "llama-2-7b", "--gpu", "h100", "--seq-len", "1024"]
    plain, prof = run(*base), run(*base, "--profile", str(f))
    assert prof["total_time_s"] != plain["total_time_s"]
    assert str(f) in prof["assumptions"]["efficiency"]["source"]
    assert prof["assumptions"]["profile"]["measured_on_this_device"] is False
    assert prof["ridge_flops_per_byte"] == pytest.approx(5e14 / 2e12)
    # ZeRO-1: 7B with AdamW needs its optimizer states sharded to fit 80 GB (--zero defaults
    # to 0 in every command since issue 9)
    tr = ["train", "llama-2-7b", "--gpu", "h100", "--gpus", "8", "--zero", "1"]
    assert run(*tr, "--profile", str(f))["step_time_s"] != run(*tr)["step_time_s"]
    mem = ["memory", "llama-2-7b", "--gpu", "h100"]
    m1, m2 = run(*mem), run(*mem, "--profile", str(f))
    assert m1["total_bytes"] == m2["total_bytes"]
    assert "not bytes" in m2["assumptions"]["profile"]["note"]


def test_bench_device_cuda_without_gpu_is_one_line_exit_2():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    p = _cli("bench", "--device", "cuda", "--quick")
    assert p.returncode == 2
    assert p.stderr.strip().count("\n") == 0 and "no CUDA GPU" in p.stderr


def test_bench_bad_only_is_one_line_exit_2():
    p = _cli("bench", "--only", "matmul,warp", "--device", "cpu")
    assert p.returncode == 2 and "--only" in p.stderr and "Traceback" not in p.stderr


def test_gpu_check_script_is_valid_bash():
    script = ROOT / "benchmarks" / "gpu_check.sh"
    assert script.is_file()
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0


@GPU
def test_cuda_matmul_and_bandwidth_are_measured():
    from gpuplan.measure.timing import clock_for

    clock = clock_for("cuda")
    r = compute.measure_matmul("cuda", clock, 50 * 2**20, True, dtypes=("bf16",))
    assert compute.flops_by_dtype(r)["bf16"] > 1e13
    s = memory.stream("cuda", clock, 2**30, 0.2)
    assert s["bw_bytes_per_s"] > 1e11


@pytest.mark.slow
def test_bench_collectives_cli_contract():
    p = _cli("bench", "--only", "collectives", "--nproc", "2", "--quick", "--json", "--no-save")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert {"device", "matmul_flops_per_s", "memory_bw_bytes_per_s", "collectives"} <= set(r)
    for op, rows in r["collectives"].items():
        assert rows and {"bytes", "time_s", "algbw_bytes_per_s", "busbw_bytes_per_s"} <= set(rows[0])
        assert op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def test_bench_help_does_not_import_torch():
    code = ("import sys; from gpuplan.cli.main import main; rc = main(['bench', '--help']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _sweep(points):
    return [{"m": s, "n": s, "k": s, "flops": 2.0 * s**3, "flops_per_s": r} for s, r in points]


def test_profile_size_sweep_sets_the_rate_of_each_matmul_size():
    from gpuplan.estimate.efficiency import size_curve

    # 512^3 = 2.7e8 FLOPs at 3e11, 4096^3 = 1.4e11 FLOPs at 4e11; a noisy dip at 1024 is lifted
    prof = {**PROFILE, "matmul_flops_per_s": {"fp32": 4e11, "bf16": 5e14},
            "matmul": {"fp32": {"sizes": [*_sweep([(512, 3e11), (1024, 2.5e11), (4096, 4e11)]),
                                          {"m": 16, "n": 4096, "k": 4096, "flops": 5.4e8,
                                           "flops_per_s": 9e10}]}}}
    curve = size_curve(prof, "fp32")
    assert [r for _, r in curve] == [3e11, 3e11, 4e11]  # squares only, non-decreasing
    cpu = get_device("epyc-9654")
    eff = efficiency_from_profile(prof, cpu)
    assert eff.measured_rate("fp32", 2.0 * 512**3) == pytest.approx(3e11)
    assert eff.measured_rate("fp32", 1e6) == pytest.approx(3e11)  # below the sweep: its first point
    assert eff.measured_rate("fp32", 1e13) == pytest.approx(4e11)  # capped at the sustained rate
    mid = eff.measured_rate("fp32", 2.0 * 2048**3)
    assert 3e11 < mid < 4e11
    assert eff.measured_rate("bf16", 1e6) == 5e14  # no sweep for bf16: the sustained rate
    small = Op("mm", "matmul", flops=2.0 * 512**3, bytes_read=1.0, bytes_written=1.0,
               dtype="fp32", phase="forward", count=3)
    assert op_time(small, cpu, eff).compute_s == pytest.approx(3 * 2.0 * 512**3 / 3e11)
    assert "measured sweep" in eff.source
    assert size_curve(PROFILE, "fp32") == ()  # a profile without a sweep keeps the flat rate


def test_a_malformed_sweep_is_ignored_not_trusted():
    from gpuplan.estimate.efficiency import size_curve

    bad = {**PROFILE, "matmul": {"fp32": {"sizes": [
        {"flops": 1e9, "flops_per_s": 1e12},  # no shape: not a square of the sweep
        {"m": 64, "n": 64, "k": 64, "flops": 5.2e5, "flops_per_s": float("nan")},
        {"m": 128, "n": 128, "k": 128, "flops": 4.2e6, "flops_per_s": True},
        "junk"]}}}
    assert size_curve(bad, "fp32") == ()
    assert size_curve({**PROFILE, "matmul": {"fp32": "x"}}, "fp32") == ()
    eff = efficiency_from_profile(bad, get_device("epyc-9654"))
    assert eff.measured_rate("fp32", 1e9) == 5e13  # the sustained rate, untouched
