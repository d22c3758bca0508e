"""`train --framework`, and the device file's [ceilings] / [topology] tables: contract and bad
input (one line, exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuplan.cli.main import main
from gpuplan.errors import GpuplanError
from gpuplan.estimate.efficiency import END_TO_END_BY_STACK
from gpuplan.specs.device_file import device_from_record

TRAIN = ["train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--fsdp", "full",
         "--seq-len", "8192"]


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_train_names_the_framework_profile(capsys):
    mega = _json(capsys, *TRAIN, "--framework", "megatron")
    foundry = _json(capsys, *TRAIN, "--framework", "llm-foundry")
    assert mega["assumptions"]["framework"]["name"] == "megatron"
    assert mega["assumptions"]["efficiency"]["attention_kernel"] == "cudnn"
    assert foundry["assumptions"]["efficiency"]["attention_kernel"] == "fa2"
    # same layout, cuDNN attention (49 % of peak) beats FlashAttention-2 (31 %) on H100
    assert mega["tokens_per_s"] > foundry["tokens_per_s"]
    # each stack class realises its own fitted end-to-end share (efficiency.END_TO_END_BY_STACK)
    assert mega["assumptions"]["framework"]["end_to_end_class"] == "megatron"
    assert mega["assumptions"]["efficiency"]["end_to_end"] == END_TO_END_BY_STACK["megatron"]
    assert foundry["assumptions"]["efficiency"]["end_to_end"] == END_TO_END_BY_STACK["pytorch"]


def test_megatron_lm_defaults_are_their_own_class_on_fp8_gpus(capsys):
    """Megatron-LM launched with its own defaults (profile megatron-lm) realises the
    megatron-lm-hopper factor on NVIDIA GPUs with FP8 tensor cores and the megatron one on
    older GPUs; NVIDIA's recipes (profile megatron) keep the megatron factor everywhere."""
    from gpuplan.estimate.efficiency import framework_efficiency, stack_class
    from gpuplan.specs.catalog import get_device
    from gpuplan.specs.framework import get_framework

    lm, nv = get_framework("megatron-lm"), get_framework("megatron")
    h100, h200, a100, mi300 = (get_device(n) for n in ("h100", "h200", "a100-sxm-80gb",
                                                        "mi300x"))
    assert [stack_class(lm.end_to_end_class, d) for d in (h100, h200, a100, mi300)] == [
        "megatron-lm-hopper", "megatron-lm-hopper", "megatron", "megatron"]
    assert framework_efficiency(h100, lm).end_to_end == END_TO_END_BY_STACK["megatron-lm-hopper"]
    assert framework_efficiency(a100, lm).end_to_end == END_TO_END_BY_STACK["megatron"]
    assert framework_efficiency(h100, nv).end_to_end == END_TO_END_BY_STACK["megatron"]
    assert END_TO_END_BY_STACK["megatron-lm-hopper"] < END_TO_END_BY_STACK["megatron"]
    lm_run = _json(capsys, *TRAIN, "--framework", "megatron-lm")
    nv_run = _json(capsys, *TRAIN, "--framework", "megatron")
    assert "megatron-lm-hopper stack class" in lm_run["assumptions"]["efficiency"]["source"]
    assert lm_run["step_time_s"] > nv_run["step_time_s"]


def test_train_default_framework_is_stated(capsys):
    r = _json(capsys, *TRAIN)  # FSDP layout, no --framework: auto picks fsdp and says why
    fw = r["assumptions"]["framework"]
    assert fw["name"] == "fsdp" and fw["chosen"].startswith("auto")
    tp = _json(capsys, "train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--tp", "8",
               "--sequence-parallel")
    assert tp["assumptions"]["framework"]["name"] == "megatron"
    assert _json(capsys, *TRAIN, "--framework", "hf")["assumptions"]["framework"]["chosen"] \
        == "named by the user"


