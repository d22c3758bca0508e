"""CPU fused attention: modelled at the matmul rate (its QKᵀ/PV blocks are BLAS GEMMs with the
scores in cache), or at the rate `gpuplan bench` measured; the roofline then puts SDPA ahead
of naive attention on a CPU, as measured (benchmarks/bench_attention_cpu.py)."""

from __future__ import annotations

from gpuplan.estimate.efficiency import (
    CPU_ATTENTION_CEILING,
    default_efficiency,
    efficiency_from_profile,
)
from gpuplan.estimate.efficiency_attention import attention_ceiling
from gpuplan.estimate.roofline import op_time
from gpuplan.ops.op import Op
from gpuplan.specs.catalog import get_device


def _attention_op(flops: float) -> Op:
    return Op(name="sdpa", kind="attention", flops=flops, bytes_read=1e6, bytes_written=1e6,
              dtype="fp32", phase="forward")


def test_cpu_attention_runs_at_the_matmul_rate_gpu_keeps_its_prior():
    cpu, gpu = get_device("EPYC-9654"), get_device("h100")
    assert default_efficiency(cpu).attention_ceiling == CPU_ATTENTION_CEILING == 1.0
    # a GPU keeps its measured FlashAttention ceiling from the device file
    assert default_efficiency(gpu).attention_ceiling == attention_ceiling(gpu, "fa2")[0] < 1.0
    assert "BLAS" in default_efficiency(cpu).source


def test_measured_attention_rate_is_used():
    cpu = get_device("EPYC-9654")
    prof = {"matmul_flops_per_s": {"fp32": 100e9}, "memory_bw_bytes_per_s": 10e9,
            "attention_flops_per_s": 40e9}
    eff = efficiency_from_profile(prof, cpu)
    t = op_time(_attention_op(4e9), cpu, eff)
    # 4 GFLOP at the measured 40 GFLOP/s: 0.1 s (memory 2 MB at 10 GB/s = 0.2 ms)
    assert abs(t.compute_s - 0.1) < 1e-12
    no_attn = efficiency_from_profile({k: v for k, v in prof.items()
                                       if k != "attention_flops_per_s"}, cpu)
    # without a measurement: the matmul rate (mechanism), 4 GFLOP / 100 GFLOP/s
    assert abs(op_time(_attention_op(4e9), cpu, no_attn).compute_s - 0.04) < 1e-12


def test_roofline_puts_sdpa_ahead_of_naive_on_a_cpu():
    torch = __import__("pytest").importorskip("torch")
    from gpuplan.measure.fusion import attention_shape, predict

    cpu = get_device("EPYC-9654")
    eff = efficiency_from_profile({"matmul_flops_per_s": {"fp32": 200e9},
                                   "memory_bw_bytes_per_s": 20e9}, cpu)
    b, h, s, d = attention_shape("cpu", True)
    q, k, v = (torch.randn(b, h, s, d) for _ in range(3))

    def naive(q, k, v):  # type: ignore[no-untyped-def]
        return torch.softmax(q @ k.transpose(-2, -1) * d ** -0.5, dim=-1) @ v

    def sdpa(q, k, v):  # type: ignore[no-untyped-def]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)

    t_naive = predict(naive, (q, k, v), "cpu", cpu, eff)["predicted_time_s"]
    t_sdpa = predict(sdpa, (q, k, v), "cpu", cpu, eff)["predicted_time_s"]
    assert t_sdpa < t_naive  # measured on the development CPU: 1.06-3.44x faster
