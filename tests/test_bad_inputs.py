"""Hard to break (issue 15): a corpus of bad and extreme inputs, generated combinatorially across
commands x options x bad values, run in-process through `gpuplan.cli.main.main(argv)`.

Every bad input must end with exit code 2, exactly one line on stderr, no traceback, nothing on
stdout, and the message naming the field. Valid extreme inputs must give JSON whose numbers are
all finite and non-negative (margin_bytes is signed by design: negative = the shortfall).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import gpuplan.report.output as output
from gpuplan.cli.main import main

HUGE = "9" * 400
LONG = "x" * 100_000
SIGNED_KEYS = {"margin_bytes"}

# ---- commands and their options ------------------------------------------------------------

BASE = {
    "memory": ["memory", "gpt2"],
    "infer": ["memory", "gpt2", "--mode", "infer"],
    "train": ["train", "gpt2", "--gpus", "8"],
    "roofline": ["roofline", "gpt2"],
    "flops": ["flops", "gpt2"],
    "serve": ["serve", "gpt2"],
    "sim": ["serve", "gpt2", "--max-throughput", "--requests", "4"],
    "cost": ["cost", "h100"],
    "advise": ["advise", "gpt2"],
    "lora": ["memory", "gpt2", "--finetune", "lora"],
    "qlora": ["train", "gpt2", "--gpus", "8", "--finetune", "qlora"],
    "plan": ["plan", "gpt2"],
}
INT_OPTIONS = {
    "memory": ["--micro-batch", "--seq-len", "--global-batch", "--dp", "--tp", "--pp", "--cp",
               "--ep", "--virtual-stages", "--zero"],
    "infer": ["--batch", "--context", "--block-size", "--tp"],
    "train": ["--gpus", "--gpus-per-node", "--dp", "--tp", "--pp", "--cp", "--ep", "--zero",
              "--virtual-stages", "--micro-batch", "--global-batch", "--seq-len"],
    "roofline": ["--batch", "--seq-len", "--top"],
    "flops": ["--batch", "--seq-len"],
    "serve": ["--batch", "--tp", "--block-size"],
    "sim": ["--requests", "--max-batch", "--max-tokens", "--seed"],
    "cost": ["--gpus"],
    "advise": ["--lora-rank", "--top", "--prompt-len", "--output-len"],
    "plan": ["--gpus", "--prompt-len", "--output-len"],
    "lora": ["--lora-rank"],
    "qlora": ["--lora-rank"],
}
BAD_INTS = ["0", "-1", HUGE, "1.5", "1e3", "nan", "inf", "", "abc", "\x00", LONG, str(2**40 + 1)]
FLOAT_OPTIONS = {
    "memory": ["--cuda-context-gb", "--fragmentation"],
    "infer": ["--margin", "--cuda-context-gb", "--fragmentation"],
    "train": ["--tokens", "--usd-per-gpu-hour", "--scale-up-gbps", "--scale-out-gbps"],
    "serve": ["--rate", "--usd-per-gpu-hour"],
    "sim": ["--slo-ttft", "--slo-tpot", "--kv-fraction"],
    "cost": ["--years", "--utilization", "--usd-per-kwh", "--pue", "--purchase-usd-per-gpu",
             "--rent-usd-per-gpu-hour", "--reserved-usd-per-gpu-hour", "--spot-usd-per-gpu-hour",
             "--server-usd-per-gpu", "--network-usd-per-gpu", "--facility-usd-per-kw-month",
             "--maintenance-share", "--staff-usd-per-gpu-year", "--useful-life-years",
             "--board-power-w"],
    "advise": ["--tokens", "--budget", "--deadline", "--rate", "--slo-ttft", "--slo-tpot"],
    "plan": ["--tokens", "--rate", "--slo-ttft", "--slo-tpot"],
}
BAD_FLOATS = ["inf", "-inf", "nan", "1e308", "1e400", "-1", "", "abc", HUGE + "e5"]
CHOICE_OPTIONS = {
    "memory": {"--precision": "fp9", "--optimizer": "adamm", "--recompute": "some",
               "--fsdp": "half", "--attention": "flashy", "--mode": "both", "--target": "tpu"},
    "infer": {"--weight-dtype": "int3", "--kv-dtype": "bf17"},
    "train": {"--precision": "fp8", "--optimizer": "", "--recompute": LONG, "--fsdp": "\x1b[31m"},
    "roofline": {"--phase": "decode2", "--dtype": "int4", "--attention": "nave"},
    "serve": {"--weight-dtype": "fp5", "--kv-dtype": "", "--scheduler": "fifo"},
    "advise": {"--goal": "win"},
    "lora": {"--finetune": "dora", "--lora-targets": "q_proj,zz_proj"},
    "qlora": {"--lora-targets": ""},
    "plan": {"--goal": "all"},
}
BAD_NAMES = ["", " ", "x" * 300, LONG, "gpt2\x07", "\x1b[31mred", "../../etc/passwd", "/dev/zero",
             "/dev/null", "/etc", "missing.json", "~nosuchuser9/config.json", "ģρτ2", "a\x00b"]


def _cases() -> list[tuple[str, list[str], str]]:
    """(id, argv, field that the message must name)."""
    out: list[tuple[str, list[str], str]] = []
    for cmd, opts in INT_OPTIONS.items():
        for opt in opts:
            for i, v in enumerate(BAD_INTS):
                if (opt in ("--zero", "--seed") and v == "0") or (opt == "--seed" and
                                                                   v == str(2**40 + 1)):
                    continue  # ZeRO stage 0 and seed 0 are valid
                out.append((f"{cmd}{opt}-int{i}", [*BASE[cmd], opt, v], opt))
    for cmd, opts in FLOAT_OPTIONS.items():
        for opt in opts:
            for i, v in enumerate(BAD_FLOATS):
                out.append((f"{cmd}{opt}-float{i}", [*BASE[cmd], opt, v], opt))
    for cmd, choices in CHOICE_OPTIONS.items():
        for opt, v in choices.items():
            out.append((f"{cmd}{opt}-choice", [*BASE[cmd], opt, v], opt))
    for cmd in ("memory", "train", "roofline", "flops", "models"):
        for i, name in enumerate(BAD_NAMES):
            out.append((f"{cmd}-model{i}", [cmd, name], "model"))
    for cmd in ("memory", "train", "roofline", "hardware"):
        for i, name in enumerate([*BAD_NAMES, "h10", "nope.toml", "/dev/null.toml"]):
            argv = ["hardware", name] if cmd == "hardware" else [*BASE[cmd], "--gpu", name]
            out.append((f"{cmd}-device{i}", argv, "device" if cmd == "hardware" else "--gpu"))
    return out


CROSS = [  # cross-field rules (issue 15's list and the like), with the option to be blamed
    (["memory", "gpt2", "--pp", "13"], "--pp"),
    (["train", "gpt2", "--gpus", "13", "--pp", "13"], "--pp"),
    (["memory", "gpt2", "--seq-len", "100000"], "--seq-len"),
    (["memory", "gpt2", "--mode", "infer", "--context", "100000"], "--seq-len"),
    (["flops", "bert-base", "--seq-len", "513"], "--seq-len"),
    (["roofline", "gpt2", "--phase", "decode", "--seq-len", "2000"], "--seq-len"),
    (["train", "llama-3-8b", "--precision", "fp8-mixed", "--gpu", "a100"], "--precision"),
    (["memory", "llama-3-8b", "--precision", "fp8-mixed", "--gpu", "v100"], "--precision"),
    (["roofline", "llama-3-8b", "--dtype", "fp8", "--gpu", "a100"], "--dtype"),
    (["train", "llama-3-8b", "--search", "--tp", "2"], "--tp"),
    (["train", "llama-3-8b", "--search", "--zero", "3"], "--zero"),
    (["train", "llama-3-8b", "--search", "--tokens", "1e9"], "--tokens"),
    (["train", "llama-3-8b", "--search", "--scaling"], "--scaling"),
    (["train", "llama-3-8b", "--top", "3"], "--top"),
    (["train", "llama-3-8b", "--search", "--top", "1001"], "--top"),
    (["train", "mixtral-8x7b", "--gpus", "64", "--ep", "8", "--scaling"], "--ep"),
    (["train", "llama-3-8b", "--fsdp", "full", "--zero", "1"], "--zero"),
    (["memory", "llama-3-8b", "--fsdp", "hybrid", "--zero", "2"], "--zero"),
    (["train", "llama-3-8b", "--virtual-stages", "2"], "--virtual-stages"),
    (["memory", "llama-3-8b", "--virtual-stages", "4"], "--virtual-stages"),
    (["train", "llama-3-8b", "--gpus", "32", "--pp", "4", "--virtual-stages", "9"],
     "--virtual-stages"),
    (["train", "llama-3-8b", "--gpus", "12", "--gpus-per-node", "8"], "--gpus-per-node"),
    (["train", "llama-3-8b", "--gpus", "8", "--dp", "3"], "--gpus"),
    (["train", "llama-3-8b", "--gpus", "8", "--tp", "3"], "--gpus"),
    (["train", "llama-3-8b", "--gpus", "6", "--tp", "3"], "--tp"),
    (["memory", "llama-3-8b", "--tp", "3"], "--tp"),
    (["memory", "llama-3-8b", "--mode", "infer", "--tp", "5"], "--tp"),
    (["memory", "llama-3-8b", "--ep", "2"], "--ep"),
    (["memory", "mixtral-8x7b", "--ep", "3"], "--ep"),
    (["memory", "llama-3-8b", "--cp", "3"], "--cp"),
    (["train", "llama-3-8b", "--gpus", "8", "--micro-batch", "3", "--global-batch", "16"],
     "--global-batch"),
    (["memory", "llama-3-8b", "--dp", "4", "--micro-batch", "3", "--global-batch", "16"],
     "--global-batch"),
    (["memory", "gpt2", "--mode", "infer", "--precision", "fp32"], "--precision"),
    (["memory", "gpt2", "--block-size", "16"], "--block-size"),
    (["memory", "gpt2", "--margin", "0.2"], "--margin"),
    (["memory", "gpt2", "--kv-dtype", "fp8"], "--kv-dtype"),
    (["roofline", "llama-3-8b", "--ideal", "--profile", "nope.json"], "--profile"),
    (["bench", "--only", ""], "--only"),
    (["bench", "--only", "matmul,gpu"], "--only"),
    (["bench", "--only", "collectives", "--nproc", "10000"], "--nproc"),
    (["bench", "--only", "collectives", "--nproc", "1000"], "--nproc"),
    (["bench", "--device", "tpu"], "--device"),
    (["bench", "--memory-fraction", "0"], "--memory-fraction"),
    (["bench", "--memory-fraction", "nan"], "--memory-fraction"),
    (["bench", "--timeout", "inf"], "--timeout"),
    (["bench", "--timeout", "-5"], "--timeout"),
    (["bench", "--plot", "x.txt"], "--plot"),
]
SCRIPT = str(Path(__file__).resolve())  # any readable file: the options are refused first
for _opt, _bad in (("--steps", "0"), ("--steps", HUGE), ("--warmup", "-1"), ("--warmup", "nan"),
                   ("--timeout", "inf"), ("--timeout", "nan"), ("--timeout", "0"),
                   ("--trace", "/dev/full"), ("--trace", "t.txt"), ("--trace", "/nope/t.json"),
                   ("--html", ""), ("--html", "r.pdf"), ("--html", "/nope/r.html")):
    CROSS.append((["profile", SCRIPT, _opt, _bad], _opt))
for _script in ("", "/nonexistent.py", "/etc", "/dev/zero", "x" * 300 + ".py", LONG, "a\x00b"):
    CROSS.append((["profile", _script], "SCRIPT"))
PLOTS = ["", "/dev/full", "out.txt", "/nonexistent-folder/a.png", "/proc/a.png",
         "x" * 300 + ".png", "noext", ".", "a\x00b.png"]
for _p in PLOTS:
    CROSS.append((["memory", "gpt2", "--plot", _p], "--plot"))
    CROSS.append((["roofline", "gpt2", "--plot", _p], "--plot"))
for _p in PLOTS[:4]:
    CROSS.append((["serve", "gpt2", "--curve", "--plot", _p], "--plot"))
_SIM = ["serve", "gpt2", "--rate", "2", "--requests", "4"]
for _dist in ("lognormal:1e308:9", "lognormal:512:50", "uniform:1:1e9", "normal:nan:1",
              "exponential:inf", "exponential:" + HUGE, "uniform:5:1", "fixed:" + HUGE,
              "uniform:1:" + HUGE, "normal:" + "1" * 5000 + ":1"):
    CROSS.append(([*_SIM, "--prompt-len", _dist], "prompt"))
    CROSS.append(([*_SIM, "--output-len", _dist], "output"))
CROSS += [
    (["serve", "gpt2", "--prompt-len", HUGE], "--prompt-len"),
    (["serve", "gpt2", "--output-len", HUGE], "--output-len"),
    (["serve", "gpt2", "--prompt-len", "16777217"], "--prompt-len"),
    (["serve", "gpt2", "--rate", "1", "--requests", "1000000000"], "--requests"),
    (["serve", "gpt2", "--max-throughput", "--requests", str(10**6 + 1)], "--requests"),
    (["serve", "gpt2", "--rate", "0", "--requests", "4"], "--rate"),
    (["serve", "gpt2", "--rate", "1e10", "--requests", "4"], "--rate"),
    (["serve", "gpt2", "--rate", "1", "--requests", "4", "--slo-ttft", "0"], "--slo-ttft"),
    (["serve", "gpt2", "--tp", "5"], "tp"),
    (["serve", "bert-base"], "model"),
    (["cost", "h100", "--utilization", "1.01"], "--utilization"),
    (["cost", "h100", "--years", "0"], "--years"),
    (["cost", "h100", "--years", "1e9"], "--years"),
    (["cost", "h100", "--pue", "0.5"], "--pue"),
    (["cost", "tpu-v9"], "device"),
    (["advise", "gpt2", "--deadline", "0"], "--deadline"),
    (["advise", "gpt2", "--tokens", "0.5"], "--tokens"),
    (["memory", "gpt2", "--finetune", "lora", "--lora-targets", "x" * 100_000],
     "--lora-targets"),
]

VALID_EXTREMES = [
    ["memory", "llama-3.1-405b", "--micro-batch", "16777216", "--seq-len", "131072"],
    ["memory", "gpt2", "--micro-batch", "1", "--seq-len", "1"],
    ["memory", "llama-3.1-405b", "--mode", "infer", "--batch", "16777216", "--context",
     "131072", "--fix"],
    ["memory", "deepseek-v3", "--dp", "1000000", "--zero", "3", "--fix"],
    ["memory", "gpt2", "--cuda-context-gb", "0", "--fragmentation", "0"],
    ["memory", "gpt2", "--mode", "infer", "--margin", "0.9", "--cuda-context-gb", "10000"],
    ["train", "gpt2", "--gpus", "1", "--seq-len", "1", "--tokens", "1e18",
     "--usd-per-gpu-hour", "10000"],
    ["train", "llama-3-8b", "--gpus", "1000000", "--tokens", "1", "--usd-per-gpu-hour", "0"],
    ["train", "llama-3-8b", "--gpus", "8", "--scale-up-gbps", "0.001", "--scale-out-gbps",
     "1000000"],
    ["train", "llama-3.1-405b", "--gpus", "16", "--micro-batch", "16777216"],
    ["train", "mixtral-8x7b", "--gpus", "64", "--ep", "8"],
    ["train", "llama-3-8b", "--gpus", "1024", "--scaling"],
    ["train", "gpt2", "--gpus", "64", "--search", "--top", "100"],
    ["roofline", "llama-3-8b", "--batch", "16777216", "--seq-len", "8192", "--top", "10000"],
    ["roofline", "gpt2", "--phase", "decode", "--batch", "1", "--seq-len", "1"],
    ["roofline", "gpt2", "--compare-attention", "--fused", "--ideal"],
    ["flops", "llama-3.1-405b", "--batch", "16777216", "--seq-len", "131072"],
    ["flops", "gpt2", "--batch", "1", "--seq-len", "1"],
    ["flops", "bert-base"],
    ["memory", "bert-base"],
    ["train", "gpt3-175b", "--gpus", "8", "--pp", "8"],
    ["hardware", "H100"],
    ["models", "deepseek-v3"],
]


def _check_bad(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> str:
    t0 = time.perf_counter()
    code = main(argv)
    took = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert code == 2, f"exit {code} for {argv[:6]!r}: {err[:300]}"
    assert err.endswith("\n") and err.count("\n") == 1, err[:2000]
    assert "Traceback" not in err and out == ""
    assert err.startswith("gpuplan: error: ")
    assert field.lower() in err.lower(), err
    assert len(err) < 1000, len(err)  # no 100 KB echo
    assert took < 60, took  # a hang check (the first case of a command may import torch)
    return err


@pytest.mark.parametrize("argv,field", [pytest.param(a, f, id=i) for i, a, f in _cases()])
def test_bad_option_value(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
                          ) -> None:
    _check_bad(argv, field, capsys)


@pytest.mark.parametrize("argv,field", CROSS, ids=lambda x: " ".join(x)[:60] if
                         isinstance(x, list) else x)
def test_cross_field_rule(argv: list[str], field: str, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
                          ) -> None:
    monkeypatch.chdir(tmp_path)
    _check_bad(argv, field, capsys)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even half


def _numbers(x: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(x, dict):
        return [n for k, v in x.items() for n in _numbers(v, f"{path}.{k}")]
    if isinstance(x, (list, tuple)):
        return [n for i, v in enumerate(x) for n in _numbers(v, f"{path}[{i}]")]
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return [(path, x)]
    return []


@pytest.mark.parametrize("argv", VALID_EXTREMES, ids=lambda a: " ".join(a)[:70])
def test_valid_extremes_give_finite_non_negative_json(argv: list[str],
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    real = output.print_json
    monkeypatch.setattr(output, "print_json", lambda obj: (seen.append(obj), real(obj)))
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert json.loads(out) == json.loads(json.dumps(json.loads(out)))  # one object, round-trips
    bad = [(p, v) for p, v in _numbers(seen[0]) if not math.isfinite(v)
           or (v < 0 and p.rsplit(".", 1)[-1] not in SIGNED_KEYS)]
    assert bad == [], bad[:10]


# ---- loaders: config.json, device files, GPUPLAN_DEVICES, profiles --------------------------

LLAMA = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
         "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 11008}


def _deep(n: int) -> str:
    return "[" * n + "]" * n


CONFIGS: dict[str, str | bytes] = {
    "binary": bytes(range(256)) * 4,
    "empty": "",
    "null": "null",
    "list": "[1, 2]",
    "truncated": json.dumps(LLAMA)[:40],
    "deep": '{"model_type": "llama", "x": ' + _deep(100_000) + "}",
    "nan": json.dumps(LLAMA)[:-1] + ', "rms_norm_eps": NaN}',
    "infinity": json.dumps({**LLAMA, "hidden_size": 1}).replace('"hidden_size": 1',
                                                                '"hidden_size": Infinity'),
    "huge_int": json.dumps(LLAMA).replace('"hidden_size": 4096', f'"hidden_size": {HUGE}'),
    "1e9_layers": json.dumps({**LLAMA, "num_hidden_layers": 10**9}),
    "1e308": json.dumps({**LLAMA, "attention_dropout": 1e308}),
    "negative": json.dumps({**LLAMA, "num_hidden_layers": -4}),
    "float_layers": json.dumps({**LLAMA, "num_hidden_layers": 32.5}),
    "string_heads": json.dumps({**LLAMA, "num_attention_heads": "32"}),
    "bool_hidden": json.dumps({**LLAMA, "hidden_size": True}),
    "unknown_type": json.dumps({**LLAMA, "model_type": "llamma"}),
    "type_list": json.dumps({**LLAMA, "model_type": ["llama"]}),
    "heads_mismatch": json.dumps({**LLAMA, "num_attention_heads": 33}),
    "kv_mismatch": json.dumps({**LLAMA, "num_key_value_heads": 5}),
    "huge_dim": json.dumps({**LLAMA, "intermediate_size": 10**8}),
    "control": json.dumps({**LLAMA, "hidden_act": "si\x1blu\n"}),
    "unicode": json.dumps({**LLAMA, "hidden_act": "силу"}),
    "bom": "\ufeff" + json.dumps(LLAMA),
    "experts": json.dumps({**LLAMA, "model_type": "mixtral", "num_local_experts": 10**9}),
    "layer_types": json.dumps({**LLAMA, "model_type": "qwen2", "layer_types": "x" * 10_000}),
}


def _write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("cmd", ["memory", "train", "models"])
def test_config_json_fuzz(name: str, cmd: str, tmp_path: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "config.json", CONFIGS[name])
    err = _check_bad([cmd, str(path)], "config.json", capsys)
    assert len(err) < 600


def test_config_json_too_large_is_refused_before_parsing(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    path = tmp_path / "config.json"
    with path.open("wb") as fh:
        fh.truncate(17 * 2**20)  # sparse: 17 MiB of zero bytes
    assert "larger than 16 MiB" in _check_bad(["memory", str(path)], "config.json", capsys)


def test_config_json_fifo_does_not_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    assert "not a regular file" in _check_bad(["memory", str(fifo)], "config.json", capsys)


DEVICE_OK = Path(__file__).resolve().parents[1] / "src/gpuplan/catalog/devices/nvidia-a10.toml"


def _device_variants() -> dict[str, str | bytes]:
    good = DEVICE_OK.read_text(encoding="utf-8")
    mem_line = next(line for line in good.splitlines() if line.startswith("memory ="))
    bw_line = next(line for line in good.splitlines() if line.startswith("mem_bw ="))
    return {
        "binary": b"\xff\xfe\x00" * 100,
        "empty": "",
        "not_toml": "name = ",
        "deep": "a = " + "[" * 5000 + "]" * 5000,
        "negative_memory": good.replace(mem_line, mem_line.replace('"24 GB"', '"-24 GB"')),
        "inf_bw": good.replace(bw_line, bw_line.replace('"600 GB/s"', '"inf GB/s"')),
        "nan_bw": good.replace(bw_line, bw_line.replace('"600 GB/s"', '"nan GB/s"')),
        "huge_bw": good.replace(bw_line, bw_line.replace('"600 GB/s"', f'"{HUGE} GB/s"')),
        "unknown_key": good + "\nbogus = 1\n",
        "year": good.replace("year = 2021", "year = 99999"),
        "kind": good.replace('kind = "gpu"', 'kind = "quantum"'),
        "peak_dtype": good + '\n[peak.fp9]\nvalue = "1 TFLOP/s"\nsource = "datasheet"\n',
    }


@pytest.mark.parametrize("name", sorted(_device_variants()))
def test_device_file_fuzz(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "dev.toml", _device_variants()[name])
    _check_bad(["hardware", str(path)], "dev.toml", capsys)
    _check_bad(["memory", "gpt2", "--gpu", str(path)], "dev.toml", capsys)


@pytest.mark.parametrize("name", ["binary", "empty", "deep", "inf_bw"])
def test_bad_gpuplan_devices_file_names_itself_and_spares_other_commands(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / "mine.toml", _device_variants()[name])
    monkeypatch.setenv("GPUPLAN_DEVICES", str(path))
    err = _check_bad(["memory", "gpt2"], "GPUPLAN_DEVICES", capsys)
    assert "mine.toml" in err
    assert main(["flops", "gpt2", "--json"]) == 0  # commands without devices still work
    assert main(["models", "--json"]) == 0
    capsys.readouterr()


def test_gpuplan_devices_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_DEVICES", str(tmp_path / "nope") + os.pathsep + LONG)
    _check_bad(["hardware"], "GPUPLAN_DEVICES", capsys)


PROFILE = {"device": "test cpu", "date": "2026-11-30",
           "matmul_flops_per_s": {"fp32": 123456789.0}, "memory_bw_bytes_per_s": 987654321.0,
           "launch_overhead_s": 5e-6,
           "identity": {"kind": "cpu", "name": "test cpu", "host": "h"}}
PROFILES: dict[str, str | bytes] = {
    "binary": b"\x00\xff" * 50,
    "not_object": "[]",
    "identity_string": json.dumps({**PROFILE, "identity": "cpu"}),
    "identity_list": json.dumps({**PROFILE, "identity": ["cpu"]}),
    "memory_string": json.dumps({**PROFILE, "memory_bw_bytes_per_s": "fast"}),
    "negative_bw": json.dumps({**PROFILE, "memory_bw_bytes_per_s": -1e9}),
    "infinite": json.dumps(PROFILE).replace("123456789.0", "Infinity"),
    "nan": json.dumps(PROFILE).replace("987654321.0", "NaN"),
    "1e308": json.dumps({**PROFILE, "matmul_flops_per_s": {"fp32": 1e308}}),
    "unknown_dtype": json.dumps({**PROFILE, "matmul_flops_per_s": {"fp33": 1e11}}),
    "empty_rates": json.dumps({**PROFILE, "matmul_flops_per_s": {}}),
    "huge_int": json.dumps(PROFILE).replace("5e-06", HUGE),
    "missing": json.dumps({"device": "x"}),
    "deep": '{"device": ' + _deep(10_000) + "}",
    "bad_date": json.dumps({**PROFILE, "date": "yesterday"}),
    "gpu_memory": json.dumps({**PROFILE, "identity": {"kind": "cuda", "gpu_memory_bytes": -1}}),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("cmd", [["roofline", "gpt2"], ["train", "gpt2", "--gpus", "1"],
                                 ["memory", "gpt2"]])
def test_profile_fuzz(name: str, cmd: list[str], tmp_path: Path,
                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "prof.json", PROFILES[name])
    _check_bad([*cmd, "--profile", str(path)], "--profile", capsys)


def test_a_good_profile_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "prof.json", json.dumps(PROFILE))
    assert main(["roofline", "gpt2", "--profile", str(path), "--json"]) == 0
    capsys.readouterr()


# ---- the last resort, --debug, and real processes -------------------------------------------


def test_unexpected_exception_is_one_line_and_debug_shows_the_traceback(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise KeyError("internal")

    monkeypatch.setattr("gpuplan.cli.flops_cmd.flops_summary", boom)
    assert main(["flops", "gpt2"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error" in err and "report" in err
    assert "Traceback" not in err
    assert main(["flops", "gpt2", "--debug"]) == 1
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [OverflowError("int too large to convert to float"),
                                 RecursionError("maximum recursion depth exceeded"),
                                 OSError(36, "File name too long", "x" * 300)])
def test_input_caused_exceptions_exit_2(exc: Exception, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> None:
        raise exc

    monkeypatch.setattr("gpuplan.cli.flops_cmd.flops_summary", boom)
    assert main(["flops", "gpt2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "flops" in err


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    return subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": src, **(env or {})})


def test_real_process_bad_inputs() -> None:
    for argv in (["memory", "gpt2", "--seq-len", HUGE], ["train", "gpt2", "--tokens", "inf"],
                 ["memory", "x" * 300]):
        r = _run(*argv)
        assert r.returncode == 2 and r.stdout == "", (argv, r.stderr)
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_gpuplan_debug_env_shows_the_traceback(tmp_path: Path) -> None:
    bad = _write(tmp_path / "config.json", "{")
    r = _run("memory", str(bad), env={"GPUPLAN_DEBUG": "1"})
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_every_corpus_variant_differs_from_the_valid_record() -> None:
    good_device = DEVICE_OK.read_text(encoding="utf-8")
    assert all(v != good_device for v in _device_variants().values())
    assert all(v != json.dumps(PROFILE) for v in PROFILES.values())
    assert all(v != json.dumps(LLAMA) for v in CONFIGS.values())
    assert len(_cases()) + len(CROSS) + len(CONFIGS) * 3 + len(PROFILES) * 3 >= 300


# ---- loaders of the serving and cost commands: trace, price table, API price table ----------

TRACE_HEAD = "arrival_s,prompt_tokens,output_tokens\n"
TRACES: dict[str, str | bytes] = {
    "empty": "", "header-only": TRACE_HEAD, "binary": bytes(range(256)) * 8,
    "wrong-columns": "a,b,c\n1,2,3\n", "nan-arrival": TRACE_HEAD + "nan,10,5\n",
    "inf-arrival": TRACE_HEAD + "inf,10,5\n", "1e400-arrival": TRACE_HEAD + "1e400,10,5\n",
    "late-arrival": TRACE_HEAD + "1e12,10,5\n", "negative-arrival": TRACE_HEAD + "-1,10,5\n",
    "zero-tokens": TRACE_HEAD + "0,0,5\n", "negative-tokens": TRACE_HEAD + "0,10,-5\n",
    "huge-tokens": TRACE_HEAD + f"0,{HUGE},5\n", "over-max-seq": TRACE_HEAD + "0,16777217,1\n",
    "float-tokens": TRACE_HEAD + "0,1.5,5\n", "text": TRACE_HEAD + "0,ten,5\n",
    "short-row": TRACE_HEAD + "0,10\n", "huge-field": TRACE_HEAD + "0," + "1" * 200_000 + ",1\n",
    "nul": TRACE_HEAD + "0,1\x000,5\n", "past-positions": TRACE_HEAD + "0,1000,25\n",
    "too-long-for-kv": TRACE_HEAD + "0,16000000,16000000\n",
    "utf16": TRACE_HEAD.encode("utf-16"), "over-32-mib": TRACE_HEAD + "0,1,1\n" * 5_000_000,
}


@pytest.mark.parametrize("name", list(TRACES))
def test_trace_file_fuzz(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / f"{name}.csv", TRACES[name])
    err = _check_bad(["serve", "gpt2", "--trace", str(path)], "", capsys)
    assert "trace" in err.lower() or path.name in err, err


PRICE_HEAD = "device,kind,usd\n"
PRICE_FILES: dict[str, str | bytes] = {
    "inf": PRICE_HEAD + "h100,on_demand,inf\n", "nan": PRICE_HEAD + "h100,on_demand,nan\n",
    "1e400": PRICE_HEAD + "h100,purchase,1e400\n", "1e308": PRICE_HEAD + "h100,purchase,1e308\n",
    "negative": PRICE_HEAD + "h100,on_demand,-5\n", "zero": PRICE_HEAD + "h100,spot,0\n",
    "text": PRICE_HEAD + "h100,on_demand,cheap\n", "kind": PRICE_HEAD + "h100,lease,2\n",
    "device": PRICE_HEAD + "h1000,on_demand,2\n", "short-row": PRICE_HEAD + "h100\n",
    "columns": "gpu,price\nh100,2\n", "binary": bytes(range(256)) * 8, "empty": "",
    "huge-field": PRICE_HEAD + "h100,on_demand," + "1" * 200_000 + "\n",
    "huge-int": PRICE_HEAD + f"h100,on_demand,{HUGE}\n",
}


@pytest.mark.parametrize("name", list(PRICE_FILES))
def test_price_file_fuzz(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = _write(tmp_path / f"p-{name}.csv", PRICE_FILES[name])
    err = _check_bad(["cost", "h100", "--prices", str(path)], "", capsys)
    assert "price" in err.lower() or path.name in err, err
    monkeypatch.setenv("GPUPLAN_PRICES", str(path))  # the same file through the variable
    _check_bad(["cost", "h100"], "", capsys)


@pytest.mark.parametrize("path", ["/dev/zero", "/etc", "/nonexistent.csv", "x" * 300 + ".csv",
                                  "a\x00b.csv"])
def test_price_file_special_paths(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    _check_bad(["cost", "h100", "--prices", path], "prices", capsys)


API_ENTRY = ('name = "x"\nmodels = []\nsource = "s"\ndate = "2026-12-01"\n'
             'output_usd_per_mtok = 1.0\n')
API_FILES: dict[str, str | bytes] = {
    "not-toml": "[[api]\nname =", "inf": "[[api]]\n" + API_ENTRY + "input_usd_per_mtok = inf\n",
    "nan": "[[api]]\n" + API_ENTRY + "input_usd_per_mtok = nan\n",
    "1e308": "[[api]]\n" + API_ENTRY + "input_usd_per_mtok = 1e308\n",
    "negative": "[[api]]\n" + API_ENTRY + "input_usd_per_mtok = -1\n",
    "string": "[[api]]\n" + API_ENTRY + 'input_usd_per_mtok = "cheap"\n',
    "missing": "[[api]]\nname = \"x\"\n", "unknown-key": "[[api]]\n" + API_ENTRY
    + "input_usd_per_mtok = 1\nbonus = 2\n", "api-int": "api = 5\n", "api-list": "api = [1, 2]\n",
    "binary": bytes(range(256)) * 8, "deep": "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "other-table": 'name = "x"\n[values]\nmemory = 1\n',
}


@pytest.mark.parametrize("name", list(API_FILES))
def test_api_price_file_fuzz(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                             ) -> None:
    path = _write(tmp_path / f"a-{name}.toml", API_FILES[name])
    err = _check_bad(["serve", "gpt2", "--api-prices", str(path)], "", capsys)
    assert "api-prices" in err.lower() or path.name in err, err


def test_serve_trace_and_api_prices_refuse_special_files(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    for opt in ("--trace", "--api-prices"):
        for path in ("/dev/zero", "/etc", "/nonexistent.csv"):
            _check_bad(["serve", "gpt2", opt, path], opt, capsys)


# ---- the web API: hostile payloads against the commands that landed with serve and cost ------

WEB_HOSTILE: list[tuple[str, object]] = [
    ("serve", {"model": "gpt2", "requests": 10**9, "rate": 1}),
    ("serve", {"model": "gpt2", "rate": "inf"}), ("serve", {"model": "gpt2", "rate": 1e308}),
    ("serve", {"model": "gpt2", "max_throughput": True, "prompt_len": "lognormal:1e308:9"}),
    ("serve", {"model": "gpt2", "trace": "/etc/passwd"}),
    ("serve", {"model": "gpt2", "api_prices": "/etc/passwd"}),
    ("serve", {"model": "gpt2", "plot": "/tmp/x.png"}), ("serve", {"model": "gpt2", "batch": 10**400}),
    ("serve", {"model": "gpt2", "slo_ttft": -1}), ("serve", {"model": "gpt2", "tp": [1]}),
    ("serve", {"model": "gpt2", "prompt_len": "x" * 100_000}), ("serve", {"model": "bert-base"}),
    ("serve", '{"model": "gpt2", "rate": NaN, "requests": 3}'),
    ("cost", {"gpu": "h100", "prices": "/etc/passwd"}), ("cost", {"gpu": "h100", "utilization": 2}),
    ("cost", {"gpu": "h100", "utilization": -0.1}), ("cost", {"gpu": "h100", "years": 0}),
    ("cost", {"gpu": "h100", "years": 1e9}), ("cost", {"gpu": "h100", "gpus": 10**400}),
    ("cost", {"gpu": "h100", "pue": "inf"}), ("cost", {"gpu": "../../etc/passwd"}),
    ("cost", '{"gpu": "h100", "utilization": Infinity}'), ("cost", {"gpu": {"a": 1}}),
    ("advise", {"model": "gpt2", "budget": -1}), ("advise", '{"model": "gpt2", "tokens": 1e400}'),
    ("advise", {"model": "gpt2", "deadline": "nan"}), ("advise", {"model": "gpt2", "goal": "win"}),
    ("advise", {"model": "gpt2", "prices": "/etc/shadow"}), ("advise", {"model": "x" * 300}),
    ("memory", {"model": "gpt2", "finetune": "lora", "lora_rank": 10**400}),
    ("memory", {"model": "gpt2", "finetune": "lora", "lora_targets": "zz_proj"}),
    ("train", {"model": "gpt2", "gpus": 8, "finetune": "qlora", "lora_rank": 0}),
    ("plan", {"model": "gpt2", "gpus": 10**400}), ("plan", {"model": "gpt2", "budget": "inf"}),
]


@pytest.mark.parametrize("cmd,payload", WEB_HOSTILE, ids=lambda x: str(x)[:50])
def test_web_api_hostile_payloads_get_4xx_fast(cmd: str, payload: object) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from gpuplan.web.app import create_app

    client = TestClient(create_app())
    t0 = time.perf_counter()
    if isinstance(payload, str):
        r = client.post(f"/api/{cmd}", content=payload,
                        headers={"content-type": "application/json"})
    else:
        r = client.post(f"/api/{cmd}", json=payload)
    assert time.perf_counter() - t0 < 30
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert "error" in r.json() and len(r.text) < 5000


# ---- property: the simulated stream conserves requests and its JSON is finite ----------------

def _sim_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    bad = [(p, v) for p, v in _numbers(out) if not math.isfinite(v) or v < 0]
    assert bad == [], bad[:10]
    return out


def test_serve_simulation_conserves_requests_and_is_finite(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    dists = st.sampled_from(["64", "uniform:1:600", "normal:300:200", "lognormal:200:0.5",
                             "exponential:100"])  # within llama-3-8b's 8,192 positions

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    @given(n=st.integers(1, 60), rate=st.floats(0.01, 1e6), p=dists, o=dists,
           seed=st.integers(0, 2**32), sched=st.sampled_from(["continuous", "static"]))
    def check(n: int, rate: float, p: str, o: str, seed: int, sched: str) -> None:
        r = _sim_json(["serve", "llama-3-8b", "--rate", repr(rate), "--requests", str(n),
                       "--prompt-len", p, "--output-len", o, "--seed", str(seed),
                       "--scheduler", sched, "--max-batch", "16"], capsys)
        assert r["completed_requests"] == n

    check()

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(rows=st.lists(st.tuples(st.floats(0, 1e6), st.integers(1, 900), st.integers(1, 100)),
                         min_size=1, max_size=40))
    def trace(rows: list[tuple[float, int, int]]) -> None:
        f = tmp_path / "t.csv"
        f.write_text(TRACE_HEAD + "".join(f"{a!r},{p},{o}\n" for a, p, o in rows))
        r = _sim_json(["serve", "llama-3-8b", "--trace", str(f)], capsys)
        assert r["completed_requests"] == len(rows)

    trace()
