"""Step-time mechanisms of issue 10, each checked against its derivation: the GEMM output store,
compute slowdown beside overlapped collectives, Megatron-Core's TP overlap with SP, unfused
optimizers, FP8 casts, and the `auto` stack."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuplan.estimate.efficiency import (
    OVERLAP_COMPUTE_SLOWDOWN,
    framework_efficiency,
    training_efficiency,
)
from gpuplan.estimate.roofline import op_time
from gpuplan.estimate.search import search
from gpuplan.estimate.step import (
    OPTIMIZER_BYTES_PER_PARAM,
    UNFUSED_OPTIMIZER_BYTES_PER_PARAM,
    contention_weight,
)
from gpuplan.estimate.training import step_time
from gpuplan.ops.impl import train_impl
from gpuplan.ops.op import Op
from gpuplan.ops.transformer import build_training
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.cluster import default_cluster
from gpuplan.specs.framework import get_framework
from gpuplan.specs.workload import TrainConfig


def _gemm(m: int, k: int, n: int) -> Op:
    return Op(name="g", kind="matmul", flops=2 * m * k * n, bytes_read=2 * (m * k + k * n),
              bytes_written=2 * m * n, dtype="bf16", phase="forward",
              shape=f"{m}x{k} @ {k}x{n}")


@pytest.mark.parametrize("device", ["h100", "a100"])
def test_gemm_epilogue_adds_the_output_store(device):
    d = get_device(device)
    eff = training_efficiency(d)
    op = _gemm(16384, 1536, 4608)
    with_store = op_time(op, d, eff).compute_s
    without = op_time(op, d, replace(eff, gemm_epilogue=False)).compute_s
    out_bytes = 16384 * 4608 * 2
    assert with_store - without == pytest.approx(
        out_bytes / (d.mem_bw_bytes_per_s * eff.memory(out_bytes)), rel=1e-12)


def test_gemm_epilogue_costs_more_on_h100_and_at_small_k():
    def share(device: str, k: int) -> float:
        d = get_device(device)
        eff = training_efficiency(d)
        op = _gemm(16384, k, 4608)
        return op_time(op, d, eff).compute_s / op_time(
            op, d, replace(eff, gemm_epilogue=False)).compute_s - 1

    # (peak x ceiling / bandwidth) / K: H100's math/bandwidth ratio is ~1.8x A100's
    assert share("h100", 1536) > 1.5 * share("a100", 1536)
    assert share("h100", 1536) > 4 * share("h100", 8192)


def _step(model: str, gpus: int, cfg: TrainConfig, framework: str, device: str = "h100",
          **eff_update: object):
    m, d = get_model(model), get_device(device)
    fw = get_framework(framework)
    eff = replace(framework_efficiency(d, fw), **eff_update)
    return step_time(m, default_cluster(d, gpus), fw.apply(cfg, named=False), eff)


FSDP_JOB = TrainConfig(micro_batch=2, seq_len=2048, dp=8, fsdp="full", global_batch=32,
                       fused=True, dropout=False)


def test_overlapped_collectives_slow_compute_by_the_measured_share():
    r = _step("llama-3-8b", 8, FSDP_JOB, "fsdp")
    free = _step("llama-3-8b", 8, FSDP_JOB, "fsdp", overlap_slowdown=0.0)
    hidden = r.comm_time_s - r.comm_exposed_s
    assert hidden > 0
    # extra = 18.9 % (Lee et al. 2025) of the hidden communication, nothing else changes
    assert r.breakdown["overlap_slowdown"] == pytest.approx(OVERLAP_COMPUTE_SLOWDOWN * hidden)
    assert r.step_time_s - free.step_time_s == pytest.approx(r.breakdown["overlap_slowdown"])
    assert free.breakdown["overlap_slowdown"] == 0


def test_overlap_slowdown_scales_with_the_link_rate_across_nodes():
    c = default_cluster(get_device("h100"), 16)
    ratio = c.scale_out.bw_bytes_per_s / c.scale_up.bw_bytes_per_s  # 50 / 450 GB/s
    up, out = c.scale_up.achievable_bytes_per_s, c.scale_out.achievable_bytes_per_s
    assert contention_weight(8, 8, c) == 1.0
    assert contention_weight(16, 1, c) == pytest.approx(ratio)  # one GPU per node: all network
    # 2 nodes x 8 GPUs, hierarchical: 7/8 of the bytes on NVLink (weight 1), then 1/2 of 1/8
    # on the network (weight = the ratio); time-weighted
    t_up, t_out = 7 / 8 / up, 1 / 2 / 8 / out
    want = (t_up + t_out * ratio) / (t_up + t_out)
    assert contention_weight(16, 8, c) == pytest.approx(want)
    assert ratio < want < 1
    two = _step("llama-3-8b", 16, replace(FSDP_JOB, dp=16, global_batch=64), "fsdp")
    hidden = two.comm_time_s - two.comm_exposed_s  # hidden FSDP traffic across 2 nodes
    assert two.breakdown["overlap_slowdown"] == pytest.approx(
        OVERLAP_COMPUTE_SLOWDOWN * want * hidden)


def test_overlap_slowdown_never_negative_with_few_micro_batches():
    # 8 stages, 1 micro-batch: pipeline fill/drain exposes more P2P time than 1F1B moves
    m, d = get_model("gpt3-175b"), get_device("h100")
    cfg = TrainConfig(micro_batch=1, seq_len=2048, pp=8, fused=True, dropout=False)
    r = step_time(m, default_cluster(d, 8), cfg, training_efficiency(d))
    assert r.breakdown["overlap_slowdown"] >= 0


@pytest.mark.parametrize("sp", [True, False])
def test_megatron_tp_overlap_hides_all_but_one_chunk_with_sp(sp):
    cfg = TrainConfig(micro_batch=1, seq_len=4096, dp=1, tp=8, sp=sp, fused=True,
                      global_batch=4, dropout=False, zero=1)
    mega = _step("llama-3-8b", 8, cfg, "megatron")
    exposed = _step("llama-3-8b", 8, cfg, "megatron", tp_comm_overlap_sp=0.0)
    want = (1 - 7 / 8) if sp else 1.0  # TE userbuffers: tp chunks, the first one exposed
    assert mega.breakdown["tp_comm"] == pytest.approx(want * exposed.breakdown["tp_comm"])
    assert mega.comm_time_s == pytest.approx(exposed.comm_time_s)
    assert mega.breakdown["compute"] == pytest.approx(exposed.breakdown["compute"])


@pytest.mark.parametrize(("recompute", "exposed"), [("none", 2 / 4), ("full", 4 / 6)])
def test_megatron_hides_backward_tp_collectives_behind_wgrad(recompute, exposed):
    """Per layer 4 TP collectives (6 with full recompute); the 2 backward ones run beside the
    weight-gradient GEMMs (Megatron async TP all-reduce)."""
    cfg = TrainConfig(micro_batch=1, seq_len=4096, dp=1, tp=8, fused=True, global_batch=4,
                      dropout=False, zero=1, recompute=recompute)
    mega = _step("llama-3-8b", 8, cfg, "megatron")
    serial = _step("llama-3-8b", 8, cfg, "megatron", tp_backward_overlap=False)
    assert mega.breakdown["tp_comm"] == pytest.approx(exposed * serial.breakdown["tp_comm"])
    assert mega.comm_time_s == pytest.approx(serial.comm_time_s)


@pytest.mark.parametrize(("recompute", "calls"), [("none", 4), ("full", 6)])
def test_sequence_parallel_backward_gathers_output_gradients_exposed(recompute, calls):
    """With SP each block's backward first all-gathers the output gradient (half an
    all-reduce, synchronous), then re-gathers the input and reduce-scatters the input gradient
    beside the GEMMs: per layer 2 exposed forward volumes (4 with full recompute), 1 exposed and
    2 hidden backward ones; without the async backward all 4 (6) volumes DTensor-style."""
    cfg = TrainConfig(micro_batch=1, seq_len=4096, dp=1, tp=8, sp=True, fused=True,
                      global_batch=4, dropout=False, zero=1, recompute=recompute)
    mega = _step("llama-3-8b", 8, cfg, "megatron-lm")
    serial = _step("llama-3-8b", 8, cfg, "megatron-lm", tp_backward_overlap=False)
    per_call = serial.breakdown["tp_comm"] / calls
    assert mega.breakdown["tp_comm"] == pytest.approx((calls - 1) * per_call)
    assert mega.comm_time_s == pytest.approx((calls + 1) * per_call)
    assert serial.comm_time_s == pytest.approx(calls * per_call)
    assert "output-gradient all-gathers of sequence parallelism exposed" in \
        mega.assumptions["overlap"]
    assert "output-gradient" not in serial.assumptions["overlap"]


def test_search_times_sequence_parallel_layouts_as_step_time_does():
    """The vectorised search sums the same exposed backward gathers (megatron-lm keeps the
    async backward TP overlap): its fast estimate of every ranked SP layout equals step_time."""
    m, d = get_model("llama-3-8b"), get_device("h100")
    eff = framework_efficiency(d, get_framework("megatron-lm"))
    base = TrainConfig(micro_batch=1, seq_len=4096, global_batch=64, fused=True,
                       dropout=False, sp=True)
    r = search(m, default_cluster(d, 16), base, top=40, efficiency=eff)
    sp_rows = [(cfg, step, fast) for (cfg, step), fast in zip(r.ranked, r.fast_estimates,
                                                             strict=True)
               if cfg.sp and cfg.tp > 1]
    assert sp_rows
    for _cfg, step, fast in sp_rows:
        assert fast[0] == pytest.approx(step.step_time_s, rel=1e-12)


def test_unfused_optimizer_moves_more_bytes():
    foundry = _step("llama-3-8b", 8, FSDP_JOB, "llm-foundry")
    fused = _step("llama-3-8b", 8, FSDP_JOB, "llm-foundry", fused_optimizer=True)
    ratio = UNFUSED_OPTIMIZER_BYTES_PER_PARAM["adamw"] / OPTIMIZER_BYTES_PER_PARAM["adamw"]
    # both passes are large enough to sit at the same point of the bandwidth curve
    assert foundry.breakdown["optimizer"] / fused.breakdown["optimizer"] == pytest.approx(
        ratio, rel=0.05)
    assert get_framework("megatron").fused_optimizer and not get_framework(
        "llm-foundry").fused_optimizer


def test_fp8_training_pays_casts_and_keeps_attention_in_16_bits():
    m = get_model("llama-3-8b")
    cfg = TrainConfig(micro_batch=1, seq_len=4096, precision="fp8-mixed", fused=True,
                      dropout=False)
    ops = build_training(m, 1, 4096, train_impl(cfg, "gpu"))
    casts = [o for o in ops if "fp8_cast" in o.name]
    gemms = [o for o in ops if o.kind == "matmul" and o.phase == "forward"]
    assert {o.dtype for o in gemms} == {"fp8"}
    assert {o.dtype for o in ops if o.kind == "attention"} == {"bf16"}
    fwd = [o for o in casts if o.phase == "forward"]
    assert len(fwd) == len(gemms)
    qkv = next(o for o in fwd if "qkv" in o.name)
    elems = 4096 * 4096 + 4096 * 6144  # input 4096 x 4096 and weight 4096 x 6144
    assert (qkv.bytes_read, qkv.bytes_written) == (2 * elems, 2 * elems)  # 16 bits in, 8 + 8 out
    bf16 = _step("llama-3-8b", 8, replace(FSDP_JOB, precision="bf16-mixed"), "megatron")
    fp8 = _step("llama-3-8b", 8, replace(FSDP_JOB, precision="fp8-mixed"), "megatron")
    no_casts = bf16.step_time_s * 0.5
    assert no_casts < fp8.step_time_s < bf16.step_time_s


def _fp8_casts(framework: str) -> dict[str, Op]:
    from gpuplan.specs.memory_behaviour import behaviour_for

    cfg = TrainConfig(micro_batch=1, seq_len=4096, precision="fp8-mixed", fused=True,
                      dropout=False, memory_behaviour=behaviour_for(framework))
    ops = build_training(get_model("llama-3-8b"), 1, 4096, train_impl(cfg, "gpu"))
    return {o.name: o for o in ops if "fp8_cast" in o.name and o.phase == "forward"}


def test_transformer_engine_caches_fp8_weights_and_quantizes_inside_the_norm():
    """Megatron-Core passes is_first_microbatch to TE's linears, so the FP8 weight is made once
    per step, not per micro-batch; its QKV and fc1 are LayerNormLinear, whose norm writes the
    FP8 input; its output layer is not a TE module and stays bf16. Llama-3-8B, 4096 tokens:
    only the out and down projections cast, their inputs only (4096 x 4096 and 4096 x 14336);
    without the cache (torchao) every linear casts input + weight."""
    mega, titan = _fp8_casts("megatron"), _fp8_casts("fsdp")
    assert sorted(n.split(".")[-2] for n in mega) == ["down", "out"]
    out = next(o for n, o in mega.items() if ".out." in n)
    down = next(o for n, o in mega.items() if ".down." in n)
    assert out.bytes_read == 2 * 4096 * 4096 and down.bytes_read == 2 * 4096 * 14336
    qkv = next(o for n, o in titan.items() if "qkv" in n)
    assert qkv.bytes_read == 2 * (4096 * 4096 + 4096 * 6144)
    assert len(titan) == 4 + 1  # qkv, out, gate_up, down per layer and the LM head
    from gpuplan.specs.memory_behaviour import behaviour_for

    cfg = TrainConfig(micro_batch=1, seq_len=4096, precision="fp8-mixed", fused=True,
                      dropout=False, memory_behaviour=behaviour_for("megatron"))
    ops = build_training(get_model("llama-3-8b"), 1, 4096, train_impl(cfg, "gpu"))
    head = [o.dtype for o in ops if o.name.startswith("lm_head") and o.kind == "matmul"]
    assert head == ["bf16"] * 3


def _fp8_ops(recipe: str) -> list[Op]:
    cfg = TrainConfig(micro_batch=1, seq_len=4096, precision="fp8-mixed", fused=True,
                      dropout=False, fp8_recipe=recipe)  # type: ignore[arg-type]
    return build_training(get_model("llama-3-8b"), 1, 4096, train_impl(cfg, "gpu"))


def test_rowwise_fp8_casts_each_tensor_per_axis_and_rescales_backward_gemms():
    """torchao's row-wise recipe: input, weight and output gradient are each quantized once per
    GEMM orientation (a second pass reading 16 bits, writing 8), and the dgrad and wgrad outputs
    are rescaled after cuBLAS (read + write 16 bits). Llama-3-8B QKV at 4096 tokens: input
    4096 x 4096, weight 4096 x 6144, output gradient 4096 x 6144; GEMMs and FLOPs unchanged."""
    tw, rw = _fp8_ops("tensorwise"), _fp8_ops("rowwise")
    extra = {o.name: o for o in rw if ".fp8_cast_axis" in o.name or ".fp8_rescale" in o.name}
    assert not any(".fp8_cast_axis" in o.name or ".fp8_rescale" in o.name for o in tw)
    assert [o for o in rw if o.name not in extra] == list(tw)
    qkv = {n.split("qkv.")[1]: o for n, o in extra.items() if "attn.qkv." in n}
    x, w, dy = 4096 * 4096, 4096 * 6144, 4096 * 6144
    assert (qkv["fp8_cast_axis"].bytes_read, qkv["fp8_cast_axis"].bytes_written) == (2 * (x + w), 0)
    assert qkv["fp8_cast_axis.grad"].bytes_read == 2 * dy
    rescale = qkv["fp8_rescale.grad"]
    assert rescale.bytes_read == rescale.bytes_written == 2 * (x + w)  # dX and dW outputs
    slower = _step("llama-3-8b", 8, replace(FSDP_JOB, precision="fp8-mixed",
                                              fp8_recipe="rowwise"), "fsdp")
    faster = _step("llama-3-8b", 8, replace(FSDP_JOB, precision="fp8-mixed"), "fsdp")
    assert slower.step_time_s > faster.step_time_s


def test_fp8_recipe_needs_fp8_precision():
    from gpuplan.errors import InputError

    with pytest.raises(InputError, match="fp8_recipe"):
        TrainConfig(fp8_recipe="rowwise")
    assert TrainConfig(precision="fp8-mixed", fp8_recipe="rowwise").fp8_recipe == "rowwise"


def test_non_reentrant_checkpoint_skips_the_last_linear_as_pytorch_does():
    """Real PyTorch: torch.utils.checkpoint (non-reentrant, early stop on by default) does not
    rerun a block's last linear, whose forward only saves its input. The backward of a
    checkpointed pre-norm block differs with and without early stop by exactly that linear's
    forward FLOPs, and so does the model's recomputation (Impl.recompute_early_stop)."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    from torch.utils.flop_counter import FlopCounterMode

    t, d, ff = 64, 32, 96
    norm, up, down = torch.nn.LayerNorm(d), torch.nn.Linear(d, ff), torch.nn.Linear(ff, d)

    def block(x):  # type: ignore[no-untyped-def]
        return x + down(torch.nn.functional.gelu(up(norm(x))))

    flops = {}
    for early in (True, False):
        x = torch.randn(t, d, requires_grad=True)
        with set_checkpoint_early_stop(early):
            y = checkpoint(block, x, use_reentrant=False)
        with FlopCounterMode(display=False) as fc:
            y.sum().backward()
        flops[early] = fc.get_total_flops()
    assert flops[False] - flops[True] == 2 * t * ff * d

    m = get_model("gpt2")
    base = TrainConfig(micro_batch=2, seq_len=128, recompute="full", dropout=False, fused=True)
    rerun = {}
    for early in (True, False):
        impl = replace(train_impl(base, "gpu"), recompute_early_stop=early)
        ops = build_training(m, 2, 128, impl)
        rerun[early] = sum(o.total_flops for o in ops
                           if o.name.endswith(".recompute") and o.kind == "matmul")
    tokens = 2 * 128
    down_fwd = 2 * tokens * m.intermediate_size * m.hidden_size * m.num_layers
    assert rerun[False] - rerun[True] == pytest.approx(down_fwd, rel=1e-12)


