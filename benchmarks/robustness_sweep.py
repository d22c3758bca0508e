"""A fresh, randomly drawn set of bad and extreme inputs (not the test corpus), run through the
CLI in-process; counts tracebacks, slow runs, exit 0 on invalid input, non-finite or negative
JSON numbers and messages that do not name the field.

    PYTHONPATH=src python benchmarks/robustness_sweep.py [--n 300] [--seed 15]

Each case is drawn as (command, option, value) from pools that differ from
tests/test_bad_inputs.py (other values, other models and devices, pairs of bad options, random
bytes as files). A case is "invalid" when its value is outside the option's stated range;
"valid extreme" cases sit at the edges of the ranges and must give finite, non-negative JSON.
Integral floats ("3.0") and Python's integer spellings ("1_0") are accepted as whole numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import sys
import tempfile
import time
from typing import Any

import gpuplan.report.output as output
from gpuplan.cli.main import main

MODELS = ["llama-2-7b", "qwen2.5-7b", "phi-3-mini", "gemma-2-27b", "deepseek-v3", "opt-13b"]
DEVICES = ["h200", "mi325x", "l40s", "rtx-4090", "b200", "tpu-v5p"]
INT_OPTS = {
    "memory": ["--micro-batch", "--seq-len", "--dp", "--tp", "--pp", "--global-batch"],
    "train": ["--gpus", "--tp", "--pp", "--micro-batch", "--seq-len", "--global-batch"],
    "roofline": ["--batch", "--seq-len", "--top"],
    "flops": ["--batch", "--seq-len"],
}
FLOAT_OPTS = {"memory": ["--cuda-context-gb", "--fragmentation"],
              "train": ["--tokens", "--usd-per-gpu-hour", "--scale-up-gbps"]}
NEW_INT = {  # the commands that landed with serving and cost (issue 15, second pass)
    "serve": ["--batch", "--tp", "--requests", "--max-batch", "--max-tokens", "--block-size"],
    "advise": ["--lora-rank", "--top", "--prompt-len"],
    "plan": ["--gpus", "--prompt-len", "--output-len"],
}
NEW_FLOAT = {
    "serve": ["--rate", "--slo-ttft", "--slo-tpot", "--kv-fraction", "--usd-per-gpu-hour"],
    "cost": ["--years", "--utilization", "--pue", "--usd-per-kwh", "--rent-usd-per-gpu-hour",
             "--board-power-w", "--maintenance-share", "--useful-life-years"],
    "advise": ["--tokens", "--budget", "--deadline", "--rate"],
    "plan": ["--tokens", "--rate", "--slo-ttft"],
}
BAD_DIST = ["lognormal:9e307:3", "uniform:0:0", "normal:-5:1", "exponential:1e30", "gamma:2:2",
            "uniform:1:2:3", "lognormal:100:99", "normal:1e8:1", ":", "uniform:" + "8" * 4000]
BAD_INT = ["-7", "0", "3.5", "0x10", "1e9999", "-0", " ", "NaN", "+inf", "9" * 4400,
           "2" * 25, "½", "1,024", "--", "\t", "null"]
BAD_FLOAT = ["+inf", "-nan", "1e309", "-1e-300", "Infinity", "0x1p3", "1/2", "∞", "e", "."]
BAD_TEXT = ["\u202egpt", "\udcff", "x" * 4096, "..", "/", "-", "\r\n", "💥", "CON", "%s%n"]


def _random_file(rng: random.Random, folder: str) -> str:
    kind = rng.choice(["bytes", "json", "toml", "deep", "nan", "big"])
    path = os.path.join(folder, f"f{rng.randrange(10**9)}.{rng.choice(['json', 'toml'])}")
    with open(path, "wb") as fh:
        if kind == "bytes":
            fh.write(rng.randbytes(rng.randrange(1, 5000)))
        elif kind == "json":
            fh.write(json.dumps({"model_type": rng.choice(["llama", "gpt2", "bert"]),
                                 "hidden_size": rng.choice([-1, 0, 10**12, "x", None])}).encode())
        elif kind == "toml":
            fh.write(b'name = "x"\n[values]\nmemory = { value = "-1 GB", source = "s" }\n')
        elif kind == "deep":
            n = rng.randrange(1000, 50000)
            fh.write(b"{\"a\":" + b"[" * n + b"]" * n + b"}")
        elif kind == "nan":
            fh.write(b'{"model_type": "llama", "hidden_size": NaN}')
        else:
            fh.write(b'{"model_type": "llama", "vocab_size": ' + b"7" * 5000 + b"}")
    return path


def draw(rng: random.Random, folder: str) -> tuple[list[str], str, bool]:
    """(argv, field to be named, valid?): half from the first pass's commands, half from
    serve, cost, advise and plan."""
    return _draw_old(rng, folder) if rng.random() < 0.5 else _draw_new(rng, folder)


def _base(rng: random.Random, cmd: str) -> list[str]:
    if cmd == "cost":
        return ["cost", rng.choice(DEVICES[:5])]
    return [cmd, rng.choice(["llama-2-7b", "qwen2.5-7b", "phi-3-mini"])]


def _draw_new(rng: random.Random, folder: str) -> tuple[list[str], str, bool]:
    roll = rng.random()
    if roll < 0.3:
        cmd = rng.choice(list(NEW_INT))
        opt = rng.choice(NEW_INT[cmd])
        return [*_base(rng, cmd), opt, rng.choice(BAD_INT)], opt, False
    if roll < 0.6:
        cmd = rng.choice(list(NEW_FLOAT))
        opt = rng.choice(NEW_FLOAT[cmd])
        extra = ["--requests", "8"] if cmd == "serve" and opt != "--rate" else []
        return [*_base(rng, cmd), *extra, opt, rng.choice(BAD_FLOAT)], opt, False
    if roll < 0.7:
        opt = rng.choice(["--prompt-len", "--output-len"])
        return (["serve", "phi-3-mini", "--rate", "3", "--requests", "8", opt,
                 rng.choice(BAD_DIST)], opt.split("-")[2], False)
    if roll < 0.85:
        path = _random_file(rng, folder)
        opt = rng.choice(["--trace", "--api-prices", "--prices"])
        argv = (["cost", "h100", opt, path] if opt == "--prices" else
                ["serve", "phi-3-mini", opt, path])
        return argv, "", False
    pick = rng.choice([
        ["serve", rng.choice(MODELS[:3]), "--rate", rng.choice(["0.001", "1e9"]), "--requests",
         str(rng.choice([1, 50])), "--prompt-len", "uniform:1:2000", "--seed", "4294967296"],
        ["serve", rng.choice(MODELS[:3]), "--max-throughput", "--requests", "30"],
        ["cost", "h100", "--utilization", rng.choice(["0", "1"]), "--years",
         rng.choice(["0.01", "20"]), "--gpus", rng.choice(["1", "1000000"])],
        ["advise", rng.choice(MODELS[:3]), "--goal", rng.choice(["pretrain", "finetune"])],
    ])
    return pick, "", True


def _draw_old(rng: random.Random, folder: str) -> tuple[list[str], str, bool]:
    roll = rng.random()
    if roll < 0.45:
        cmd = rng.choice(list(INT_OPTS))
        opt = rng.choice(INT_OPTS[cmd])
        base = [cmd, rng.choice(MODELS)] + (["--gpu", rng.choice(DEVICES)] if cmd != "flops"
                                             else [])
        return [*base, opt, rng.choice(BAD_INT)], opt, False
    if roll < 0.6:
        cmd = rng.choice(list(FLOAT_OPTS))
        opt = rng.choice(FLOAT_OPTS[cmd])
        return [cmd, rng.choice(MODELS), opt, rng.choice(BAD_FLOAT)], opt, False
    if roll < 0.72:
        cmd = rng.choice(["memory", "train", "roofline", "flops", "models"])
        return [cmd, rng.choice(BAD_TEXT)], "model", False
    if roll < 0.8:
        return ["memory", rng.choice(MODELS), "--gpu", rng.choice(BAD_TEXT)], "--gpu", False
    if roll < 0.9:
        path = _random_file(rng, folder)
        if path.endswith(".toml"):
            return ["memory", rng.choice(MODELS), "--gpu", path], os.path.basename(path), False
        cmd = rng.choice(["memory", "train", "flops"])
        return [cmd, path], os.path.basename(path), False
    # valid extremes at the edges of the stated ranges
    pick = rng.choice([
        ["flops", rng.choice(MODELS), "--batch", str(2**24), "--seq-len", "1"],
        ["memory", rng.choice(MODELS), "--gpu", rng.choice(DEVICES), "--micro-batch",
         str(rng.choice([1, 2**24])), "--fix"],
        ["memory", rng.choice(MODELS), "--mode", "infer", "--batch", str(2**rng.randrange(25)),
         "--gpu", rng.choice(DEVICES)],
        ["train", rng.choice(MODELS), "--gpus", str(rng.choice([1, 8, 1000, 10**6])), "--tokens",
         rng.choice(["1", "1e18"]), "--seq-len", "1"],
        ["roofline", rng.choice(MODELS), "--batch", str(2**rng.randrange(25)), "--phase",
         rng.choice(["decode", "prefill"]), "--gpu", rng.choice(DEVICES)],
    ])
    return pick, "", True


def _bad_numbers(x: Any, key: str = "") -> int:
    if isinstance(x, dict):
        return sum(_bad_numbers(v, k) for k, v in x.items())
    if isinstance(x, list):
        return sum(_bad_numbers(v, key) for v in x)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return int(not math.isfinite(x) or (x < 0 and key != "margin_bytes"))
    return 0


def run(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    seen: list[Any] = []
    real = output.print_json
    output.print_json = lambda obj: (seen.append(obj), real(obj))  # type: ignore[assignment]
    tally = {"cases": 0, "invalid": 0, "valid_extreme": 0, "traceback": 0, "over_10s": 0,
             "exit0_on_invalid": 0, "field_not_named": 0, "multi_line": 0,
             "non_finite_or_negative_json": 0, "valid_refused": 0, "internal_errors": 0}
    worst = 0.0
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(n):
            argv, field, valid = draw(rng, folder)
            seen.clear()
            err, out = io.StringIO(), io.StringIO()
            t0 = time.perf_counter()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
                code = main([*argv, "--json"])
            took = time.perf_counter() - t0
            worst = max(worst, took)
            e = err.getvalue()
            tally["cases"] += 1
            tally["invalid" if not valid else "valid_extreme"] += 1
            tally["traceback"] += "Traceback" in e
            tally["over_10s"] += took > 10
            tally["internal_errors"] += code == 1
            short = " ".join(a[:40] for a in argv)
            if valid:
                if code == 0:
                    tally["non_finite_or_negative_json"] += bool(seen and _bad_numbers(seen[0]))
                else:
                    tally["valid_refused"] += 1
                    failures.append(f"valid refused: {short}: {e.strip()[:160]}")
                continue
            if code == 0:
                tally["exit0_on_invalid"] += 1
                failures.append(f"exit 0: {short}")
            if e.count("\n") != 1:
                tally["multi_line"] += 1
            if code != 0 and field.lower() not in e.lower():
                tally["field_not_named"] += 1
                failures.append(f"field {field!r} not named: {short}: {e.strip()[:160]}")
    output.print_json = real  # type: ignore[assignment]
    return {**tally, "slowest_s": round(worst, 2), "failures": failures}


def main_() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--seed", type=int, default=15)
    a = ap.parse_args()
    res = run(a.n, a.seed)
    for k, v in res.items():
        if k != "failures":
            print(f"{k:>30}: {v}")
    for f in res["failures"]:
        print("  ", f)
    sys.exit(1 if res["traceback"] or res["exit0_on_invalid"] else 0)


if __name__ == "__main__":
    main_()