def test_bad_framework_is_one_line_exit_2():
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *TRAIN, "--framework",
                        "jax"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "framework" in p.stderr and "megatron" in p.stderr
    assert not p.stdout


def test_hardware_shows_ceilings_and_topology(capsys):
    r = _json(capsys, "hardware", "gb200")
    assert r["ceilings"]["matmul_bf16"] == 0.729
    assert r["topology"]["scale_up_domain"] == 72
    assert "ceiling.matmul_bf16" in r["sources"] and "topology" in r["sources"]


def _record(**extra: object) -> dict:
    rec = {"name": "X", "vendor": "v", "kind": "gpu", "year": 2024, "form_factor": "f",
           "memory_type": "HBM", "sources": {"s": {"title": "t", "date": "2024"}},
           "values": {"memory": {"value": "80 GB", "source": "s"},
                      "mem_bw": {"value": "3 TB/s", "source": "s"}},
           "peak": {"bf16": {"value": "1000 TFLOP/s", "source": "s"}}}
    rec.update(extra)
    return rec


def test_device_file_ceilings_and_topology_parse():
    d = device_from_record(_record(
        ceilings={"matmul_bf16": {"value": 0.8, "source": "s"}},
        topology={"scale_up_domain": 8, "devices_per_node": 8, "kind": "mesh",
                  "per_peer_bandwidth": "64 GB/s", "source": "s"}))
    assert d.ceilings == {"matmul_bf16": 0.8}
    assert d.topology is not None and d.topology.per_peer_bw_bytes_per_s == 64e9


@pytest.mark.parametrize("ceilings, words", [
    ({"matmul_bf16": {"value": 1.5, "source": "s"}}, "ceilings.matmul_bf16"),
    ({"gemm_magic": {"value": 0.5, "source": "s"}}, "ceilings"),
    ({"matmul_bf16": {"value": 0.5, "source": "nowhere"}}, "source"),
])
def test_device_file_bad_ceiling_names_the_field(ceilings, words):
    with pytest.raises(GpuplanError, match=words):
        device_from_record(_record(ceilings=ceilings))


def test_memory_framework_sets_fused_kernels_and_names_the_profile(capsys):
    base = _json(capsys, "memory", "llama-3-8b", "--gpu", "h100", "--seq-len", "4096")
    mega = _json(capsys, "memory", "llama-3-8b", "--gpu", "h100", "--seq-len", "4096",
                 "--framework", "megatron")
    fused = _json(capsys, "memory", "llama-3-8b", "--gpu", "h100", "--seq-len", "4096",
                  "--fused", "--grad-fp32")
    assert mega["assumptions"]["framework"]["name"] == "megatron"
    # no --framework: the stack the layout implies (plain data parallel: hf), as train does
    assert base["assumptions"]["framework"]["name"] == "hf"
    assert base["assumptions"]["framework"]["chosen"].startswith("auto")
    # megatron = fused kernels + fp32 main_grad (the same state and activation bytes as saying
    # so by hand) + its own memory behaviour (vocab-parallel cross-entropy keeps no 16-bit
    # logits): model states equal, activations within a few bytes per token, "other" differs
    for key in ("weights", "gradients", "optimizer"):
        assert mega["per_gpu"][key] == fused["per_gpu"][key]
    assert abs(mega["per_gpu"]["activations"] - fused["per_gpu"]["activations"]) < 4096 * 16
    assert mega["per_gpu"]["gradients"] != base["per_gpu"]["gradients"]
    assert mega["total_bytes"] != base["total_bytes"]


def test_grad_compute_dtype_overrides_the_stack_fp32_main_grad(capsys):
    args = ("memory", "llama-3-8b", "--gpu", "h100", "--seq-len", "4096", "--tp", "8",
            "--framework", "megatron")
    mega = _json(capsys, *args)
    bf16 = _json(capsys, *args, "--grad-compute-dtype")
    # Megatron keeps fp32 main_grad (4 bytes/param); --grad-reduce-in-bf16 keeps 2
    assert mega["per_gpu"]["gradients"] == 2 * bf16["per_gpu"]["gradients"]
    assert bf16["per_gpu"]["weights"] == mega["per_gpu"]["weights"]