def test_early_stop_is_what_pytorch_native_stacks_run():
    from gpuplan.specs.memory_behaviour import behaviour_for

    assert behaviour_for("fsdp").recompute_early_stop
    assert behaviour_for("llm-foundry").recompute_early_stop
    for name in ("megatron", "nemo", "deepspeed", "hf", "default"):
        assert not behaviour_for(name).recompute_early_stop
    m, d, fw = get_model("llama-3-8b"), get_device("h100"), get_framework("fsdp")
    cfg = fw.apply(replace(FSDP_JOB, recompute="full", micro_batch=8, global_batch=256),
                   named=True)
    assert cfg.behaviour.recompute_early_stop
    eff = framework_efficiency(d, fw)
    early = step_time(m, default_cluster(d, 8), cfg, eff)
    whole = step_time(m, default_cluster(d, 8), replace(
        cfg, memory_behaviour=replace(cfg.behaviour, recompute_early_stop=False)), eff)
    none = step_time(m, default_cluster(d, 8), replace(cfg, recompute="none"), eff)
    assert none.step_time_s < early.step_time_s < whole.step_time_s


def test_packed_documents_attend_within_each_document():
    """--document-len d: varlen FlashAttention attends over each packed document, so a causal
    query sees (d + 1)/2 keys on average instead of (s + 1)/2; the kernel skips the other
    tiles, the projections are unchanged. Llama-3-8B, s = 8192, d = 512."""
    m = get_model("llama-3-8b")
    one = TrainConfig(micro_batch=1, seq_len=8192, fused=True, dropout=False)
    packed = replace(one, document_len=512)

    def executed(cfg: TrainConfig, kind: str) -> float:
        ops = build_training(m, 1, 8192, train_impl(cfg, "gpu"))
        return sum(o.executed_flops * o.count for o in ops if o.kind == kind)

    assert executed(packed, "attention") / executed(one, "attention") == pytest.approx(
        513 / 8193, rel=1e-9)
    assert executed(packed, "matmul") == executed(one, "matmul")
    d = get_device("h100")
    fast = step_time(m, default_cluster(d, 1), packed, training_efficiency(d))
    slow = step_time(m, default_cluster(d, 1), one, training_efficiency(d))
    assert fast.step_time_s < slow.step_time_s


