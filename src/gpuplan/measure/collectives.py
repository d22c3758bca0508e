"""Collective bandwidth across processes with torch.distributed (gloo on CPUs, NCCL on GPUs).

Launched locally (`run_local`: N spawned processes on 127.0.0.1 and a free port) or under
torchrun (`run_torchrun`: RANK / WORLD_SIZE / MASTER_ADDR from the environment). Per op and
message size: a correctness check (rank-dependent inputs against the exact expected result),
warm-up, a barrier, then the same fixed number of timed iterations on every rank (inputs reset
outside the timed region). time_s = max over ranks of each rank's median; rank skew = max - min
of the rank medians. Sizes follow nccl-tests: S = the full buffer (all_gather: the gathered
output, reduce_scatter: the input before scattering); algbw = S / time, busbw = algbw x
bus_factor (gpuplan.estimate.comm). A rank that dies or hangs ends the run with one
GpuplanError within the timeout; the other ranks are terminated.
"""

from __future__ import annotations

import os
import queue
import socket
import time
from datetime import timedelta
from typing import Any

from gpuplan.errors import GpuplanError, InputError
from gpuplan.estimate.comm import bus_factor
from gpuplan.measure.timing import HostClock, measure

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast")


def message_sizes(quick: bool, device: str) -> list[int]:
    """Bytes per message: 4 KiB .. 16 MiB (quick) or 64 MiB (CPU) / 1 GiB (GPU), x4 steps."""
    hi = 16 * 2**20 if quick else (64 * 2**20 if device == "cpu" else 2**30)
    out, s = [], 4 * 2**10
    while s <= hi:
        out.append(s)
        s *= 4
    return out