def test_grad_flags_together_are_one_line_exit_2():
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "memory", "llama-3-8b",
                        "--gpu", "h100", "--grad-fp32", "--grad-compute-dtype"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "--grad-compute-dtype" in p.stderr and "--grad-fp32" in p.stderr
    assert p.stderr.count("\n") == 1 and not p.stdout


@pytest.mark.parametrize(("alias", "profile"), [("torchtitan", "fsdp"), ("Megatron-Core", "megatron"),
                                                ("megatron-bridge", "nemo"),
                                                ("composer", "llm-foundry")])
def test_framework_aliases_name_the_same_profile(capsys, alias, profile):
    by_alias = _json(capsys, *TRAIN, "--framework", alias)
    by_name = _json(capsys, *TRAIN, "--framework", profile)
    assert by_alias["assumptions"]["framework"]["name"] == profile
    assert by_alias["assumptions"]["framework"]["chosen"] == f"named by the user as {alias!r}"
    assert by_alias["tokens_per_s"] == by_name["tokens_per_s"]
    assert by_alias["memory"]["total_bytes"] == by_name["memory"]["total_bytes"]


def test_loss_option_overrides_the_stack_loss(capsys):
    """--loss fused (a compiled or flash-attn cross-entropy) replaces the fsdp profile's fp32
    loss: the loss backward's transient drops from two fp32 copies of the logits (2 x 4 bytes
    per logit) to one 16-bit gradient (2 bytes), 2 x 4096 tokens x 128,256 logits here."""
    args = ("memory", "llama-3-8b", "--gpu", "h100", "--seq-len", "4096", "--micro-batch", "2",
            "--framework", "fsdp")
    fp32 = _json(capsys, *args)
    fused = _json(capsys, *args, "--loss", "fused")
    same = _json(capsys, *args, "--loss", "fp32")
    logits = 2 * 4096 * 128_256
    assert fp32["other_items"]["transient_peak"] == 8 * logits
    assert fused["other_items"]["transient_peak"] == 2 * logits
    assert same["total_bytes"] == fp32["total_bytes"]
    assert fused["assumptions"]["memory_behaviour"]["loss"] == "fused"
    assert fp32["assumptions"]["memory_behaviour"]["loss"] == "fp32"


def test_bad_loss_is_one_line_exit_2():
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "memory", "llama-3-8b",
                        "--loss", "fp12"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "--loss" in p.stderr and "fused" in p.stderr
    assert p.stderr.count("\n") == 1 and not p.stdout


@pytest.mark.parametrize("extra", [("--document-len", "9000"),
                                   ("--mode", "infer", "--document-len", "512"),
                                   ("--mode", "infer", "--loss", "fused")])
def test_document_len_and_loss_refusals_are_one_line_exit_2(extra):
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", "memory", "llama-3-8b",
                        "--seq-len", "4096", *extra], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert extra[-2] in p.stderr
    assert p.stderr.count("\n") == 1 and not p.stdout


def test_train_states_loss_recompute_and_documents(capsys):
    base = ("train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--fsdp", "full",
            "--recompute", "full")
    titan = _json(capsys, *base, "--framework", "fsdp", "--loss", "fused", "--document-len",
                  "512")["assumptions"]
    mega = _json(capsys, *base, "--framework", "megatron")["assumptions"]
    assert titan["loss"] == "fused cross-entropy (--loss)"
    assert "early stop" in titan["recompute"] and "early stop" not in mega["recompute"]
    assert "512 tokens" in titan["documents"] and "documents" not in mega
    assert mega["loss"].startswith("vocab-parallel")


