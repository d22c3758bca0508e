"""Representative cases of the second adversarial sweep (benchmarks/adversarial_sweep.py,
issue 15), one per failure class it found, kept fast: each was exit 0, exit 1 or an unnamed
field before its fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuplan.cli.main import main
from gpuplan.errors import GpuplanError


def refused(argv: list[str], field: str, capsys: pytest.CaptureFixture[str]) -> str:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 2, (code, err, out[:200])
    assert err.count("\n") == 1 and "Traceback" not in err and out == "", err
    assert field in err, err
    return err


# ---- output files: --html is checked like --plot before any work ---------------------------

@pytest.mark.parametrize("name", ["report", "report.pdf", "", "fifo.html"])
def test_html_output_path_is_checked_first(name: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "fifo.html")  # a special file, as /dev/full: never renamed over
    target = str(tmp_path / name) if name else ""
    refused(["train", "gpt2", "--html", target], "--html", capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.html"]
    assert (tmp_path / "fifo.html").is_fifo()


# ---- fields named as the user typed them ----------------------------------------------------

def test_unknown_device_names_the_gpu_option(capsys: pytest.CaptureFixture[str]) -> None:
    refused(["memory", "gpt2", "--gpu", "h100\u200b"], "--gpu", capsys)
    refused(["cost", "tpu-v9"], "device", capsys)  # the positional argument keeps its name


def test_estimator_fields_are_shown_as_options(capsys: pytest.CaptureFixture[str]) -> None:
    err = refused(["serve", "gpt2", "--tp", "5"], "--tp", capsys)
    assert "num_heads" not in err and "12 attention heads" in err  # gpt2: 12 heads


def test_empty_framework_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    refused(["memory", "gpt2", "--framework", ""], "--framework", capsys)


# ---- options the chosen mode would ignore ----------------------------------------------------

@pytest.mark.parametrize("argv,field", [
    (["serve", "gpt2", "--rate", "2", "--max-throughput"], "--rate"),
    (["serve", "gpt2", "--slo-ttft", "0.5"], "--slo-ttft"),
    (["serve", "gpt2", "--requests", "3"], "--requests"),
    (["serve", "gpt2", "--rate", "3", "--batch", "4"], "--batch"),
    (["plan", "gpt2", "--goal", "train", "--rate", "3"], "--rate"),
    (["plan", "gpt2", "--goal", "serve", "--gpus", "4"], "--gpus"),
    (["advise", "gpt2", "--goal", "serve", "--tokens", "1e9"], "--tokens"),
    (["advise", "gpt2", "--goal", "pretrain", "--lora-rank", "4"], "--lora-rank"),
    (["train", "gpt2", "--lora-rank", "8"], "--lora-rank"),
    (["memory", "gpt2", "--lora-targets", "q_proj"], "--lora-targets"),
    (["roofline", "gpt2", "--phase", "decode", "--compare-attention"], "--compare-attention"),
])
def test_ignored_options_are_refused(argv: list[str], field: str,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    refused(argv, field, capsys)


def test_serve_trace_excludes_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,20\n")
    refused(["serve", "gpt2", "--trace", str(f), "--rate", "3"], "--rate", capsys)
    assert main(["serve", "gpt2", "--trace", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["completed_requests"] == 1


# ---- files that parsed to nothing, or to the wrong shape -----------------------------------

@pytest.mark.parametrize("row", ["1,2,3,4,5,6", "1,2"])
def test_ragged_trace_rows_are_refused(row: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "t.csv"
    f.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,100,20\n{row}\n")
    refused(["serve", "gpt2", "--trace", str(f)], "--trace", capsys)


def test_empty_price_files_are_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.toml").write_text("")
    (tmp_path / "head.csv").write_text("device,kind,usd\n")
    refused(["serve", "gpt2", "--api-prices", str(tmp_path / "empty.toml")], "--api-prices",
            capsys)
    refused(["cost", "h200", "--prices", str(tmp_path / "head.csv")], "--prices", capsys)


# ---- measurement: bench sections, torchrun's environment, the profiled script ---------------

def test_bench_only_and_nproc() -> None:
    from gpuplan.measure.bench import parse_only

    for text in ("matmul,,memory", "matmul,", ",launch"):
        with pytest.raises(GpuplanError, match="--only"):
            parse_only(text, None)
    with pytest.raises(GpuplanError, match="--nproc"):
        parse_only("matmul", 2)
    assert parse_only("collectives,matmul", 2) == ("matmul", "collectives")


@pytest.mark.parametrize("rank,world,field", [("zero", "2", "RANK"), ("5", "2", "RANK"),
                                              ("0", "-3", "WORLD_SIZE")])
def test_torchrun_environment_is_checked(rank: str, world: str, field: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.measure.collectives import torchrun_ranks

    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", world)
    with pytest.raises(GpuplanError, match=field):
        torchrun_ranks()
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert torchrun_ranks() == (1, 2)
    monkeypatch.delenv("WORLD_SIZE")
    assert torchrun_ranks() is None  # RANK alone: not under torchrun


@pytest.mark.parametrize("content", [b"x = (\n", bytes(range(256)) * 8])
def test_profile_refuses_a_script_that_is_not_python(content: bytes, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "train.py"
    f.write_bytes(content)
    refused(["profile", str(f)], "SCRIPT", capsys)


# ---- the web API names the field of a number JSON cannot hold --------------------------------

@pytest.mark.parametrize("body,field", [
    ('{"model": "gpt2", "rate": -Infinity}', "rate"),
    ('{"model": "gpt2", "tokens": ' + "9" * 5000 + "}", "tokens"),
    ('{"model": "gpt2", "gpus": NaN}', "gpus"),
    ('{"model": "gpt2", "gpus": true}', "gpus"),  # pydantic alone reads true as 1
    ("[1, 2]", None),
])
def test_web_names_the_field_of_a_bad_number(body: str, field: str | None) -> None:
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from gpuplan.web.app import create_app

    r = TestClient(create_app()).post("/api/plan", content=body,
                                      headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500
    assert r.json()["field"] == field
    assert "list" not in r.json()["error"]  # JSON words (an array), not Python's
