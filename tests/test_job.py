"""One job description: memory and train agree, defaults agree across commands, inference
refuses training-only options, the search's numbers are train's numbers, and the derived
full-recomputation profile is what the op builder emits."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest
import typer

from gpuplan.cli.main import app, main
from gpuplan.errors import InputError
from gpuplan.estimate.memory import checkpointed, saved_per_block
from gpuplan.ops.impl import train_impl
from gpuplan.ops.transformer import build_training
from gpuplan.specs import get_model, model_presets
from gpuplan.specs.workload import TrainConfig, check_layout, refuse_train_only


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


LAYOUTS = [
    # the case: Llama-3-70B on 64 GPUs, DP4 TP2 PP4 CP2, ZeRO-2, v=5, SP
    ("llama-3-70b", "h100", 64, ["--dp", "4", "--tp", "2", "--pp", "4", "--cp", "2", "--zero",
                                 "2", "--virtual-stages", "5", "--sequence-parallel",
                                 "--global-batch", "64"]),
    ("gpt2-large", "a100", 8, ["--dp", "4", "--tp", "2", "--zero", "3", "--seq-len", "1024",
                               "--micro-batch", "4"]),
    ("mixtral-8x7b", "h100", 16, ["--dp", "8", "--pp", "2", "--ep", "2", "--zero", "1",
                                  "--offload-optimizer", "--recompute", "full",
                                  "--global-batch", "64"]),
]


@pytest.mark.parametrize("model, gpu, gpus, layout", LAYOUTS, ids=lambda x: str(x)[:20])
def test_memory_and_train_give_the_same_bytes(capsys, model, gpu, gpus, layout):
    mem = run_json(capsys, "memory", model, "--gpu", gpu, *layout)
    tr = run_json(capsys, "train", model, "--gpu", gpu, "--gpus", str(gpus), *layout)
    assert tr["memory"]["per_gpu"] == mem["per_gpu"]
    assert tr["memory"]["total_bytes"] == mem["total_bytes"]


DEFAULTS_THAT_DIFFER = {
    "--dp": "1 in memory, 'the rest of the GPUs' in train",
    "--top": "op rows in roofline, layouts in train --search and advise",
    "--gpu": "plan picks h100 unless told (None = its stated default); others say h100",
    "-g": "as --gpu",
    "--goal": "plan's goals (train, serve, both) are not advise's (pretrain ... serve)",
    "--rate": "serve without --rate times one batch; plan and advise need a load (2 req/s)",
    "--slo-ttft": "serve states no SLO unless asked; plan and advise rank against one",
    "--slo-tpot": "as --slo-ttft",
    "--fused": "roofline's --fused shows a compiler's fusion (off unless asked); train and "
               "memory leave the kernels to the stack unless --fused/--no-fused states them",
}
"""Options whose default differs between commands, and why (the README says the same)."""


def test_the_same_option_has_the_same_default_in_every_command(capsys):
    """Every option has one default across commands, except DEFAULTS_THAT_DIFFER. A length that
    serve takes as text ('512', it also takes distributions) equals the same number elsewhere."""
    run_json(capsys, "models", "gpt2")  # registers the commands
    group = typer.main.get_command(app)
    seen: dict[str, set[str]] = {}
    for cmd in group.commands.values():  # type: ignore[attr-defined]
        for p in cmd.params:
            for o in p.opts:
                seen.setdefault(o, set()).add(str(getattr(p.default, "value", p.default)))
    differ = {o for o, d in seen.items() if len(d) > 1}
    assert differ <= set(DEFAULTS_THAT_DIFFER), differ
    assert {"--seq-len", "--micro-batch", "--zero", "--recompute"} <= set(seen)


@pytest.mark.parametrize("flag", [["--recompute", "full"], ["--zero", "2"], ["--pp", "2"],
                                  ["--offload-optimizer"], ["--global-batch", "64"]])
def test_inference_refuses_training_only_options_with_one_line(flag):
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "memory", "gpt2", "--mode",
                        "infer", *flag], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and flag[0] in p.stderr and "training" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not p.stdout


def test_refuse_train_only_accepts_defaults_and_names_the_option():
    refuse_train_only({"zero": 0, "recompute": "none", "sp": False})
    with pytest.raises(InputError, match="--sequence-parallel"):
        refuse_train_only({"sp": True})


def test_a_job_checks_itself_when_made_and_when_changed():
    with pytest.raises(InputError, match="global_batch"):
        TrainConfig(micro_batch=3, dp=2, global_batch=8)
    with pytest.raises(InputError, match="precision"):
        TrainConfig(precision="bf8")  # type: ignore[arg-type]
    ok = TrainConfig(micro_batch=2, dp=2, global_batch=8)
    with pytest.raises(InputError, match="global_batch"):
        replace(ok, dp=3)
    with pytest.raises(InputError, match="gpus"):
        check_layout(ok, 8, get_model("gpt2"))
    with pytest.raises(InputError, match="tp"):
        check_layout(TrainConfig(dp=1, tp=5), 5, get_model("gpt2"))


def test_search_best_layout_re_timed_by_train_gives_the_same_step_time(capsys):
    s = run_json(capsys, "train", "llama-3-8b", "--gpu", "h100", "--gpus", "16",
                 "--global-batch", "128", "--fused", "--search", "--top", "3")
    best = s["top"][0]
    argv = ["train", "llama-3-8b", "--gpu", "h100", "--gpus", "16", "--global-batch", "128",
            "--fused", "--dp", str(best["dp"]), "--tp", str(best["tp"]), "--pp",
            str(best["pp"]), "--cp", str(best["cp"]), "--ep", str(best["ep"]), "--zero",
            str(best["zero"]), "--virtual-stages", str(best["virtual_stages"]),
            "--recompute", best["recompute"], "--micro-batch", str(best["micro_batch"])]
    argv += ["--sequence-parallel"] if best["sequence_parallel"] else []
    argv += ["--offload-optimizer"] if best["offload_optimizer"] else []
    t = run_json(capsys, *argv)
    assert t["step_time_s"] == best["step_time_s"]
    assert t["memory"]["total_bytes"] == best["memory_bytes"]


@pytest.mark.parametrize("m", model_presets(), ids=lambda m: m.name)
def test_checkpointed_bytes_are_what_the_builder_keeps_under_full_recompute(m):
    for tp, sp, kind in ((1, False, "gpu"), (2, True, "gpu"), (1, False, "cpu")):
        if m.num_heads % tp or (m.kv_heads % tp and tp % m.kv_heads):
            continue
        cfg = TrainConfig(micro_batch=2, seq_len=256, tp=tp, sp=sp, recompute="full")
        impl = train_impl(cfg, kind)
        built = saved_per_block(build_training(m, 2, 256, impl))
        none = saved_per_block(build_training(m, 2, 256, replace(impl, recompute="none")))
        assert checkpointed(m, cfg, impl, none) == built
