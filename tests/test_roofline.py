"""Roofline behaviour the field relies on (issue 3 "Done when")."""

from __future__ import annotations

import pytest

from gpuplan.estimate.efficiency import default_efficiency, ideal_efficiency
from gpuplan.estimate.roofline import op_time, roofline
from gpuplan.ops.decode import build_decode
from gpuplan.ops.op import Op
from gpuplan.ops.passes import fuse_elementwise
from gpuplan.ops.transformer import Impl, build_forward, build_training
from gpuplan.specs import get_device, get_model

A100 = get_device("a100-sxm-80gb")


def test_decode_batch1_7b_is_memory_bound_and_bounded_by_weight_traffic():
    m = get_model("llama-2-7b")
    r = roofline(build_decode(m, 1, 1024, Impl(fused=True)), A100)
    weight_matmuls = [x for x in r.rows if x.op.kind == "matmul"]
    assert weight_matmuls and all(x.bound == "memory" for x in weight_matmuls)
    weight_bytes = 2 * (m.params() - m.embedding_params())  # bf16; the embedding is a gather
    assert r.total_time_s >= weight_bytes / A100.mem_bw_bytes_per_s
    # and not wildly above it: the step is weight-streaming plus KV reads and overheads
    assert r.total_time_s < 2.0 * weight_bytes / A100.mem_bw_bytes_per_s


def test_prefill_batch8_2048_big_matmuls_are_compute_bound():
    m = get_model("llama-2-7b")
    r = roofline(build_forward(m, 8, 2048, phase="prefill"), A100)
    big = [x for x in r.rows if x.op.kind == "matmul" and x.op.flops > 1e11]
    assert big and all(x.bound == "compute" for x in big)


@pytest.mark.parametrize("rows", [1, 64, 4096, 65536, 2**20])
@pytest.mark.parametrize("device", ["a100", "h100", "l4", "mi300x", "tpu-v5e", "xeon-8480+"])
def test_layernorm_is_memory_bound_at_every_size(rows, device):
    d = get_device(device)
    dim = 4096
    ln = Op("ln", "norm", flops=5 * rows * dim, bytes_read=rows * dim * 2 + dim * 4,
            bytes_written=rows * dim * 2, dtype="bf16", phase="forward")
    assert op_time(ln, d, ideal_efficiency()).bound == "memory"
    assert op_time(ln, d, default_efficiency(d)).bound == "memory"


def test_matmul_roofline_time_exact_on_ideal_device():
    # [8192, 8192] @ [8192, 8192] bf16: 2·8192³ FLOPs = 1.0995e12; 3·8192²·2 bytes = 403 MB
    n = 8192
    op = Op("mm", "matmul", 2.0 * n**3, 2 * n * n * 2, n * n * 2, "bf16", "forward")
    h100 = get_device("h100")
    t = op_time(op, h100, ideal_efficiency())
    assert t.bound == "compute"
    assert t.time_s == pytest.approx(2 * n**3 / 989.4e12, rel=1e-12)
    assert op.intensity == pytest.approx(2 * n**3 / (3 * n * n * 2))
    # the ridge point: peak / bandwidth
    assert h100.ridge_flops_per_byte("bf16") == pytest.approx(989.4e12 / 3.35e12)


def test_efficiency_is_stated_and_below_one():
    eff = default_efficiency(get_device("h100"))
    assert 0.5 < eff.matmul_ceiling < 1 and "mamf" in eff.source
    assert eff.compute(1e8, "bf16") < eff.compute(1e12, "bf16") <= eff.matmul_ceiling
    assert eff.memory(1e5) < eff.memory(1e9) <= eff.memory_ceiling


def test_fp8_falls_back_where_the_hardware_has_no_fp8():
    op = Op("mm", "matmul", 1e13, 1e8, 1e8, "fp8", "forward")
    a100, h100 = get_device("a100"), get_device("h100")
    # A100 has no fp8 path: fp8 matmuls run at the bf16 rate (no fake speed-up)
    assert op_time(op, a100, ideal_efficiency()).peak_flops_per_s == a100.peak("bf16")
    assert op_time(op, h100, ideal_efficiency()).peak_flops_per_s == h100.peak("fp8")


def test_fusion_saves_bytes_and_time_and_flash_beats_naive():
    m = get_model("gpt2")
    ops = build_training(m, 8, 1024, Impl(attention="naive"))
    fused, chains = fuse_elementwise(ops)
    assert fused.bytes() < ops.bytes() and chains
    assert fused.flops() == pytest.approx(ops.flops())  # fusion moves fewer bytes, same work
    assert roofline(fused, A100).total_time_s < roofline(ops, A100).total_time_s
    flash = build_training(m, 8, 1024, Impl(attention="flash"))
    assert roofline(flash, A100).total_time_s < roofline(ops, A100).total_time_s
    assert flash.saved_bytes() < ops.saved_bytes()


def test_time_by_phase_sums_to_total():
    r = roofline(build_training(get_model("llama-3-8b"), 1, 2048), get_device("h100"))
    assert sum(r.time_by("phase").values()) == pytest.approx(r.total_time_s)
    assert sum(r.time_by("component").values()) == pytest.approx(r.total_time_s)
    assert 0 <= r.memory_bound_share <= 1
