"""Measuring the machine (issue 6): the timing core, byte/FLOP/bus arithmetic, ceilings against
direct loops side by side, gloo collectives, dead ranks, fusion and attention (profiles and
the CLI: test_measure_profile.py)."""

from __future__ import annotations

import statistics
import time

import pytest

from gpuplan.errors import GpuplanError
from gpuplan.estimate.comm import bus_factor
from gpuplan.estimate.efficiency import efficiency_from_profile
from gpuplan.measure import collectives, compute, memory
from gpuplan.measure.timing import HostClock, Stats, measure, sync_vs_unsync, unsynchronised_time

torch = pytest.importorskip("torch")


# ---- the timing core ----------------------------------------------------------------------


class FakeGpu:
    """A host clock and an asynchronous device queue: a launch costs the host `launch_s` and
    enqueues `work_s` of device time; sync waits for the queue to drain."""

    def __init__(self, work_s: float, launch_s: float, eager: bool = False) -> None:
        self.t, self.queue_end, self.work_s, self.launch_s = 0.0, 0.0, work_s, launch_s
        self.eager = eager

    def now(self) -> float:
        return self.t

    def sync(self) -> None:
        self.t = max(self.t, self.queue_end)

    def launch(self) -> None:
        self.t += self.launch_s
        self.queue_end = max(self.queue_end, self.t) + self.work_s
        if self.eager:  # a CPU: the work happens before the call returns
            self.sync()


def test_stats_median_spread_best_and_n():
    s = Stats((4.0, 1.0, 3.0, 2.0, 100.0), inner=10, warmup_s=0.5)
    assert s.n == 5 and s.median_s == 3.0 and s.best_s == 1.0 and s.worst_s == 100.0
    assert s.quartiles() == (2.0, 4.0)
    assert s.rate(6.0) == 2.0 and s.rate(6.0, "best") == 6.0
    j = s.to_json(work=6.0)
    assert j["n"] == 5 and j["inner"] == 10 and j["median_rate"] == 2.0 and j["best_rate"] == 6.0


def test_measure_times_device_work_and_blocks_tiny_ops():
    gpu = FakeGpu(work_s=1e-3, launch_s=1e-5)
    clock = HostClock(gpu.sync, gpu.now)
    setups = []
    st = measure(gpu.launch, clock, setup=lambda: setups.append(1), warmup_s=0.01,
                 min_samples=5, max_samples=8, budget_s=0.0, min_block_s=5e-3)
    assert st.inner == 5  # ceil(5 ms / 1 ms per call): blocks, not one sync per call
    assert st.n == 5 == len(setups)  # setup runs once per sample, outside the timed block
    for s in st.samples_s:  # n calls take launch + n x work: per call work + launch / n
        assert s == pytest.approx(1e-3 + 1e-5 / 5)


def test_measure_warmup_calls_is_deterministic():
    gpu = FakeGpu(work_s=1e-3, launch_s=1e-5)
    calls = []
    st = measure(lambda: calls.append(gpu.launch()), HostClock(gpu.sync, gpu.now),
                 warmup_calls=3, inner=1, min_samples=7, max_samples=7, budget_s=0.0)
    assert len(calls) == 3 + 7 and st.n == 7


def test_unsynchronised_host_timer_sees_only_the_launch():
    gpu = FakeGpu(work_s=2e-3, launch_s=1e-5)
    clock = HostClock(gpu.sync, gpu.now)
    assert unsynchronised_time(gpu.launch, clock, inner=10) == pytest.approx(1e-5)
    d = sync_vs_unsync(gpu.launch, clock, inner=10)
    assert d["synced_s"] == pytest.approx(2e-3 + 1e-6)  # 10 x work + one launch, per call
    assert d["unsynced_s"] == pytest.approx(1e-5)
    assert d["ratio"] == pytest.approx(d["synced_s"] / 1e-5)