def test_fix_commands_carry_loss_and_document_len():
    from gpuplan.estimate.fixes import train_command
    from gpuplan.specs.workload import TrainConfig

    cmd = train_command("llama-3-8b", "h100", TrainConfig(seq_len=8192, loss="fused",
                                                          document_len=1024))
    assert "--loss fused" in cmd and "--document-len 1024" in cmd
    assert "--loss" not in train_command("llama-3-8b", "h100", TrainConfig())


PLAIN = ["train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--seq-len", "4096"]


@pytest.mark.parametrize(("stack", "zero", "fsdp"), [
    ("megatron", 1, "none"), ("megatron-lm", 1, "none"), ("nemo", 1, "none"), ("fsdp", 3, "full"),
    ("torchtitan", 3, "full"), ("llm-foundry", 3, "full"), ("hf", 0, "none"),
    ("deepspeed", 0, "none")])
def test_a_named_stack_shards_data_parallelism_as_it_does_by_default(capsys, stack, zero, fsdp):
    """No --zero/--fsdp: Megatron's distributed optimizer, torchtitan's and llm-foundry's FSDP;
    DDP for the others; stated under assumptions.sharding, and the same numbers as naming the
    sharding by hand."""
    r = _json(capsys, *PLAIN, "--framework", stack)
    assert (r["layout"]["zero"], r["layout"]["fsdp"]) == (zero, fsdp)
    assert ("sharding" in r["assumptions"]) == (zero > 0)
    if zero:
        by_hand = ["--zero", "1"] if fsdp == "none" else ["--fsdp", "full"]
        same = _json(capsys, *PLAIN, "--framework", stack, *by_hand)
        assert same["tokens_per_s"] == r["tokens_per_s"]
        assert same["memory"]["total_bytes"] == r["memory"]["total_bytes"]
        assert "sharding" not in same["assumptions"]


def test_the_stated_sharding_wins_over_the_stacks_default(capsys):
    r = _json(capsys, *PLAIN, "--framework", "megatron", "--zero", "0")
    assert r["layout"]["zero"] == 0 and "sharding" not in r["assumptions"]
    auto = _json(capsys, *PLAIN)  # no stack named: the layout's own (plain DDP -> hf)
    assert auto["layout"]["zero"] == 0 and "sharding" not in auto["assumptions"]
    mem = _json(capsys, "memory", "llama-3-8b", "--gpu", "h100", "--mode", "train", "--dp", "8",
                "--micro-batch", "1", "--seq-len", "4096", "--framework", "fsdp")
    assert mem["assumptions"]["zero_stage"] == 3
    assert "FSDP" in mem["assumptions"]["framework"]["sharding"]


def test_device_file_fabric_is_checked_and_sets_the_network_efficiency():
    from gpuplan.specs.cluster import INFINIBAND_EFFICIENCY, NETWORK_EFFICIENCY, default_cluster

    link = {"name": "IB", "bandwidth": {"value": "50 GB/s", "source": "s"}}
    ib = device_from_record(_record(scale_out={**link, "fabric": "infiniband"}))
    plain = device_from_record(_record(scale_out=link))
    assert default_cluster(ib, 16).scale_out.efficiency == INFINIBAND_EFFICIENCY
    assert default_cluster(plain, 16).scale_out.efficiency == NETWORK_EFFICIENCY
    with pytest.raises(GpuplanError, match="fabric"):
        device_from_record(_record(scale_out={**link, "fabric": "ethernet"}))


def test_a_profile_files_unknown_sharding_is_refused(monkeypatch):
    import gpuplan.specs.framework as fwmod

    real = fwmod._profile_fields
    monkeypatch.setattr(fwmod, "_profile_fields",
                        lambda name: {**real(name), "data_parallel": "zer01"})
    with pytest.raises(GpuplanError, match="data_parallel"):
        fwmod.get_framework("megatron")