def test_document_len_beyond_the_sequence_is_refused():
    from gpuplan.errors import InputError

    with pytest.raises(InputError, match="document_len"):
        TrainConfig(seq_len=4096, document_len=8192)


def test_network_efficiency_follows_the_fabric_the_catalog_names():
    from gpuplan.estimate.comm import collective_time
    from gpuplan.specs.cluster import INFINIBAND_EFFICIENCY, NETWORK_EFFICIENCY

    assert get_device("h100").scale_out.fabric == "infiniband"  # read from the device file
    ib = default_cluster(get_device("h100"), 16)
    assert ib.scale_out.efficiency == INFINIBAND_EFFICIENCY == 0.94
    # "InfiniBand/RoCE (typical)" does not name one fabric: the lower EFA measurement
    assert default_cluster(get_device("mi300x"), 16).scale_out.efficiency == NETWORK_EFFICIENCY
    given = default_cluster(get_device("h100"), 16, scale_out_bytes_per_s=12.5e9)
    assert given.scale_out.efficiency == NETWORK_EFFICIENCY == 0.73
    assert given.scale_out.bw_bytes_per_s == 12.5e9 and "given" in given.scale_out.name
    assert "InfiniBand" in (ib.scale_out.efficiency_basis or "")  # printed with every estimate
    assert "EFA" in (given.scale_out.efficiency_basis or "")
    # one GPU per node: a flat ring over the network, (n - 1) steps + (n - 1)/n of S at 0.94 x 50
    t = collective_time("all_gather", 1e9, 16, ib, local=1).time_s
    assert t == pytest.approx(15 * ib.scale_out.latency_s + 15 / 16 * 1e9 / (0.94 * 50e9))
