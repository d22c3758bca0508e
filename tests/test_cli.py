"""The CLI contract of DESIGN.md: JSON keys, SI units, one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuplan.cli.main import main


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv],
                          capture_output=True, text=True, timeout=120)


def test_hardware_lists_at_least_30_devices_with_sources(capsys):
    r = run_json(capsys, "hardware")
    assert len(r["devices"]) >= 30
    for d in r["devices"]:
        assert d["name"] and d["sources"], d["name"]
        assert isinstance(d["memory_bytes"], int)


def test_hardware_one_device_contract(capsys):
    r = run_json(capsys, "hardware", "h100")
    assert r["name"] == "H100-SXM"
    assert r["memory_bytes"] == 80_000_000_000
    assert r["mem_bw_bytes_per_s"] == pytest.approx(3.35e12)
    assert r["peak_flops_per_s"]["bf16"] == pytest.approx(989.4e12)  # dense, not 1979
    assert r["tdp_w"] == 700
    assert r["sources"]["peak.bf16"]["date"]


def test_models_contract(capsys):
    r = run_json(capsys, "models")
    assert len(r["models"]) >= 20
    assert {"name", "params"} <= set(r["models"][0])
    one = run_json(capsys, "models", "mixtral-8x7b")
    assert one["params"] == 46_702_792_704
    assert one["active_params"] == 12_879_925_248
    assert one["architecture"]["num_experts"] == 8


def test_flops_contract_and_values(capsys):
    r = run_json(capsys, "flops", "llama-3-8b", "--batch", "1", "--seq-len", "4096")
    assert r["params"] == 8_030_261_248
    assert r["train_flops"] == pytest.approx(3 * r["forward_flops"])
    # forward = 2 x (non-embedding matmul params) x tokens + attention scores 2·2·s²·d·L
    t, d, layers = 4096, 4096, 32
    matmul_params = 8_030_261_248 - 128256 * 4096 - (2 * 32 + 1) * 4096  # minus embedding, norms
    scores = 2 * 2 * t * t * d * layers
    assert r["forward_flops"] == pytest.approx(2 * matmul_params * t + scores, rel=1e-12)
    assert sum(r["breakdown"].values()) == pytest.approx(r["forward_flops"])
    causal = run_json(capsys, "flops", "llama-3-8b", "--seq-len", "4096", "--causal")
    assert causal["breakdown"]["attention_scores"] == pytest.approx(
        r["breakdown"]["attention_scores"] * (4097 / 2) / 4096)


def test_roofline_contract(capsys):
    r = run_json(capsys, "roofline", "gpt2", "--gpu", "a100", "--batch", "2", "--seq-len",
                 "256", "--phase", "prefill")
    assert {"ridge_flops_per_byte", "ops", "total_time_s"} <= set(r)
    assert r["total_time_s"] == pytest.approx(sum(o["time_s"] for o in r["ops"]))
    for o in r["ops"]:
        assert {"name", "flops", "bytes", "intensity", "bound", "time_s"} <= set(o)
        assert o["bound"] in ("compute", "memory")


def test_roofline_fused_is_faster_and_plot_is_written(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "r.png"
    r = run_json(capsys, "roofline", "gpt2", "--gpu", "a100", "--batch", "4", "--seq-len",
                 "512", "--fused", "--plot", str(png))
    assert r["fusion"]["fused_time_s"] < r["fusion"]["unfused_time_s"]
    assert r["fusion"]["bytes_saved"] > 0
    assert png.stat().st_size > 10_000


@pytest.mark.parametrize("argv, needle", [
    (["flops", "no-such-model"], "model"),
    (["flops", "gpt2", "--batch", "0"], "--batch"),
    (["flops", "gpt2", "--seq-len", "-5"], "--seq-len"),
    (["hardware", "no-such-gpu"], "device"),
    (["roofline", "gpt2", "--gpu", "no-such-gpu"], "--gpu"),
    (["roofline", "gpt2", "--phase", "sideways"], "--phase"),
    (["models", "missing/config.json"], "config"),
])
def test_bad_input_one_line_exit_2_no_traceback(argv, needle):
    p = run_cli(*argv)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert needle in lines[0]
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


def test_malformed_config_json(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    p = run_cli("flops", str(bad))
    assert p.returncode == 2 and "not valid JSON" in p.stderr and "Traceback" not in p.stderr


def test_cli_start_does_not_import_torch():
    code = ("import sys; from gpuplan.cli.main import main; "
            "rc = main(['flops', 'gpt2', '--json']); "
            "assert 'torch' not in sys.modules, 'torch imported'; sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_train_contract(capsys):
    r = run_json(capsys, "train", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
                 "--micro-batch", "1", "--global-batch", "64", "--seq-len", "4096", "--fused",
                 "--recompute", "full", "--zero", "3")
    for key in ("step_time_s", "tokens_per_s", "model_flops_per_s_per_gpu", "mfu",
                "comm_time_s", "bubble_fraction", "gpu_hours", "cost_usd"):
        assert r[key] is not None, key
    assert 0.2 < r["mfu"] < 0.7  # the realistic band for large-scale training (GUIDE D)
    assert r["run"]["tokens"] == 20 * 8_030_261_248
    assert r["memory"]["fits"]
    from gpuplan.estimate.comm import bus_factor

    assert r["collectives"]
    for c in r["collectives"]:  # nccl-tests: algbw = bytes / time, busbw = algbw x factor
        assert c["group"] > 1
        assert c["algbw_bytes_per_s"] == pytest.approx(c["bytes"] / c["time_s"])
        assert c["busbw_bytes_per_s"] == pytest.approx(
            c["algbw_bytes_per_s"] * bus_factor(c["op"], c["group"]))


def test_train_not_fitting_still_reports_speed(capsys):
    r = run_json(capsys, "train", "llama-2-70b", "--gpu", "a100", "--gpus", "8", "--zero", "0",
                 "--seq-len", "4096")
    assert r["fits"] is False and r["memory"]["fits"] is False
    # the verdict and the speed are separate: a layout that does not fit is still timed
    assert r["step_time_s"] > 0 and r["tokens_per_s"] > 0 and r["mfu"] > 0
    assert r["gpu_hours"] > 0
    assert "would need" in r["assumptions"]["memory_verdict"]
    # same speed as on a device with room to spare (capacity never enters the timing)
    from gpuplan.estimate.memory import TrainConfig
    from gpuplan.estimate.training import step_time
    from gpuplan.specs.catalog import get_device, get_model
    from gpuplan.specs.cluster import default_cluster

    d = get_device("a100")
    roomy = d.model_copy(update={"memory_bytes": 10**15, "usable_memory_bytes": None})
    cfg = TrainConfig(micro_batch=1, seq_len=4096, zero=0, dp=8, dropout=False)
    from gpuplan.estimate.efficiency import framework_efficiency
    from gpuplan.specs.framework import resolve_framework

    eff = framework_efficiency(roomy, resolve_framework(None, cfg))  # train's auto stack: hf
    big = step_time(get_model("llama-2-70b"), default_cluster(roomy, 8), cfg, eff)
    assert big.fits and big.step_time_s == pytest.approx(r["step_time_s"])


def test_train_not_fitting_table_says_would_need(capsys):
    assert main(["train", "llama-2-70b", "--gpu", "a100", "--gpus", "8", "--zero", "0"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "would need" in out and "tokens / s" in out


def test_train_search_and_scaling_json(capsys):
    r = run_json(capsys, "train", "llama-3-8b", "--gpus", "16", "--global-batch", "128",
                 "--fused", "--search", "--top", "3")
    assert r["evaluated"] > 1000 and len(r["top"]) == 3
    assert r["top"][0]["tokens_per_s"] >= r["top"][-1]["tokens_per_s"]
    s = run_json(capsys, "train", "gpt2-large", "--gpu", "rtx-4090", "--gpus", "4",
                 "--micro-batch", "1", "--seq-len", "1024", "--zero", "0", "--scaling")
    assert [p["gpus"] for p in s["scaling"]] == [1, 2, 4]
    assert s["scaling"][0]["speedup"] == 1.0


def test_search_rows_rerun_by_train_equal_under_the_auto_stack(capsys):
    """No --framework: each searched layout is timed as the stack its layout implies
    (TP/SP -> megatron, --zero 3 -> deepspeed, ...), exactly as `train` times that layout."""
    r = run_json(capsys, "train", "llama-3-8b", "--gpus", "16", "--global-batch", "128",
                 "--search", "--top", "4")
    # the base job (plain data parallel) is hf's; model-parallel rows are re-timed as megatron
    assert any(t["tp"] > 1 or t["cp"] > 1 for t in r["top"])
    for t in r["top"]:
        args = ["train", "llama-3-8b", "--gpus", "16", "--global-batch", "128"]
        for k in ("dp", "tp", "pp", "cp", "zero", "micro_batch", "virtual_stages"):
            args += [f"--{k.replace('_', '-')}", str(t[k])]
        args += ["--recompute", t["recompute"]]
        args += ["--sequence-parallel"] if t["sequence_parallel"] else []
        one = run_json(capsys, *args)
        assert one["step_time_s"] == pytest.approx(t["step_time_s"], rel=1e-12)


@pytest.mark.parametrize("argv, needle", [
    (["train", "gpt2", "--gpus", "8", "--tp", "3"], "--gpus"),
    (["train", "gpt2", "--gpus", "4", "--tp", "8", "--dp", "1"], "gpus"),
    (["memory", "gpt2", "--mode", "infer", "--tp", "5"], "tp"),
    (["memory", "gpt2", "--attention", "sparse"], "--attention"),
])
def test_more_bad_input(argv, needle):
    p = run_cli(*argv)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_cli_needs_no_package_outside_the_core_dependencies():
    """`pip install -e .` installs pydantic, rich, typer, numpy: the CLI must not import click
    (typer vendors it), torch or matplotlib at start-up."""
    code = ("import sys; from gpuplan.cli.main import main; main(['hardware', '--json']); "
            "bad = [m for m in ('click', 'torch', 'matplotlib', 'transformers') "
            "if m in sys.modules]; assert not bad, bad")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_encoder_has_no_decode_and_no_kv_cache(capsys):
    p = run_cli("roofline", "bert-base", "--phase", "decode")
    assert p.returncode == 2 and "encoder" in p.stderr and "Traceback" not in p.stderr
    r = run_json(capsys, "memory", "bert-base", "--mode", "infer", "--batch", "8",
                 "--context", "512")
    assert r["per_gpu"]["kv_cache"] == 0


def test_model_folder_and_missing_device_file(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "intermediate_size": 128}))
    r = run_json(capsys, "models", str(tmp_path))  # an HF model folder works like its config
    assert r["params"] == 1000 * 64 * 2 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64
    p = run_cli("hardware", str(tmp_path / "mine.toml"))
    assert p.returncode == 2 and "does not exist" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("flops", str(tmp_path / "empty_dir_missing"))
    assert p.returncode == 2 and "Traceback" not in p.stderr