def test_megatron_lm_exposes_what_the_recipes_overlap(capsys):
    """Llama 3 8B on 4 nodes, TP 2 with sequence parallelism: Megatron-LM launched without its
    overlap flags (megatron-lm) leaves the gradient reduce-scatter, parameter gather and forward
    TP collectives exposed, so its step is slower than the recipe's (megatron) at the same
    memory and compute; the assumptions say which. On an A100, where both are of the megatron
    class (on FP8 GPUs megatron-lm's compute is slower too: the test above)."""
    job = ["train", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--gpus", "32", "--tp", "2",
           "--sequence-parallel", "--seq-len", "8192", "--global-batch", "64"]
    own = _json(capsys, *job, "--framework", "megatron-lm")
    recipe = _json(capsys, *job, "--framework", "megatron")
    assert own["memory"]["total_bytes"] == recipe["memory"]["total_bytes"]
    assert own["breakdown_s"]["compute"] == pytest.approx(recipe["breakdown_s"]["compute"])
    assert own["breakdown_s"]["dp_comm_exposed"] > recipe["breakdown_s"]["dp_comm_exposed"]
    assert own["tokens_per_s"] < recipe["tokens_per_s"]
    assert "TP collectives 0% hidden" in own["assumptions"]["overlap"]
    assert "exposed after the last micro-batch" in own["assumptions"]["overlap"]
    assert "TP collectives 50% hidden" in recipe["assumptions"]["overlap"]


OVERLAP_JOB = ["train", "llama-3-8b", "--gpu", "a100-sxm-80gb", "--gpus", "32", "--tp", "2",
               "--sequence-parallel", "--seq-len", "8192", "--global-batch", "64"]


def test_stated_overlaps_replace_the_profiles(capsys):
    """--overlap names what a launch script turns on: 'none' on the recipe profile is exactly
    Megatron-LM's own defaults (megatron-lm), and all three on megatron-lm are the recipe's
    (on an A100: on FP8 GPUs the two profiles are of different end-to-end classes);
    the assumptions say they were stated."""
    none = _json(capsys, *OVERLAP_JOB, "--framework", "megatron", "--overlap", "none")
    own = _json(capsys, *OVERLAP_JOB, "--framework", "megatron-lm")
    assert none["tokens_per_s"] == own["tokens_per_s"]
    assert none["assumptions"]["framework"]["overlap"] == "stated: none"
    assert own["assumptions"]["framework"]["overlap"] == "the profile's"
    every = _json(capsys, *OVERLAP_JOB, "--framework", "megatron-lm", "--overlap", "tp,grad,param")
    recipe = _json(capsys, *OVERLAP_JOB, "--framework", "megatron")
    assert every["tokens_per_s"] == recipe["tokens_per_s"]
    assert every["assumptions"]["framework"]["overlap"] == "stated: grad,param,tp"
    grad = _json(capsys, *OVERLAP_JOB, "--framework", "megatron", "--overlap", "grad,param")
    assert own["tokens_per_s"] < grad["tokens_per_s"] < recipe["tokens_per_s"]
    assert "TP collectives 0% hidden" in grad["assumptions"]["overlap"]


def _one_line_exit_2(argv: list[str], option: str) -> None:
    p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert option in p.stderr and p.stderr.count("\n") == 1 and not p.stdout


@pytest.mark.parametrize("extra", [["--overlap", "grad,foo"], ["--overlap", ","],
                                   ["--overlap", " "],
                                   ["--overlap", "grad", "--no-overlap"]])
def test_bad_overlap_is_one_line_exit_2(extra):
    _one_line_exit_2([*OVERLAP_JOB, *extra], "--overlap")


