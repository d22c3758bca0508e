"""Memory mechanisms of the Megatron-family stacks (Megatron-Core with Transformer Engine,
NeMo 2 / Megatron-Bridge recipes): each test asserts the bytes of one mechanism, derivation in
a comment."""

from __future__ import annotations

from gpuplan.ops.impl import Impl
from gpuplan.ops.transformer import build_training
from gpuplan.specs import get_model


def _saved(ops, prefix: str) -> float:
    return sum(o.saved_bytes for o in ops.phase("forward") if o.name.startswith(prefix))


def test_fused_gated_unit_keeps_gate_and_up_only():
    """Llama-3-8B, 1 x 1024 tokens, bf16: ffn 14336. Eager SiLU-gate keeps gate, silu(gate)
    and up: 3 x 1024 x 14336 x 2 B; the fused kernel (Megatron-Core SwiGLUFunction) keeps its
    input, gate and up: 2 x 1024 x 14336 x 2 B."""
    m = get_model("llama-3-8b")
    eager = build_training(m, 1, 1024, Impl(fused=False, dropout=False))
    fused = build_training(m, 1, 1024, Impl(fused=True, dropout=False))
    unit = 1024 * 14336 * 2
    assert _saved(eager, "layers.mlp.act") + _saved(eager, "layers.mlp.gate_mul") == 3 * unit
    assert _saved(fused, "layers.mlp.act") + _saved(fused, "layers.mlp.gate_mul") == 2 * unit


def _fp8_job(**kw):
    from gpuplan.estimate.memory import TrainConfig

    base = dict(micro_batch=1, seq_len=8192, precision="fp8-mixed", zero=1, dp=4, cp=2,
                attention="flash", fused=True)
    return TrainConfig(**{**base, **kw})


def test_te_fp8_linear_keeps_a_one_byte_copy_of_its_input():
    """Llama-3-8B layer, 1 x 4096 local tokens (8192 / cp 2). Transformer Engine saves the
    FP8 column-wise copy of each layer linear's input: qkv 4096 x 4096 x 1 B, out-proj
    4096 x 4096 x 1 B (its own copy beside flash's bf16 output), gate_up 4096 x 4096 x 1 B,
    down 4096 x 14336 x 1 B; the bf16 job keeps 2 B of qkv, gate_up and down inputs and none
    for out-proj (the attention output is flash's)."""
    from gpuplan.ops.impl import train_impl
    from gpuplan.specs.framework import get_framework

    m = get_model("llama-3-8b")
    cfg = get_framework("megatron").apply(_fp8_job())
    ops = build_training(m, 1, 8192, train_impl(cfg, "gpu"))
    t = 4096
    linears = ("layers.attn.qkv", "layers.attn.out", "layers.mlp.gate_up", "layers.mlp.down")
    assert sum(_saved(ops, n) for n in linears) == t * (3 * 4096 + 14336) * 1
    bf16 = get_framework("megatron").apply(_fp8_job(precision="bf16-mixed"))
    ops16 = build_training(m, 1, 8192, train_impl(bf16, "gpu"))
    assert sum(_saved(ops16, n) for n in linears) == t * (2 * 4096 + 14336) * 2
    # torchtitan (torchao Float8Linear saves the high-precision input): unchanged by FP8
    tt = get_framework("fsdp").apply(_fp8_job(zero=3))
    ops_tt = build_training(m, 1, 8192, train_impl(tt, "gpu"))
    assert sum(_saved(ops_tt, n) for n in linears) == t * (2 * 4096 + 14336) * 2


