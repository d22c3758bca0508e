"""Serving simulator: requests arrive, a scheduler admits them under the paged KV capacity and
the engine's limits, and every iteration takes the time the latency model gives.

Schedulers: `continuous` is iteration-level batching (Orca, Yu et al. OSDI'22, §3-4; vLLM,
Kwon et al. SOSP'23): requests join and leave at every step, and every step decodes each
running sequence and fills the rest of the token budget with new prompts, whole (Orca's
selective batching; TensorRT-LLM in-flight batching) or, with chunked prefill (Sarathi,
Agrawal et al. 2023), in chunks that fill the budget exactly. `static` forms a batch from what is
waiting, prefills it, and decodes until its longest request ends (finished slots idle).

Admission reserves ceil((prompt + output) / block) KV blocks per request for its lifetime
(TensorRT-LLM's GUARANTEED_NO_EVICT policy), so the cache is never exceeded and nothing is
preempted. Event-driven: between arrivals and completions the batch is fixed, so a run of decode
steps is summed in one go (the step time is affine in the cached tokens), never token by token.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from gpuplan.errors import InputError
from gpuplan.estimate.latency import StepModel
from gpuplan.estimate.request_stream import Workload

SCHEDULERS = ("continuous", "static")


@dataclass(frozen=True)
class Engine:
    """Engine limits, stated in every result and overridable. Defaults: TensorRT-LLM's LLM API
    (max_batch_size 2048, max_num_tokens 8192, tokens_per_block 32 in llm_args.py; vLLM uses
    max_num_seqs 256, block_size 16)."""

    kv_blocks: int
    """KV cache capacity in blocks on each GPU (from the inference memory planner)"""
    block_size: int = 32
    max_batch: int = 2048
    max_tokens: int = 8192
    """tokens per iteration (prefill chunk + decodes)"""
    scheduler: str = "continuous"
    chunked_prefill: bool = False
    """TensorRT-LLM's enable_chunked_prefill default (False); vLLM V1 chunks always"""

    def validate(self) -> None:
        for f in ("kv_blocks", "block_size", "max_batch", "max_tokens"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 1:
                raise InputError(f, v, "a whole number >= 1")
        if self.scheduler not in SCHEDULERS:
            raise InputError("scheduler", self.scheduler, " or ".join(SCHEDULERS))


@dataclass
class SimResult:
    arrival_s: np.ndarray
    admit_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    output: np.ndarray
    prompt: np.ndarray
    completions: np.ndarray
    """how many times each request completed (1 each, checked by tests)"""
    kv_block_seconds: float
    kv_peak_blocks: int
    kv_blocks: int
    steps: int
    peak_concurrency: int
    """most requests admitted at once (prefilling or decoding)"""
    engine: Engine
    source: str
    assumptions: dict[str, object] = field(default_factory=dict)

    @property
    def makespan_s(self) -> float:
        return float(self.finish_s.max() - self.arrival_s.min())

    @property
    def ttft_s(self) -> np.ndarray:
        out: np.ndarray = self.first_token_s - self.arrival_s
        return out

    @property
    def tpot_s(self) -> np.ndarray:
        gaps = np.maximum(self.output - 1, 1)
        out: np.ndarray = np.where(self.output > 1,
                                   (self.finish_s - self.first_token_s) / gaps, 0.0)
        return out

    @property
    def queue_s(self) -> np.ndarray:
        out: np.ndarray = self.admit_s - self.arrival_s
        return out


class _Sim:
    """State of one run; `run` is the loop."""

    def __init__(self, sm: StepModel, w: Workload, e: Engine) -> None:
        self.sm, self.w, self.e = sm, w, e
        n = len(w)
        self.need = -(-(w.prompt + w.output) // e.block_size)
        self.needs: list[int] = self.need.tolist()
        self.admit = np.full(n, np.nan)
        self.first = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.done = np.zeros(n, dtype=np.int64)
        self.t, self.nxt, self.steps = 0.0, 0, 0
        self.free = e.kv_blocks
        self.peak = 0
        self.peak_conc = 0
        self.kv_area = 0.0
        self.held = 0  # tokens in the KV cache (prefilling and running requests)
        self.pf_held = 0  # of which prompts still being prefilled
        self.prompts: list[int] = w.prompt.tolist()
        self.outputs: list[int] = w.output.tolist()
        self.arrivals: list[float] = w.arrival_s.tolist()
        self.waiting: deque[int] = deque()
        self.prefill: deque[list[int]] = deque()  # [id, prompt tokens done]
        # running (decoding) requests: ids, tokens still to produce, tokens cached; aligned
        self.r_ids = np.zeros(0, dtype=np.int64)
        self.r_rem = np.zeros(0, dtype=np.int64)
        self.r_ctx = np.zeros(0, dtype=np.int64)

    @property
    def n_running(self) -> int:
        return len(self.r_ids)

    # ---- bookkeeping --------------------------------------------------------------------
    def arrive(self) -> None:
        a = self.arrivals
        while self.nxt < len(a) and a[self.nxt] <= self.t:
            self.waiting.append(self.nxt)
            self.nxt += 1

    def admit_waiting(self, slots: int) -> list[int]:
        got: list[int] = []
        needs = self.needs
        while self.waiting and len(got) < slots and needs[self.waiting[0]] <= self.free:
            i = self.waiting.popleft()
            self.free -= needs[i]
            got.append(i)
        if got:
            self.admit[got] = self.t
            self.peak = max(self.peak, self.e.kv_blocks - self.free)
            self.peak_conc = max(self.peak_conc, self.n_running + len(self.prefill) + len(got))
        return got

    def advance(self, dt: float) -> None:
        self.kv_area += self.held / self.e.block_size * dt
        self.t += dt

    def next_arrival(self) -> float:
        return self.arrivals[self.nxt] if self.nxt < len(self.arrivals) else math.inf

    # ---- steps ----------------------------------------------------------------------------
    def prefill_step(self, budget: int, with_decode: bool) -> None:
        """One iteration: prompt chunks up to `budget` tokens (+ one token per running
        sequence when `with_decode`)."""
        tokens, pairs, ends = 0, 0.0, []
        prompts, chunked = self.prompts, self.e.chunked_prefill
        for item in self.prefill:
            i, done = item
            left = prompts[i] - done
            c = min(left, budget - tokens) if chunked else left
            if c <= 0 or (not chunked and tokens and tokens + c > budget):
                break
            tokens += c
            pairs += c * done + c * (c + 1) / 2
            item[1] += c
            if item[1] == prompts[i]:
                ends.append(i)
        self.held += tokens
        n_run = self.n_running if with_decode else 0
        run_ctx = float(self.held - self.pf_held - tokens) if n_run else 0.0
        self.pf_held += tokens - sum(prompts[i] for i in ends)
        self.advance(self.sm.time_s(n_run, run_ctx, tokens, pairs, len(ends)))
        self.steps += 1
        if n_run:
            self.token(1)
        for _ in ends:
            self.prefill.popleft()
        if ends:
            self.started(ends)

    def started(self, ends: list[int]) -> None:
        """Prompts fully prefilled: their first token is out; the rest decode."""
        ids = np.array(ends, dtype=np.int64)
        self.first[ids] = self.t
        rem = self.w.output[ids] - 1
        ctx = self.w.prompt[ids]
        one = rem == 0
        if one.any():
            self.finished(ids[one], ctx[one])
        keep = ~one
        self.r_ids = np.concatenate([self.r_ids, ids[keep]])
        self.r_rem = np.concatenate([self.r_rem, rem[keep]])
        self.r_ctx = np.concatenate([self.r_ctx, ctx[keep]])

    def finished(self, ids: np.ndarray, ctx: np.ndarray) -> None:
        self.finish[ids] = self.t
        self.done[ids] += 1
        self.held -= int(ctx.sum())
        self.free += int(self.need[ids].sum())

    def token(self, k: int) -> None:
        """Every running request produces `k` tokens."""
        self.r_rem -= k
        self.r_ctx += k
        self.held += k * len(self.r_ids)
        fin = self.r_rem == 0
        if fin.any():
            self.finished(self.r_ids[fin], self.r_ctx[fin])
            keep = ~fin
            self.r_ids, self.r_rem, self.r_ctx = (self.r_ids[keep], self.r_rem[keep],
                                                  self.r_ctx[keep])

    def decode_block(self, until: float, pad: int = 0) -> None:
        """Decode steps until the next completion (or the first step ending after `until`);
        `pad` idle slots still compute (static batching)."""
        n = self.n_running + pad
        c0 = float(self.held - self.pf_held)
        if pad:
            c0 += pad * float(self.r_ctx.max())
        t0 = self.sm.time_s(n, c0)
        slope = self.sm.time_s(n, c0 + n) - t0
        k = int(self.r_rem.min())
        if until < math.inf:
            dt = until - self.t
            if slope > 1e-15:  # smallest k with k t0 + slope k (k-1) / 2 >= dt
                a, b = slope / 2, t0 - slope / 2
                k_arr = math.ceil((-b + math.sqrt(b * b + 4 * a * dt)) / (2 * a))
            else:
                k_arr = math.ceil(dt / t0)
            k = max(1, min(k, k_arr))
        self.advance(k * t0 + slope * k * (k - 1) / 2)
        self.steps += k
        self.token(k)


def simulate(sm: StepModel, w: Workload, e: Engine) -> SimResult:
    """Run every request of `w` to completion on one TP group."""
    e.validate()
    s = _Sim(sm, w, e)
    too_big = np.flatnonzero(s.need > e.kv_blocks)
    if len(too_big):
        i = int(too_big[0])
        raise InputError(f"request {i} prompt+output tokens", int(w.prompt[i] + w.output[i]),
                         f"at most {e.kv_blocks * e.block_size} (the KV cache on each GPU)")
    if e.scheduler == "static":
        _run_static(s)
    else:
        _run_continuous(s)
    return SimResult(w.arrival_s, s.admit, s.first, s.finish, w.output, w.prompt, s.done,
                     s.kv_area, s.peak, e.kv_blocks, s.steps, s.peak_conc, e, w.source)


def _run_continuous(s: _Sim) -> None:
    e = s.e
    while s.nxt < len(s.w) or s.waiting or s.prefill or s.n_running:
        s.arrive()
        slots = e.max_batch - s.n_running - len(s.prefill)
        for i in s.admit_waiting(slots):
            s.prefill.append([i, 0])
        if s.prefill:
            budget = e.max_tokens - s.n_running
            if budget > 0:
                s.prefill_step(budget, with_decode=True)
                continue
        if s.n_running:
            blocked = bool(s.waiting) or slots <= 0
            s.decode_block(math.inf if blocked else s.next_arrival())
        elif s.nxt < len(s.w):
            s.advance(max(0.0, s.next_arrival() - s.t))


def _run_static(s: _Sim) -> None:
    e = s.e
    while s.nxt < len(s.w) or s.waiting:
        s.arrive()
        if not s.waiting:
            s.advance(max(0.0, s.next_arrival() - s.t))
            continue
        batch = s.admit_waiting(e.max_batch)
        for i in batch:
            s.prefill.append([i, 0])
        while s.prefill:
            s.prefill_step(e.max_tokens, with_decode=False)
        # the first tokens of the whole batch come out together, at the end of its prefill
        ids = np.array(batch, dtype=np.int64)
        s.first[ids] = s.t
        one = ids[s.w.output[ids] == 1]
        s.finish[one] = s.t
        size = len(batch)
        while s.n_running:
            s.decode_block(math.inf, pad=size - s.n_running)