def test_on_the_cpu_synced_equals_unsynced():
    cpu = FakeGpu(work_s=2e-3, launch_s=1e-5, eager=True)
    d = sync_vs_unsync(cpu.launch, HostClock(None, cpu.now), inner=10)
    assert d["synced_s"] == pytest.approx(d["unsynced_s"]) == pytest.approx(2.01e-3)


# ---- arithmetic of every path, GPU ones included --------------------------------------------


def test_flop_and_byte_counts():
    assert compute.matmul_flops(2, 3, 4) == 48
    assert compute.matmul_flops(8192, 8192, 8192) == 2 * 8192**3
    assert memory.copy_bytes(100) == 200 and memory.triad_bytes(100) == 300
    for dev in ("cpu", "cuda"):
        for quick in (True, False):
            sh = compute.shapes(dev, quick)
            assert (64, 64, 64) in sh and any(m == 16 for m, _, _ in sh)  # skinny included
            assert memory.stream_buffer_bytes(32 * 2**20, dev, quick) >= 4 * 32 * 2**20
    assert compute.shapes("cuda", False)[-3] == (16384, 16384, 16384)
    sizes = memory.sweep_sizes(False, "cpu")
    assert sizes[0] == 16 * 2**10 and sizes[-1] == 2**30


def test_sustained_is_the_median_at_the_best_size():
    r = compute.DtypeResult("bf16", [
        compute.MatmulPoint(64, 64, 64, Stats((1e-5, 2e-5, 3e-5))),
        compute.MatmulPoint(1024, 1024, 1024, Stats((1e-3, 2e-3, 9e-3))),
    ])
    j = r.to_json()
    assert j["best_size"] == {"m": 1024, "n": 1024, "k": 1024}
    assert j["sustained_flops_per_s"] == pytest.approx(2 * 1024**3 / 2e-3)
    assert j["best_flops_per_s"] == pytest.approx(2 * 1024**3 / 1e-3)
    assert compute.flops_by_dtype({"bf16": r}) == {"bf16": j["sustained_flops_per_s"]}
    assert compute.DtypeResult("fp8", skipped="no fp8").to_json() == {"skipped": "no fp8"}


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("op", collectives.OPS)
def test_collective_rows_follow_nccl_tests(op, n):
    row = collectives.row(op, 2**20, n, 1e-3, 2e-5)
    assert row["algbw_bytes_per_s"] == 2**20 / 1e-3
    assert row["busbw_bytes_per_s"] == row["algbw_bytes_per_s"] * bus_factor(op, n)
    expected = {"all_reduce": 2 * (n - 1) / n, "broadcast": 1.0}.get(op, (n - 1) / n)
    assert bus_factor(op, n) == pytest.approx(expected)
    assert row["rank_skew_s"] == 2e-5


# ---- side by side with direct loops (issue 6 "Done when") -----------------------------------


def _direct_rate(fn, work: float, reps: int) -> float:
    """The median of `reps` individually timed calls: the statistic ours reports, so the two
    sides compare like with like (a max of loop rates rides every upward blip of a shared box)."""
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return work / statistics.median(times)


def _best_ratio(ours, direct, tries: int = 4) -> tuple[float, list[tuple[float, float]]]:
    """Interleaved A/B attempts (a shared CI machine is noisy): the best ratio of 4."""
    seen = []
    for _ in range(tries):
        d1 = direct()
        o = ours()
        d2 = direct()
        seen.append((o, max(d1, d2)))
        if o >= 0.9 * max(d1, d2):
            break
    return max(o / d for o, d in seen), seen


@pytest.mark.slow
def test_matmul_ceiling_reaches_90pct_of_a_direct_torch_mm_loop():
    clock = HostClock()
    sizes = [(s, s, s) for s in (256, 512, 1024)]
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)

    def ours() -> float:
        r = compute.measure_dtype("fp32", "cpu", clock, sizes, 32 * 2**20, 1.0, 0.25)
        return compute.flops_by_dtype({"fp32": r})["fp32"]

    ratio, seen = _best_ratio(ours, lambda: _direct_rate(lambda: torch.mm(a, b),
                                                         2 * 1024**3, 10))
    assert ratio >= 0.9, seen