def test_stated_attention_kernel_slows_only_attention(capsys):
    """--attention-kernel fa1 (FlashAttention-1 class) on a long-context job: same memory and
    matmul time, attention at half the FA2 ceiling, so fewer tokens/s; the kernel is named."""
    job = [*TRAIN, "--framework", "llm-foundry"]
    fa2 = _json(capsys, *job)
    fa1 = _json(capsys, *job, "--attention-kernel", "fa1")
    assert fa1["memory"]["total_bytes"] == fa2["memory"]["total_bytes"]
    assert fa1["tokens_per_s"] < fa2["tokens_per_s"]
    assert fa1["assumptions"]["framework"]["attention_kernel"] == "fa1"
    assert fa2["assumptions"]["framework"]["attention_kernel"] == "fa2"
    assert fa1["assumptions"]["framework"]["attention_kernel_chosen"] == "stated"
    assert fa2["assumptions"]["framework"]["attention_kernel_chosen"] == "the profile's"
    search = ["train", "llama-3-8b", "--gpus", "8", "--seq-len", "8192", "--search", "--top",
              "1"]
    best = _json(capsys, *search)["top"][0]["tokens_per_s"]
    best_fa1 = _json(capsys, *search, "--attention-kernel", "fa1")["top"][0]["tokens_per_s"]
    assert best_fa1 < best  # every searched layout is timed with the stated kernel


@pytest.mark.parametrize("extra", [["--attention-kernel", "fa9"], ["--attention-kernel", " "],
                                   ["--attention-kernel", "fa1", "--attention", "naive"],
                                   ["--attention-kernel", "fa1", "--gpu", "epyc-9654"],
                                   ["--attention-kernel", "fa2", "--gpu", "tpu-v5p"]])
def test_bad_attention_kernel_is_one_line_exit_2(extra):
    _one_line_exit_2([*TRAIN, *extra], "--attention-kernel")


def test_fp8_recipe_rowwise_is_slower_and_stated(capsys):
    """--fp8-recipe rowwise (torchao's row-wise scaling) adds casts and rescales to the same
    GEMMs: slower than tensorwise, same memory, and the assumptions name the recipe."""
    job = [*TRAIN, "--framework", "fsdp", "--precision", "fp8-mixed"]
    tensor = _json(capsys, *job)
    row = _json(capsys, *job, "--fp8-recipe", "rowwise")
    assert row["tokens_per_s"] < tensor["tokens_per_s"]
    assert row["memory"]["total_bytes"] == tensor["memory"]["total_bytes"]
    assert "rowwise scaling" in row["assumptions"]["fp8"]
    assert "tensorwise scaling" in tensor["assumptions"]["fp8"]
    assert main([*job, "--fp8-recipe", "rowwise"]) == 0  # the table's notes name it too
    assert "torchao row-wise" in " ".join(capsys.readouterr().out.split())
    lora = _json(capsys, *job, "--fp8-recipe", "rowwise", "--finetune", "lora")
    assert "rowwise scaling" in lora["assumptions"]["fp8"]  # LoRA's fp32 moments keep working


@pytest.mark.parametrize("extra", [["--fp8-recipe", "rowwise"], ["--fp8-recipe", "blockwise"]])
def test_bad_fp8_recipe_is_one_line_exit_2(extra):
    _one_line_exit_2([*TRAIN, *extra], "--fp8-recipe")


def test_every_training_estimate_states_its_held_out_error(capsys):
    """The expected error printed with a step time is the stack class's leave-one-family-out
    error (HELD_OUT_ERROR_BY_STACK), megatron's for a Megatron job, pytorch's for FSDP."""
    from gpuplan.estimate.efficiency import HELD_OUT_ERROR_BY_STACK

    for stack, gpu, cls in (("megatron", "h100", "megatron"), ("fsdp", "h100", "pytorch"),
                            ("megatron-lm", "h100", "megatron-lm-hopper"),
                            ("megatron-lm", "a100-sxm-80gb", "megatron")):
        argv = [*PLAIN, "--framework", stack]
        argv[argv.index("--gpu") + 1] = gpu
        acc = _json(capsys, *argv)["assumptions"]["accuracy"]
        median, p90, rows = HELD_OUT_ERROR_BY_STACK[cls]
        assert (acc["stack_class"], acc["median_abs_error_pct"], acc["p90_abs_error_pct"],
                acc["rows"]) == (cls, median, p90, rows)
        assert acc["fresh_holdout"]["rows"] > 0
    assert main([*PLAIN, "--framework", "megatron"]) == 0
    assert "Expected error" in capsys.readouterr().out


