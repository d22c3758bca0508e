"""Op-level selective activation checkpointing (estimate.sac): which matmuls torchtitan's
per-op policy reruns, and that memory and step time both follow from it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from gpuplan.cli.main import main
from gpuplan.estimate.memory import train_memory
from gpuplan.estimate.sac import recomputed_mm_shares
from gpuplan.estimate.training import step_time
from gpuplan.ops.impl import Impl
from gpuplan.ops.transformer import BLOCK_ATTN, BLOCK_MLP, build_training
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.memory_behaviour import behaviour_for
from gpuplan.specs.workload import TrainConfig


def _shares(model: str) -> dict[tuple[str, str], float]:
    m = get_model(model)
    return recomputed_mm_shares(m, build_training(m, 1, 1024, Impl(attention="flash")))


@pytest.mark.parametrize(("model", "expected"), [
    # wq, wk, wv, wo, w1, w3, w2: the 2nd, 4th and 6th calls. Llama 3 8B's fused QKV is
    # 4096 + 1024 + 1024 wide, so wk is 1/6 of it; gate_up is w1 then w3
    ("llama-3-8b", {(BLOCK_ATTN, "layers.attn.qkv"): 1024 / 6144,
                    (BLOCK_ATTN, "layers.attn.out"): 1.0,
                    (BLOCK_MLP, "layers.mlp.gate_up"): 0.5,
                    (BLOCK_MLP, "layers.mlp.down"): 0.0}),
    # GPT-2: wq, wk, wv, wo, fc1, fc2 (multi-head: wk is a third of QKV); fc2 is the 6th
    ("gpt2", {(BLOCK_ATTN, "layers.attn.qkv"): 1 / 3, (BLOCK_ATTN, "layers.attn.out"): 1.0,
              (BLOCK_MLP, "layers.mlp.up"): 0.0, (BLOCK_MLP, "layers.mlp.down"): 1.0}),
])
def test_per_op_reruns_every_second_mm_call(model, expected):
    assert _shares(model) == pytest.approx(expected)


def test_matmuls_kind_reruns_no_matmul():
    m = get_model("llama-3-8b")
    ops = build_training(m, 1, 1024, Impl(attention="flash"))
    assert recomputed_mm_shares(m, ops, "matmuls") == {}


BASE = TrainConfig(micro_batch=1, seq_len=4096, fsdp="full", dp=8, dropout=False,
                   memory_behaviour=behaviour_for("fsdp"))


def _step(cfg: TrainConfig):
    m = get_model("llama-3-8b")
    return step_time(m, default_cluster(get_device("h100"), 8), cfg)


def test_per_op_reruns_exactly_the_recomputed_matmul_flops():
    """Executed matmul FLOPs grow by wk + wo + w3 of every layer's forward, nothing else
    (attention kept, element-wise ops carry no matmul FLOPs)."""
    m = get_model("llama-3-8b")
    none, sel = _step(BASE), _step(replace(BASE, recompute="selective"))
    t, h, kv, ff = 4096, m.hidden_size, m.kv_heads * m.head_size, m.intermediate_size
    per_layer = 2 * t * h * (kv + h + ff)  # wk, wo, w3 forward
    assert sel.hardware_flops_per_step - none.hardware_flops_per_step == pytest.approx(
        per_layer * m.num_layers * 8, rel=1e-9)
    assert none.step_time_s < sel.step_time_s < _step(replace(BASE, recompute="full")).step_time_s


def test_matmuls_kind_costs_less_time_and_more_memory_than_per_op():
    m, d = get_model("llama-3-8b"), get_device("h100")
    per_op = replace(BASE, recompute="selective")
    dots = replace(per_op, selective="matmuls")
    assert _step(dots).step_time_s < _step(per_op).step_time_s
    assert _step(dots).hardware_flops_per_step == _step(BASE).hardware_flops_per_step
    acts = {c.selective: train_memory(m, d, c).per_gpu["activations"] for c in (per_op, dots)}
    assert acts["auto"] < acts["matmuls"]


def test_selective_option_reaches_train_and_says_so(capsys):
    argv = ["train", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--fsdp", "full",
            "--framework", "fsdp", "--recompute", "selective", "--json"]
    runs = {}
    for kind in ("auto", "attention", "per-op"):
        assert main([*argv, "--selective", kind]) == 0
        runs[kind] = json.loads(capsys.readouterr().out)
    assert runs["auto"]["step_time_s"] == runs["per-op"]["step_time_s"]
    assert runs["attention"]["step_time_s"] < runs["per-op"]["step_time_s"]
    assert "per-op" in runs["auto"]["assumptions"]["recompute"]


def test_bad_selective_kind_is_one_clear_line(capsys):
    rc = main(["train", "llama-3-8b", "--selective", "sometimes"])
    err = capsys.readouterr().err
    assert rc != 0
    assert "--selective" in err and "per-op" in err and "Traceback" not in err


def test_per_op_policy_reruns_what_real_torch_reruns():
    """Real PyTorch: a Llama block (separate wq, wk, wv, wo, w1, w3, w2; SDPA) under
    torchtitan's policy (torch.utils.checkpoint.create_selective_checkpoint_contexts: save
    attention and aten.mm outputs except every second mm) reruns exactly the matmul FLOPs
    that recomputed_mm_shares names for the same architecture."""
    torch = pytest.importorskip("torch")
    from collections import defaultdict

    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )
    from torch.utils.flop_counter import FlopCounterMode

    t, d, heads, kv_heads, ff = 16, 32, 4, 2, 96
    hd = d // heads
    lin = {n: torch.nn.Linear(i, o, bias=False) for n, i, o in (
        ("wq", d, d), ("wk", d, kv_heads * hd), ("wv", d, kv_heads * hd), ("wo", d, d),
        ("w1", d, ff), ("w3", d, ff), ("w2", ff, d))}
    aten = torch.ops.aten
    save = {aten.mm.default, aten._scaled_dot_product_flash_attention_for_cpu.default,
            aten._scaled_dot_product_efficient_attention.default,
            aten._scaled_dot_product_flash_attention.default}

    def block(x):  # type: ignore[no-untyped-def]
        h = torch.nn.functional.rms_norm(x, (d,))
        q = lin["wq"](h).view(1, t, heads, hd).transpose(1, 2)
        k = lin["wk"](h).view(1, t, kv_heads, hd).transpose(1, 2)
        v = lin["wv"](h).view(1, t, kv_heads, hd).transpose(1, 2)
        rep = heads // kv_heads
        a = torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)
        x = x + lin["wo"](a.transpose(1, 2).reshape(t, d))
        h = torch.nn.functional.rms_norm(x, (d,))
        return x + lin["w2"](torch.nn.functional.silu(lin["w1"](h)) * lin["w3"](h))

    def context():  # type: ignore[no-untyped-def]
        meta: dict[str, int] = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):  # type: ignore[no-untyped-def]
            key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
            if func == aten.mm.default:
                meta[key] += 1
            keep = func in save and not (func == aten.mm.default and meta[key] % 2 == 0)
            return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

        return create_selective_checkpoint_contexts(policy)

    def backward_flops(sac: bool) -> float:
        x = torch.randn(t, d, requires_grad=True)
        y = checkpoint(block, x, use_reentrant=False, context_fn=context) if sac else block(x)
        with FlopCounterMode(display=False) as fc:
            y.sum().backward()
        return fc.get_total_flops()

    measured = backward_flops(True) - backward_flops(False)
    m = get_model("llama-3-8b").model_copy(update={
        "hidden_size": d, "num_heads": heads, "num_kv_heads": kv_heads, "intermediate_size": ff,
        "num_layers": 1, "head_dim": None})
    ops = build_training(m, 1, t, Impl(attention="flash", dropout=False))
    shares = recomputed_mm_shares(m, ops)
    predicted = sum(shares.get((str(o.layer), o.name), 0.0) * o.total_flops
                    for o in ops.phase("forward") if o.per_layer and o.kind == "matmul")
    assert measured == 2 * t * d * (kv_heads * hd + d + ff)  # wk, wo, w3
    assert predicted == pytest.approx(measured, rel=1e-12)


def test_eager_attention_under_per_op_reruns_its_batched_matmuls_not_twice():
    """With eager attention the policy keeps no attention output (its bmm and softmax are not
    on the save list): they rerun once, as op-level work, not also as Megatron's attention-core
    recompute; with SDPA the kernel's output is kept and nothing of it reruns."""
    eager = replace(BASE, attention="naive")
    none, sel = _step(eager), _step(replace(eager, recompute="selective"))
    m = get_model("llama-3-8b")
    t, h, kv, ff = 4096, m.hidden_size, m.kv_heads * m.head_size, m.intermediate_size
    mm = 2 * t * h * (kv + h + ff)
    causal_scores_pv = 2 * m.num_heads * t * t * 2 * m.head_size  # QK^T and PV, full s x s
    assert sel.hardware_flops_per_step - none.hardware_flops_per_step == pytest.approx(
        (mm + causal_scores_pv) * m.num_layers * 8, rel=1e-9)


def test_selective_is_refused_in_inference(capsys):
    assert main(["memory", "llama-3-8b", "--mode", "infer", "--selective", "per-op"]) != 0
    err = capsys.readouterr().err
    assert "--selective" in err and "--mode infer" in err and "Traceback" not in err