def iterations(nbytes: int, quick: bool) -> tuple[int, int]:
    """(warm-up, timed) iterations: the same on every rank, fewer for big messages."""
    warm, timed = (2, 10) if quick else (5, 30)
    if nbytes >= 16 * 2**20:
        timed = max(3, timed // 3)
    return warm, timed


def row(op: str, nbytes: int, world: int, time_s: float, skew_s: float = 0.0) -> dict[str, Any]:
    """One result row; algbw and busbw exactly as nccl-tests defines them."""
    algbw = nbytes / time_s
    return {"bytes": nbytes, "time_s": time_s, "algbw_bytes_per_s": algbw,
            "busbw_bytes_per_s": algbw * bus_factor(op, world), "rank_skew_s": skew_s}


def _gather(out: Any, inp: Any) -> Any:
    import torch.distributed as dist

    f = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return f(out, inp)


def _scatter(out: Any, inp: Any) -> Any:
    import torch.distributed as dist

    f = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return f(out, inp)


def _case(op: str, nbytes: int, rank: int, world: int, dev: Any) -> tuple[Any, Any, Any]:
    """fn() running the collective, reset() restoring its input, check() -> bool."""
    import torch
    import torch.distributed as dist

    n = max(world, nbytes // 4 // world * world)  # fp32 elements of the full buffer
    per = n // world
    base = torch.arange(n, dtype=torch.float32, device=dev) % 97 + 1  # never zeros
    if op == "all_reduce":
        src = base * (rank + 1)
        buf = src.clone()
        want = base * (world * (world + 1) / 2)
        return (lambda: dist.all_reduce(buf), lambda: buf.copy_(src),
                lambda: bool(torch.equal(buf, want)))
    if op == "all_gather":
        inp = base[:per] + rank
        out = torch.empty(n, dtype=torch.float32, device=dev)
        want = torch.cat([base[:per] + r for r in range(world)])
        return (lambda: _gather(out, inp), lambda: out.fill_(-1.0),
                lambda: bool(torch.equal(out, want)))
    if op == "reduce_scatter":
        inp = base * (rank + 1)
        out = torch.empty(per, dtype=torch.float32, device=dev)
        want = (base * (world * (world + 1) / 2))[rank * per:(rank + 1) * per]
        return (lambda: _scatter(out, inp), lambda: out.fill_(-1.0),
                lambda: bool(torch.equal(out, want)))
    if op == "all_to_all":
        inp = base + 1000 * rank  # chunk j goes to rank j
        out = torch.empty(n, dtype=torch.float32, device=dev)
        want = torch.cat([base[rank * per:(rank + 1) * per] + 1000 * r for r in range(world)])
        return (lambda: dist.all_to_all_single(out, inp), lambda: out.fill_(-1.0),
                lambda: bool(torch.equal(out, want)))
    if op == "broadcast":
        buf = base.clone() if rank == 0 else torch.full_like(base, -1.0)
        return (lambda: dist.broadcast(buf, 0), lambda: None if rank == 0 else buf.fill_(-1.0),
                lambda: bool(torch.equal(buf, base)))
    raise GpuplanError(f"collectives: {op!r} is not valid; expected one of {', '.join(OPS)}")


def bench_rank(rank: int, world: int, device: str, ops: tuple[str, ...], sizes: list[int],
               quick: bool) -> dict[str, list[dict[str, Any]]] | None:
    """Run every op and size on this rank (process group already set up); rank 0 returns."""
    import torch
    import torch.distributed as dist

    sync = torch.cuda.synchronize if device == "cuda" else None
    clock = HostClock(sync)
    dev = torch.device("cuda", torch.cuda.current_device()) if device == "cuda" else "cpu"
    results: dict[str, list[dict[str, Any]]] = {}
    for op in ops:
        results[op] = []
        for nbytes in sizes:
            fn, reset, check = _case(op, nbytes, rank, world, dev)
            reset()
            fn()
            clock.sync()
            ok = torch.tensor([1.0 if check() else 0.0], device=dev)
            dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            if ok.item() != 1.0:
                raise GpuplanError(f"collectives: {op} of {nbytes} bytes gave a wrong result")
            warm, timed = iterations(nbytes, quick)
            dist.barrier()
            st = measure(fn, clock, setup=reset, warmup_calls=warm, inner=1,
                         min_samples=timed, max_samples=timed, budget_s=0.0)
            t = torch.tensor([st.median_s, -st.median_s], dtype=torch.float64, device=dev)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            tmax, tmin = float(t[0]), -float(t[1])
            results[op].append({**row(op, nbytes, world, tmax, tmax - tmin), "n": st.n})
    return results if rank == 0 else None


def _init(rank: int, world: int, device: str, timeout_s: float, init: str) -> None:
    import torch
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=init,
                            rank=rank, world_size=world, timeout=timedelta(seconds=timeout_s))


def _worker(rank: int, world: int, port: int, device: str, ops: tuple[str, ...],
            sizes: list[int], quick: bool, timeout_s: float, results: Any,
            fault: tuple[str, int] | None) -> None:
    import torch.distributed as dist

    try:
        if fault is not None and fault[1] == rank:
            if fault[0] == "raise":
                raise RuntimeError("injected failure")
            time.sleep(10 * timeout_s)
        _init(rank, world, device, timeout_s + 30, f"tcp://127.0.0.1:{port}")
        out = bench_rank(rank, world, device, ops, sizes, quick)
        if out is not None:
            results.put(("ok", rank, out))
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as e:
        results.put(("error", rank, f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"))
        raise SystemExit(1) from None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_local(nproc: int, device: str = "cpu", ops: tuple[str, ...] = OPS,
              sizes: list[int] | None = None, quick: bool = True, timeout_s: float = 120.0,
              _fault: tuple[str, int] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Spawn `nproc` local ranks; return rank 0's results or raise one GpuplanError."""
    import torch.multiprocessing as mp

    if nproc < 2:
        raise GpuplanError(f"--nproc: {nproc} is not valid; collectives need at least 2")
    sizes = sizes or message_sizes(quick, device)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=_worker, args=(r, nproc, port, device, ops, sizes, quick,
                                               timeout_s, results, _fault), daemon=True)
             for r in range(nproc)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout_s
    got: dict[str, list[dict[str, Any]]] | None = None
    error: str | None = None
    try:
        while error is None:
            try:
                kind, rank, payload = results.get(timeout=0.2)
                if kind == "error":
                    error = f"rank {rank} failed: {payload}"
                else:
                    got = payload
            except queue.Empty:
                pass
            dead = [(r, p.exitcode) for r, p in enumerate(procs) if p.exitcode not in (None, 0)]
            if dead and error is None:
                error = f"rank {dead[0][0]} exited with code {dead[0][1]}"
                try:  # the rank's own reason, when it said one before exiting
                    kind, rank, payload = results.get(timeout=1.0)
                    if kind == "error":
                        error = f"rank {rank} failed: {payload}"
                except queue.Empty:
                    pass
            if got is not None and all(p.exitcode == 0 for p in procs):
                return got
            if time.monotonic() > deadline:
                stuck = [r for r, p in enumerate(procs) if p.is_alive()]
                error = (f"rank(s) {stuck} still running after {timeout_s:g} s (a rank hung, or "
                         f"waits for one that did)")
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    raise GpuplanError(f"collectives: {error}; the other ranks were stopped")


def under_torchrun() -> bool:
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


MAX_WORLD = 1 << 20


def torchrun_ranks() -> tuple[int, int] | None:
    """(RANK, WORLD_SIZE) as torchrun sets them, checked; None outside torchrun."""
    if not under_torchrun():
        return None
    got = {}
    for key in ("RANK", "WORLD_SIZE"):
        raw = os.environ[key]
        try:
            got[key] = int(raw)
        except ValueError:
            raise InputError(key, raw, "a whole number (torchrun sets RANK and WORLD_SIZE; "
                             "unset them outside torchrun)") from None
    rank, world = got["RANK"], got["WORLD_SIZE"]
    if not 1 <= world <= MAX_WORLD:
        raise InputError("WORLD_SIZE", world, f"a whole number from 1 to {MAX_WORLD}")
    if not 0 <= rank < world:
        raise InputError("RANK", rank, f"a whole number from 0 to WORLD_SIZE - 1 = {world - 1}")
    return rank, world


def run_torchrun(device: str, ops: tuple[str, ...] = OPS, sizes: list[int] | None = None,
                 quick: bool = True, timeout_s: float = 300.0
                 ) -> dict[str, list[dict[str, Any]]] | None:
    """Inside a torchrun-launched process: returns results on rank 0, None elsewhere."""
    import torch.distributed as dist

    rank, world = torchrun_ranks() or (0, 1)
    if device == "cuda":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl" if device == "cuda" else "gloo",
                            timeout=timedelta(seconds=timeout_s))
    try:
        return bench_rank(rank, world, device, ops, sizes or message_sizes(quick, device), quick)
    finally:
        dist.destroy_process_group()
