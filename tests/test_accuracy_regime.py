"""The regime a training job falls in (estimate.accuracy) and the error printed for it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuplan.cli.main import main
from gpuplan.estimate.accuracy import (
    COMM_HEAVY_SYNC_TOKENS,
    HELD_OUT_ERROR_BY_REGIME,
    LOFO_RESULTS,
    REGIMES,
    sync_tokens_per_rank,
    training_regime,
)
from gpuplan.estimate.efficiency import HELD_OUT_ERROR_BY_STACK
from gpuplan.specs.workload import TrainConfig


def test_sync_tokens_per_rank_is_a_step_share_or_a_micro_batch_share():
    # ZeRO-1: a step of 1024 x 4096 tokens over dp 64 x cp 2 ranks
    step = TrainConfig(micro_batch=2, seq_len=4096, global_batch=1024, dp=64, cp=2, zero=1)
    assert sync_tokens_per_rank(step) == 1024 * 4096 / 128
    # ZeRO-3 syncs every micro-batch: 2 x 4096 tokens split over cp 2
    fsdp = TrainConfig(micro_batch=2, seq_len=4096, global_batch=1024, dp=64, cp=2, fsdp="full")
    assert sync_tokens_per_rank(fsdp) == 2 * 4096 / 2


@pytest.mark.parametrize(("cfg", "gpus", "gpn", "regime"), [
    (TrainConfig(micro_batch=1, seq_len=2048, dp=8, fsdp="full"), 8, 8, "one node"),
    # 2 nodes, ZeRO-1, 64 x 4096 tokens per step over 16 ranks = 16384 per rank: not below the cut
    (TrainConfig(micro_batch=1, seq_len=4096, global_batch=64, dp=16, zero=1), 16, 8,
     "multi-node"),
    (TrainConfig(micro_batch=1, seq_len=4096, global_batch=32, dp=16, zero=1), 16, 8,
     "multi-node, communication-heavy"),
    # FSDP on 4 nodes with 2 x 4096-token micro-batches: syncs every 8192 tokens
    (TrainConfig(micro_batch=2, seq_len=4096, global_batch=512, dp=32, fsdp="full"), 32, 8,
     "multi-node, communication-heavy"),
    # no data parallelism across the nodes (TP 8 x PP 4): nothing to sync
    (TrainConfig(micro_batch=1, seq_len=2048, global_batch=8, dp=1, tp=8, pp=4), 32, 8,
     "multi-node"),
])
def test_training_regime(cfg, gpus, gpn, regime):
    assert training_regime(cfg, gpus, gpn) == regime


def _committed_lofo(kind: str) -> dict[str, tuple[float, float, int]]:
    """{label: (median, p90, rows)} of the `kind` lines ('stack class' or 'regime') of the
    results file LOFO_RESULTS names."""
    text = (Path(__file__).parents[1] / LOFO_RESULTS).read_text()
    return {m[0]: (float(m[2]), float(m[3]), int(m[1])) for m in re.findall(
        rf"LOFO rows, {kind} (.+?) \(families on modelled devices(?:, every class)?\): (\d+) "
        r"rows, median \|error\| ([\d.]+) %, p90 ([\d.]+) %", text)}


def test_the_held_out_errors_are_the_committed_lofo_result():
    """HELD_OUT_ERROR_BY_STACK and HELD_OUT_ERROR_BY_REGIME must be what `validate_training.py
    --lofo` wrote in LOFO_RESULTS (regenerate them together)."""
    assert _committed_lofo("stack class") == HELD_OUT_ERROR_BY_STACK
    assert _committed_lofo("regime") == HELD_OUT_ERROR_BY_REGIME
    assert set(HELD_OUT_ERROR_BY_REGIME) == set(REGIMES)


def test_a_communication_heavy_job_prints_its_regime_error(capsys):
    """64 GPUs of FSDP at one 2048-token sequence per GPU: the estimate carries the
    communication-heavy regime's error, wider than the one-node regime's."""
    argv = ["train", "llama-3-8b", "--gpu", "h100", "--gpus", "64", "--fsdp", "full",
            "-b", "1", "--seq-len", "2048"]
    assert main([*argv, "--json"]) == 0
    reg = json.loads(capsys.readouterr().out)["assumptions"]["accuracy"]["regime"]
    median, p90, rows = HELD_OUT_ERROR_BY_REGIME["multi-node, communication-heavy"]
    assert (reg["regime"], reg["median_abs_error_pct"], reg["p90_abs_error_pct"],
            reg["rows"]) == ("multi-node, communication-heavy", median, p90, rows)
    assert reg["sync_tokens_cut"] == COMM_HEAVY_SYNC_TOKENS
    assert p90 > HELD_OUT_ERROR_BY_REGIME["one node"][1]
    assert main(argv) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Runs like this one (multi-node, communication-heavy" in out
    assert f"{p90:g} % in 9 of 10" in out


def test_plan_states_the_regime_of_the_layout_it_chose(capsys):
    """plan's first advice line carries the expected error of the regime its chosen layout is
    in, as its training estimate's assumptions say."""
    assert main(["plan", "llama-3-8b", "--gpus", "64", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    train = doc["train"]
    reg = train["assumptions"]["accuracy"]["regime"]
    layout = train["layout"]
    cfg = TrainConfig(micro_batch=layout["micro_batch"], seq_len=layout["seq_len"],
                      global_batch=train["global_batch"], dp=layout["dp"], tp=layout["tp"],
                      pp=layout["pp"], cp=layout["cp"], zero=layout["zero"])
    assert reg["regime"] == training_regime(cfg, 64, 8)
    assert f"Published runs like this ({reg['regime']})" in doc["advice"][0]
    assert f"{reg['p90_abs_error_pct']:g} % in 9 of 10" in doc["advice"][0]
