"""Request streams for the serving simulator: Poisson arrivals (exponential gaps at a rate,
Kingman 1993 ch. 1) or a trace (arrival time, prompt tokens, output tokens), with prompt and
output lengths fixed or drawn from a named distribution. Seeded: same seed, same stream."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError
from gpuplan.specs.limits import MAX_REQUESTS, MAX_SEQ

MAX_LOG_SIGMA = 4.0
"""lognormal sigma bound: e^(4 x 4 sigma) already spans 7 decades; larger only makes inf"""

MAX_TRACE_S = 1e9
"""latest arrival in a trace, seconds (~31 years)"""

DISTRIBUTIONS = ("fixed N", "uniform:LO:HI", "normal:MEAN:STD", "lognormal:MEDIAN:SIGMA",
                 "exponential:MEAN")


@dataclass(frozen=True)
class Workload:
    """Requests sorted by arrival; times in seconds, lengths in tokens."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    source: str

    def __len__(self) -> int:
        return int(self.arrival_s.shape[0])


def parse_lengths(field: str, spec: str | int, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` lengths >= 1 from "512", "uniform:128:1024", "normal:512:128",
    "lognormal:512:0.5" (median, sigma of log) or "exponential:512" (mean)."""
    text = str(spec).strip().lower()
    bad = InputError(field, spec, "a whole number or one of " + ", ".join(DISTRIBUTIONS))
    parts = text.split(":")
    try:
        nums = [float(p) for p in parts[1:]] if len(parts) > 1 else [float(parts[0])]
    except ValueError:
        raise bad from None
    kind = parts[0] if len(parts) > 1 else "fixed"
    if any(not np.isfinite(x) or x <= 0 for x in nums) and kind != "normal":
        raise bad
    if any(not np.isfinite(x) or abs(x) > MAX_SEQ for x in nums) or (
            kind == "lognormal" and len(nums) == 2 and nums[1] > MAX_LOG_SIGMA):
        raise InputError(field, spec, f"lengths and parameters at most {MAX_SEQ} tokens "
                         f"(lognormal sigma at most {MAX_LOG_SIGMA:g})")
    if kind == "fixed" and len(nums) == 1 and nums[0] == int(nums[0]):
        x = np.full(n, nums[0])
    elif kind == "uniform" and len(nums) == 2 and nums[0] <= nums[1]:
        x = rng.integers(int(nums[0]), int(nums[1]) + 1, n).astype(float)
    elif kind == "normal" and len(nums) == 2 and nums[0] > 0 and nums[1] >= 0:
        x = rng.normal(nums[0], nums[1], n)
    elif kind == "lognormal" and len(nums) == 2:
        x = nums[0] * np.exp(rng.normal(0.0, nums[1], n))
    elif kind == "exponential" and len(nums) == 1:
        x = rng.exponential(nums[0], n)
    else:
        raise bad
    out: np.ndarray = np.clip(np.rint(x), 1, MAX_SEQ).astype(np.int64)  # tails cut at the bound
    return out


def poisson_workload(requests: int, rate: float | None, prompt: str | int, output: str | int,
                     seed: int = 0) -> Workload:
    """`requests` requests arriving as a Poisson process at `rate` per second; rate None or
    inf = all at t=0 (a saturating, offline benchmark)."""
    if not isinstance(requests, int) or not 1 <= requests <= MAX_REQUESTS:
        raise InputError("requests", requests, f"a whole number from 1 to {MAX_REQUESTS}")
    if rate is not None and not rate > 0:
        raise InputError("rate", rate, "a positive number of requests per second")
    rng = np.random.default_rng(seed)
    if rate is None or np.isinf(rate):
        arrival = np.zeros(requests)
        what = f"{requests} requests at once"
    else:
        arrival = np.cumsum(rng.exponential(1.0 / rate, requests))
        arrival -= arrival[0]
        what = f"{requests} Poisson arrivals at {rate:g}/s (seed {seed})"
    p = parse_lengths("prompt_len", prompt, requests, rng)
    o = parse_lengths("output_len", output, requests, rng)
    return Workload(arrival, p, o, f"{what}; prompt {prompt}, output {output} tokens")


def trace_workload(text: str, name: str = "trace") -> Workload:
    """A CSV trace with a header naming arrival_s, prompt_tokens, output_tokens (any order)."""
    reader = csv.DictReader(io.StringIO(text))
    try:
        rows = _rows(reader, name)
    except csv.Error as e:
        raise InputError(name, str(e), "a CSV file (arrival_s,prompt_tokens,output_tokens)"
                         ) from None
    if not rows:
        raise InputError(name, "no rows", "at least one request")
    arr = np.array(rows)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return Workload(arr[:, 0] - arr[0, 0], arr[:, 1].astype(np.int64),
                    arr[:, 2].astype(np.int64), f"{name}: {len(rows)} requests")


def _rows(reader: csv.DictReader[str], name: str) -> list[tuple[float, int, int]]:
    need = ("arrival_s", "prompt_tokens", "output_tokens")
    if reader.fieldnames is None or any(c not in reader.fieldnames for c in need):
        raise InputError(f"{name} header", reader.fieldnames, "columns " + ", ".join(need))
    rows: list[tuple[float, int, int]] = []
    for i, r in enumerate(reader, start=2):
        if None in r or None in r.values():  # more or fewer fields than the header names
            raise InputError(f"{name} line {i}", list(r.get(None) or r.values()),
                             f"{len(reader.fieldnames)} fields, as the header")
        try:
            a, p, o = float(r["arrival_s"]), int(r["prompt_tokens"]), int(r["output_tokens"])
        except (TypeError, ValueError):
            raise InputError(f"{name} line {i}", dict(r), "a number of seconds and two whole "
                             "numbers of tokens") from None
        if not (0 <= a <= MAX_TRACE_S and 1 <= p <= MAX_SEQ and 1 <= o <= MAX_SEQ):
            raise InputError(f"{name} line {i}", dict(r), f"arrival_s from 0 to "
                             f"{MAX_TRACE_S:g}, tokens from 1 to {MAX_SEQ}")
        if len(rows) >= MAX_REQUESTS:
            raise InputError(name, f"over {MAX_REQUESTS} rows", f"at most {MAX_REQUESTS} "
                             "requests")
        rows.append((a, p, o))
    return rows
