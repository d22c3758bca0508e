"""Request streams for the serving simulator: Poisson arrivals (exponential gaps at a rate,
Kingman 1993 ch. 1) or a trace (arrival time, prompt tokens, output tokens), with prompt and
output lengths fixed or drawn from a named distribution. Seeded: same seed, same stream."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from gpuplan.errors import InputError

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
    out: np.ndarray = np.maximum(1, np.rint(x)).astype(np.int64)
    return out


def poisson_workload(requests: int, rate: float | None, prompt: str | int, output: str | int,
                     seed: int = 0) -> Workload:
    """`requests` requests arriving as a Poisson process at `rate` per second; rate None or
    inf = all at t=0 (a saturating, offline benchmark)."""
    if not isinstance(requests, int) or requests < 1:
        raise InputError("requests", requests, "a whole number >= 1")
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
    need = ("arrival_s", "prompt_tokens", "output_tokens")
    if reader.fieldnames is None or any(c not in reader.fieldnames for c in need):
        raise InputError(f"{name} header", reader.fieldnames, "columns " + ", ".join(need))
    rows = []
    for i, r in enumerate(reader, start=2):
        try:
            a, p, o = float(r["arrival_s"]), int(r["prompt_tokens"]), int(r["output_tokens"])
        except (TypeError, ValueError):
            raise InputError(f"{name} line {i}", dict(r), "a number of seconds and two whole "
                             "numbers of tokens") from None
        if a < 0 or p < 1 or o < 1 or not np.isfinite(a):
            raise InputError(f"{name} line {i}", dict(r), "arrival_s >= 0, tokens >= 1")
        rows.append((a, p, o))
    if not rows:
        raise InputError(name, "no rows", "at least one request")
    arr = np.array(rows)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return Workload(arr[:, 0] - arr[0, 0], arr[:, 1].astype(np.int64),
                    arr[:, 2].astype(np.int64), f"{name}: {len(rows)} requests")
