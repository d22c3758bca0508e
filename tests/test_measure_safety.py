"""Safe measurement (issue 15): memory budgets, bounded process counts, deadlines that clean up
their child processes."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from gpuplan.cli.main import main
from gpuplan.errors import GpuplanError
from gpuplan.measure import safety


def test_memory_budget_is_at_most_half_of_what_is_free() -> None:
    free = safety.free_memory_bytes("cpu")
    assert 0 < safety.memory_budget("cpu") <= free // 2
    with pytest.raises(GpuplanError, match="--memory-fraction"):
        safety.memory_budget("cpu", 0.95)


def test_fit_buffer_shrinks_then_refuses_politely() -> None:
    assert safety.fit_buffer(100, 3, 3000, 10, "x") == 100
    assert safety.fit_buffer(10_000, 3, 3000, 10, "x") == 1000  # 3 x 1000 <= budget
    with pytest.raises(GpuplanError, match="memory budget") as e:
        safety.fit_buffer(10**9, 3, 2**20, 2**20, "bench memory")
    assert "\n" not in str(e.value)


def test_nproc_bounded_by_cores_unless_forced() -> None:
    cores = safety.cpu_count()
    safety.check_nproc(cores, "cpu", 0, force=False)
    with pytest.raises(GpuplanError, match="--force"):
        safety.check_nproc(cores + 1, "cpu", 0, force=False)
    safety.check_nproc(cores + 1, "cpu", 0, force=True)
    with pytest.raises(GpuplanError, match="at most"):
        safety.check_nproc(safety.MAX_FORCED_NPROC + 1, "cpu", 0, force=True)
    with pytest.raises(GpuplanError, match="GPUs"):
        safety.check_nproc(3, "cuda", 2, force=True)


def test_bench_refuses_when_memory_is_too_small(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setattr(safety, "free_memory_bytes", lambda device: 2**20)
    code = main(["bench", "--only", "memory", "--device", "cpu", "--no-save", "--no-progress",
                 "--quick"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "memory budget" in err


def test_deadline_raises_and_is_disarmed() -> None:
    with pytest.raises(safety.BenchTimeout, match="--timeout"), safety.deadline(0.2):
        time.sleep(5)
    with safety.deadline(5):
        pass
    time.sleep(0.1)  # the timer is off: no stray alarm


def test_deadline_stops_a_hung_distributed_run_and_its_children() -> None:
    pytest.importorskip("torch")
    from gpuplan.measure import collectives

    t0 = time.monotonic()
    with pytest.raises(safety.BenchTimeout), safety.deadline(8):
        collectives.run_local(2, "cpu", ops=("all_reduce",), sizes=[4096], timeout_s=600,
                              _fault=("hang", 1))
    assert time.monotonic() - t0 < 60
    assert multiprocessing.active_children() == []
