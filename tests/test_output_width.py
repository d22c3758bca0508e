"""Every command's table fits an 80-column terminal, and rows that differ stay distinguishable.

Each command renders into a recording rich Console 80 columns wide (as a narrow terminal would);
no line may exceed 80 and the rows named below must appear in full, not cut to a shared prefix.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import gpuplan.report.output as output
from gpuplan.cli.main import main

WIDTH = 80


def render80(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> str:
    con = Console(width=WIDTH, record=True, file=io.StringIO(), highlight=False,
                  soft_wrap=False, force_terminal=False)
    monkeypatch.setattr(output, "console", lambda: con)
    assert main(argv) == 0
    return con.export_text()


# (argv, strings that must appear whole in the 80-column rendering)
CASES = [
    (["hardware"], ["MI300X", "MI325X", "A100-PCIE-40GB", "V100-SXM2-32GB", "fp16"]),
    (["hardware", "mi300x"], ["peak fp16", "memory bandwidth"]),
    (["models"], ["llama-3.1-405b", "qwen2.5-0.5b", "kv heads"]),
    (["models", "llama-3-8b"], ["num_layers"]),
    (["flops", "llama-3-8b"], ["forward total"]),
    (["roofline", "llama-3-8b", "--top", "6"],
     ["layers.mlp.gate_up", "x = how many times"]),
    (["roofline", "llama-3-8b", "--fused", "--compare-attention"], ["fused chain"]),
    (["roofline", "llama-3-8b", "--phase", "decode", "--batch", "8"], ["lm_head"]),
    (["memory", "llama-3-8b"], ["optimizer", "activations"]),
    (["memory", "llama-3-8b", "--mode", "infer", "--fix"], ["kv_cache"]),
    (["train", "llama-3-8b", "--gpus", "8", "--zero", "3", "--scaling"], ["step time"]),
    (["train", "llama-3-8b", "--gpus", "8", "--search", "--top", "4"],
     ["ZeRO stage", "tok/s"]),
    (["serve", "llama-3-8b"], ["TTFT (prefill)", "end-to-end latency"]),
    (["cost", "h100"], ["break-even utilization", "purchase_usd_per_gpu"]),
    (["advise", "llama-3-8b"], ["RTX-4090", "H100-PCIE", "A100-PCIE-80GB"]),
]


@pytest.mark.parametrize(("argv", "must"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_tables_fit_80_columns(argv: list[str], must: list[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    text = render80(argv, monkeypatch)
    wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not wide, f"{len(wide)} lines over {WIDTH} columns, first: {wide[0]!r}"
    assert "shared/" not in text and "GUIDE" not in text  # sources a user can open
    for s in must:
        assert s in text, f"{s!r} not shown whole at {WIDTH} columns"


def test_roofline_rows_are_distinguishable(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cell is cut to a prefix that every row shares (the old `layers…` rows)."""
    text = render80(["roofline", "llama-3-8b", "--top", "12"], monkeypatch)
    assert "layers…" not in text and "…" not in text.split("\n", 3)[3].split("x = ")[0]


def test_hardware_shows_fp16_where_the_file_lists_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """T4 lists fp16 (65 TFLOP/s dense, NVIDIA T4 datasheet) and no bf16: the row shows 65.0
    under fp16 and '-' under bf16, not '-' everywhere."""
    text = render80(["hardware"], monkeypatch)
    header = next(line for line in text.splitlines() if line.startswith("name"))
    t4 = next(line for line in text.splitlines() if line.startswith("T4 "))
    cols = header.split()
    # header words: name mem GB BW TB/s fp32 tf32 bf16 fp16 fp8 int8 TDP W $/h
    cells = t4.split()
    assert cells[cols.index("bf16") - 2] == "-"
    assert cells[cols.index("fp16") - 2] == "65.0"


def test_grouped_help_shows_panels(capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert main(["train", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Parallel layout" in out and "Precision and kernels" in out
    assert max(len(line) for line in out.splitlines()) <= WIDTH


def test_every_help_fits_80_columns(capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.cli.main import app

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert main(["--help"]) == 0
    names = [c.name or c.callback.__name__ for c in app.registered_commands if c.callback]
    assert len(names) >= 8
    for name in [None, *names]:
        assert main([name, "--help"] if name else ["--help"]) == 0
        out = capsys.readouterr().out
        wide = [line for line in out.splitlines() if len(line) > WIDTH]
        assert not wide, f"{name} --help: {wide[0]!r}"


def test_roofline_with_profile_names_the_measured_machine(tmp_path, monkeypatch) -> None:
    """With --profile the rates are the measured machine's: the title says so, not only JSON."""
    import json

    prof = {"device": "Test CPU", "date": "2026-11-30", "identity": {"kind": "cpu", "host": "h"},
            "matmul_flops_per_s": {"bf16": 5e14, "fp32": 5e13}, "memory_bw_bytes_per_s": 2e12,
            "launch_overhead_s": 6e-6}
    f = tmp_path / "prof.json"
    f.write_text(json.dumps(prof))
    text = render80(["roofline", "gpt2", "--seq-len", "256", "--profile", str(f)], monkeypatch)
    assert "rates measured on Test CPU" in " ".join(text.split())
    assert "measured profile" in text  # the ridge point's source
    assert max(len(line) for line in text.splitlines()) <= WIDTH


def test_typed_results_keep_the_json_keys() -> None:
    """memory and roofline return dataclasses whose JSON has the contract's keys."""
    from gpuplan.estimate.analysis import analyze
    from gpuplan.estimate.command_results import MemoryCheck, RooflineResult
    from gpuplan.estimate.memory import train_memory
    from gpuplan.ops.transformer import Impl
    from gpuplan.specs.catalog import get_device, get_model
    from gpuplan.specs.workload import TrainConfig

    m, d = get_model("gpt2"), get_device("h100")
    res = train_memory(m, d, TrainConfig(micro_batch=1, seq_len=256))
    j = MemoryCheck(m.name, res).to_json()
    assert {"model", "total_bytes", "capacity_bytes", "fits", "per_gpu"} <= set(j)
    assert j["total_bytes"] == sum(j["per_gpu"].values()) and isinstance(j["total_bytes"], int)
    r = RooflineResult(analyze(m, d, "train", 1, 256, Impl())).to_json()
    assert {"total_time_s", "ops", "ridge_flops_per_byte"} <= set(r) and "profile" not in \
        r["assumptions"]


@pytest.mark.slow
def test_profile_report_fits_80_columns(tmp_path, monkeypatch) -> None:
    """`gpuplan profile` on a real (tiny) script: op names whole, no line over 80."""
    from pathlib import Path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    script = Path(__file__).parent / "profile_scripts" / "elementwise.py"
    text = render80(["profile", str(script), "--steps", "2", "--warmup", "1"], monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "aten::mul" in text and "operators, slowest first" in text


@pytest.mark.slow
def test_bench_tables_fit_80_columns(tmp_path, monkeypatch) -> None:
    """`gpuplan bench --quick` measured on this machine: every table within 80 columns."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    text = render80(["bench", "--quick", "--only", "matmul,memory"], monkeypatch)
    assert max(len(line) for line in text.splitlines()) <= WIDTH
    assert "fp32" in text and "triad" in text