def test_megatron_fp8_weights_gradients_and_states():
    """Llama-3-8B, 8 GPUs as dp 4 x cp 2, distributed optimizer (ZeRO-1 over dp x cp = 8).
    Layer matrices 32 x (4096 x 6144 qkv + 4096 x 4096 out + 3 x 4096 x 14336 mlp)
    = 6,979,321,856; embedding and head 2 x 128256 x 4096 = 1,050,673,152; norms 266,240.
    FP8 primary weights (--fp8-param-gather): layer matrices 1 B row-wise + 1 B column-wise,
    the rest bf16: 2 B/param in all. Gradient buffer bf16, full size on every rank
    (--grad-reduce-in-bf16; the distributed optimizer reduce-scatters into it): 2 B/param.
    Optimizer: fp32 master + two fp32 moments, 12 B/param / 8, plus 4 B step per tensor / 8."""
    from gpuplan.estimate.memory import train_memory
    from gpuplan.specs import get_device
    from gpuplan.specs.framework import get_framework

    m, d = get_model("llama-3-8b"), get_device("h100")
    params = 8_030_261_248
    r = train_memory(m, d, get_framework("megatron").apply(_fp8_job()))
    assert r.per_gpu["weights"] == 2 * params
    assert r.per_gpu["gradients"] == 2 * params
    assert abs(r.per_gpu["optimizer"] - 12 * params / 8) < 4 * m.param_tensors()
    # BF16 Megatron-LM: fp32 main_grad (arguments.py: --bf16 -> accumulate in fp32)
    bf16 = train_memory(m, d, get_framework("megatron").apply(_fp8_job(precision="bf16-mixed")))
    assert bf16.per_gpu["gradients"] == 4 * params
    # NeMo 2 / Megatron-Bridge performance recipes: grad_reduce_in_fp32 = False in BF16 too
    nemo = train_memory(m, d, get_framework("nemo").apply(_fp8_job(precision="bf16-mixed")))
    assert nemo.per_gpu["gradients"] == 2 * params


def test_fp8_weight_bytes_per_stack():
    """Bytes on top of a 2-byte weight per FP8 linear element: TE without FP8 primary weights
    keeps the bf16 weight and two FP8 copies (+2); with them, FP8 row-wise + column-wise
    replace the bf16 copy (2 - 2 = 0); the default stack one FP8 copy (+1)."""
    from gpuplan.estimate.memory import fp8_weight_bytes
    from gpuplan.specs.memory_behaviour import behaviour_for

    assert fp8_weight_bytes(behaviour_for("megatron", fp8_primary_weights=False), 2.0) == 2.0
    assert fp8_weight_bytes(behaviour_for("megatron"), 2.0) == 0.0
    assert fp8_weight_bytes(behaviour_for("nemo"), 2.0) == 0.0
    assert fp8_weight_bytes(behaviour_for("fsdp"), 2.0) == 1.0


def test_selective_recompute_checkpoints_the_flash_core():
    """Megatron-Core selective recompute (core_attn) with a flash kernel: the checkpoint keeps
    q, k, v; out and the fp32 log-sum-exp are remade in backward, and the output projection
    keeps out itself. Llama-3-8B, 1 x 1024 tokens, bf16: q 1024 x 4096, k and v 1024 x 1024
    each, out 1024 x 4096 (2 B); lse 32 heads x 1024 rows x 4 B."""
    m = get_model("llama-3-8b")
    none = build_training(m, 1, 1024, Impl(fused=True, dropout=False))
    sel = build_training(m, 1, 1024, Impl(fused=True, dropout=False, recompute="selective"))
    q, kv, out, lse = 1024 * 4096 * 2, 2 * 1024 * 1024 * 2, 1024 * 4096 * 2, 32 * 1024 * 4
    assert _saved(none, "layers.attn.core") == q + kv + out + lse
    assert _saved(none, "layers.attn.out") == 0
    assert _saved(sel, "layers.attn.core") == q + kv
    assert _saved(sel, "layers.attn.out") == out


def test_megatron_gradient_buckets_are_views_of_its_buffer():
    """torch DDP (hf profile) reduces through two 25 MiB buckets of its own: 2 x 25 x 2**20 B;
    Megatron-Core's buckets are views of the contiguous gradient buffer: 0 B on top."""
    from gpuplan.estimate.memory import train_memory
    from gpuplan.specs import get_device
    from gpuplan.specs.framework import get_framework

    m, d = get_model("llama-3-8b"), get_device("h100")
    job = _fp8_job(precision="bf16-mixed", cp=1, seq_len=2048)
    hf = train_memory(m, d, get_framework("hf").apply(job))
    meg = train_memory(m, d, get_framework("megatron").apply(job))
    assert hf.other_items["gradient_buckets"] == 2 * 25 * 2**20
    assert meg.other_items.get("gradient_buckets", 0) == 0


def test_nemo_profile_extends_megatron_except_its_gradient_dtype():
    import dataclasses

    from gpuplan.specs.framework import get_framework

    mega, nemo = get_framework("megatron"), get_framework("nemo")
    own = {"name", "description", "source", "date", "allocator", "notes", "grad_dtype"}
    for f in dataclasses.fields(mega):
        if f.name not in own:
            assert getattr(nemo, f.name) == getattr(mega, f.name), f.name
    assert (mega.grad_dtype, nemo.grad_dtype) == ("fp32", "auto")  # main_grad vs bf16 buffers