@pytest.mark.slow
def test_copy_bandwidth_reaches_90pct_of_a_direct_large_copy():
    n = 128 * 2**20 // 4
    src, dst = torch.randn(n), torch.empty(n)

    def ours() -> float:
        return memory.stream("cpu", HostClock(), 128 * 2**20, 0.3)["copy"]["bw_bytes_per_s"]

    ratio, seen = _best_ratio(ours, lambda: _direct_rate(lambda: dst.copy_(src), 2 * n * 4, 10))
    assert ratio >= 0.9, seen


# ---- collectives on gloo ----------------------------------------------------------------------


@pytest.mark.slow
def test_gloo_collectives_two_processes_correct_and_consistent():
    res = collectives.run_local(2, "cpu", sizes=[4096, 2**18], quick=True, timeout_s=90)
    assert set(res) == set(collectives.OPS)
    for op, rows in res.items():
        assert [r["bytes"] for r in rows] == [4096, 2**18]
        for r in rows:  # results were checked inside (a wrong sum raises)
            assert r["time_s"] > 0 and r["n"] == 10 and r["rank_skew_s"] >= 0
            assert r["algbw_bytes_per_s"] == r["bytes"] / r["time_s"]
            assert r["busbw_bytes_per_s"] == r["algbw_bytes_per_s"] * bus_factor(op, 2)


@pytest.mark.slow
@pytest.mark.parametrize("fault", [("raise", 1), ("hang", 1)])
def test_a_dead_or_hung_rank_ends_the_run_quickly(fault):
    # the deadline covers spawning both ranks and importing torch in each (several seconds on
    # a busy 2-core machine), so it is generous; a failing rank must end the run well before it
    timeout_s = 30
    t0 = time.perf_counter()
    with pytest.raises(GpuplanError) as e:
        collectives.run_local(2, "cpu", ops=("all_reduce",), sizes=[4096], timeout_s=timeout_s,
                              _fault=fault)
    elapsed = time.perf_counter() - t0
    msg = str(e.value)
    assert "\n" not in msg
    if fault[0] == "raise":
        assert "rank 1 failed" in msg and elapsed < timeout_s
    else:
        assert f"{timeout_s} s" in msg and elapsed < timeout_s + 20


# ---- fusion / attention on the CPU ------------------------------------------------------------


def test_cpu_peak_bytes_sees_the_intermediates():
    from gpuplan.measure.fusion import peak_bytes

    x = torch.randn(2**20)
    one = peak_bytes(lambda: x + 1, "cpu")
    two = peak_bytes(lambda: (x + 1) * 2, "cpu")  # x + 1 lives while the product is written
    assert one == pytest.approx(4 * 2**20, rel=0.05)
    assert two == pytest.approx(8 * 2**20, rel=0.05)


def test_attention_naive_vs_sdpa_measured_and_predicted():
    from gpuplan.measure.fusion import measure_attention
    from gpuplan.measure.profile import measured_device

    prof = {"device": "cpu", "date": "2026-11-30", "identity": {"kind": "cpu"},
            "matmul_flops_per_s": {"fp32": 1e11}, "memory_bw_bytes_per_s": 2e10}
    spec = measured_device(prof)
    r = measure_attention("cpu", HostClock(), spec, efficiency_from_profile(prof, spec), True)
    assert r["results_agree"]
    n, f = r["naive"], r["sdpa"]
    assert n["peak_bytes"] >= r["scores_bytes"] > f["peak_bytes"]  # scores live in memory
    assert n["predicted_bytes"] > f["predicted_bytes"] and n["time_s"] > 0 < f["time_s"]