def test_the_fresh_holdout_error_is_the_scored_sets():
    """FRESH_HOLDOUT_ERROR (printed beside the leave-one-family-out error) is the A100/H100
    rows of the twenty-one hold-out files scored at stops 14 to 24: their median and 90th percentile
    |error|."""
    import csv
    import re
    import statistics
    from pathlib import Path

    from gpuplan.estimate.efficiency import FRESH_HOLDOUT_ERROR

    root = Path(__file__).parents[1] / "benchmarks"
    device = {}
    for name in ("training_calibration.csv", "training_validation.csv"):
        with (root / "data" / name).open() as f:
            device.update({r["run_id"]: r["device"] for r in csv.DictReader(f)})
    errs = []
    sets = [f"data{n}-2026-12-02-stop{stop}" for n, stop in (
        (13, 14), (14, 14), (15, 14), (16, 15), (17, 15), (18, 15), (19, 15), (20, 16),
        (21, 16))] + [f"{s}-2026-12-02-stop17" for s in ("data22to24", "data25to26",
                                                        "data27to28", "data29to30")]
    sets += ["data31-2026-12-02-stop18", "data32-2026-12-03-stop19", "data33-2026-12-04-stop21",
             "data34to35-2026-12-04-stop22", "data36to37-2026-12-04-stop22",
             "data38to40-2026-12-04-stop23", "data41to43-2026-12-04-stop23",
             "data44to45-2026-12-04-stop24"]
    for name in sets:
        text = root / "results" / f"training-validation-{name}-rows.txt"
        for run, err in re.findall(r"^(\S+)\s+(?:tokens_per_sec_per_gpu|tflops_per_gpu)\b.*?"
                                   r"\s([+-]\d+\.\d)\s+[+-]\d+\.\d", text.read_text(), re.M):
            if device[run].startswith(("A100", "H100")):
                errs.append(abs(float(err)))
    xs = sorted(errs)
    k = 0.9 * (len(xs) - 1)
    p90 = xs[int(k)] + (xs[int(k) + 1] - xs[int(k)]) * (k - int(k))
    assert (round(statistics.median(xs), 1), round(p90, 1), len(xs)) == FRESH_HOLDOUT_ERROR


def test_aa_scaling_keeps_bf16_grads_and_runs_the_tp_backward_synchronously(capsys):
    """Aleph Alpha's Scaling codebase (aa-scaling; alias scaling): bf16 gradients on the
    parameters (half Megatron-LM's fp32 main_grad bytes) reduced in fp32 (the same DP bytes), and
    no async TP backward: with TP 4 and no sequence parallelism all four per-layer all-reduces
    are exposed where megatron-lm hides the two backward ones, so TP time doubles."""
    job = ["train", "llama-2-13b", "--gpu", "a100-sxm-80gb", "--gpus", "32", "--tp", "4",
           "--seq-len", "2048", "--global-batch", "256"]
    aa = _json(capsys, *job, "--framework", "aa-scaling")
    mlm = _json(capsys, *job, "--framework", "megatron-lm")
    assert aa["memory"]["per_gpu"]["gradients"] == pytest.approx(
        mlm["memory"]["per_gpu"]["gradients"] / 2)
    grads = {r["assumptions"]["framework"]["name"]: next(
        c["bytes"] for c in r["collectives"] if c["what"] == "data parallel gradients")
        for r in (aa, mlm)}
    assert grads["aa-scaling"] == grads["megatron-lm"]
    assert aa["breakdown_s"]["tp_comm"] == pytest.approx(2 * mlm["breakdown_s"]["tp_comm"])
    assert aa["tokens_per_s"] < mlm["tokens_per_s"]
    assert aa["assumptions"]["framework"]["tp_backward_overlap"] is False
    alias = _json(capsys, *job, "--framework", "scaling")
    assert alias["tokens_per_s"] == aa["tokens_per_s"]
