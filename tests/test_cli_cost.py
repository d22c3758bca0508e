"""CLI contract of `cost`, `advise` and the LoRA options of `memory` and `train`."""

from __future__ import annotations

import json

import pytest

from gpuplan.cli.main import main


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:  # type: ignore[type-arg]
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cost_contract_and_flags(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(capsys, "cost", "h100", "--gpus", "8", "--years", "3", "--utilization", "0.95")
    assert {"total_usd", "capex_usd", "energy_usd"} <= set(r["buy"])
    assert "total_usd" in r["rent"] and 0 < r["break_even_utilization"] < 0.95
    assert r["buy"]["total_usd"] < r["rent"]["total_usd"]
    for v in r["assumptions"].values():
        assert v["source"] and v["date"]
    r2 = run_json(capsys, "cost", "h100", "--utilization", "0.95", "--usd-per-kwh", "0.18",
                  "--pue", "1.2", "--purchase-usd-per-gpu", "25000",
                  "--rent-usd-per-gpu-hour", "3")
    assert r2["inputs"]["usd_per_kwh"] == 0.18 and r2["rent"]["usd_per_gpu_hour"] == 3
    assert r2["buy"]["gpus_usd"] == 8 * 25000
    assert r2["assumptions"]["pue"]["source"] == "command-line flag"


def test_cost_without_a_price_says_which_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "a100-sxm-80gb"]) == 2
    err = capsys.readouterr().err
    assert "--purchase-usd-per-gpu" in err and err.count("\n") == 1


def test_cost_user_price_file(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "p.csv"
    f.write_text("device,kind,usd,as_of,source\na100-sxm-80gb,purchase,12000,2026-01,quote\n")
    r = run_json(capsys, "cost", "a100-sxm-80gb", "--prices", str(f))
    assert r["assumptions"]["purchase_usd_per_gpu"] == {"value": 12000.0, "source": "quote",
                                                        "date": "2026-01"}


def test_memory_and_train_take_lora_flags(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(capsys, "memory", "llama-2-7b", "--gpu", "rtx-4090", "--seq-len", "1024",
                 "--finetune", "lora", "--lora-rank", "8", "--lora-targets", "q_proj,v_proj")
    assert r["fits"] and r["finetune"]["trainable_params"] == 8 * 2 * 8192 * 32
    assert r["assumptions"]["lora_targets"] == ["q_proj", "v_proj"]
    t = run_json(capsys, "train", "llama-3-8b", "--gpu", "rtx-4090", "--gpus", "1",
                 "--finetune", "qlora", "--recompute", "full", "--seq-len", "2048",
                 "--global-batch", "8", "--tokens", "1e7")
    assert t["fits"] and t["memory"]["assumptions"]["finetune"] == "qlora"
    assert t["run"]["price"]["usd_per_gpu_hour"] == 0.34  # the on-demand basis
    assert main(["memory", "gpt2", "--finetune", "dora"]) == 2


def test_advise_contract(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_json(capsys, "advise", "llama-3-8b", "--goal", "qlora", "--deadline", "2")
    assert r["ranking"][0]["meets_goal"]
    for o in r["ranking"]:
        assert {"device", "gpus", "fits", "cost_usd", "time_s", "why"} <= set(o)
    assert r["ranking"][-1]["method"] == "cpu"
    assert main(["advise", "gpt2", "--goal", "serve"]) == 2
