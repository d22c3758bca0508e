"""A second, independent adversarial sweep (issue 15): bad and extreme inputs designed afresh,
not drawn from tests/test_bad_inputs.py nor from robustness_sweep.py's pools.

    PYTHONPATH=src python benchmarks/adversarial_sweep.py [--seed 4242] [--part 1/4] [--list]

Cases, by class (the expectation of each is fixed here, before running):
- `option`: every numeric, choice, text and path option of every command, read from the typer
  declaration itself (so a new option is swept without a line here), with values from new pools
  (0, -1, nan, inf, 1e308, 400 digits, unicode digits, empty, whitespace, NUL, Python
  expressions, list syntax, subnormals, hex floats, locale commas, ...), `per_option` drawn per
  option by the seed. Expected: "bad" when the value is not a number of the option's type or lies
  outside the declared range (or is negative / non-finite for a float); otherwise "any".
- `conflict`: option pairs that contradict each other; expected "bad".
- `file`: every loader (config.json, device TOML via --gpu and GPUPLAN_DEVICES, profile JSON,
  prices CSV, API-prices TOML, serve --trace CSV, profile script) with truncated, huge, nested,
  binary, BOM, CRLF, duplicate-key, wrong-type and NaN contents; BOM and CRLF of a valid file
  are "any", the rest "bad".
- `env`: GPUPLAN_DEVICES / GPUPLAN_PRICES / GPUPLAN_DEBUG / RANK / XDG_CACHE_HOME set to hostile
  values, in a real process; "bad" for the command that reads them, "ok" for the others.
- `web`: every endpoint (/api, /view, /report of each command, /api/commands, /, /static) with
  wrong types, missing and extra fields, huge bodies, wrong content types, non-object bodies and
  path tricks; "bad" means a 4xx JSON answer naming the field where there is one.
- `measure`: bench and profile refusals (a profiled script that raises or runs past --timeout
  is the script's failure, not bad input: exit 1 with the script's own traceback and one
  gpuplan line, as tests/test_profile.py states) (--nproc over the cores, --memory-fraction over 1, an
  unknown --only, missing/binary/huge scripts, --timeout).

Expectations revised after the first run, each because a documented rule says otherwise
(listed so the count stays honest): RANK alone (without WORLD_SIZE) is not torchrun and is
ignored, so that case became "any" and RANK/WORLD_SIZE pairs were added;
`--zero 3 --fsdp hybrid` is consistent (FSDP is ZeRO-3) and became `--zero 1 --fsdp hybrid`;
a sequence beyond a RoPE model's max_position_embeddings is planned as asked
(limits.check_positions) so the cases moved to GPT-2-medium's learned table;
`--scheduler static --chunked-prefill` and `--curve --requests` are read (the static
scheduler chunks prefill too; the curve uses --requests) and were replaced by `--rate --batch`
and `--max-batch` without a stream; `web --host 0.0.0.0` is the documented way to listen
beyond loopback (it served, which the sweep saw as a hang) and became an address that does
not exist; profile's script failures (above).

Checks: no traceback, no run past the time limit, exit 2 (not 0, not 1) and exactly one stderr
line naming the field for "bad"; for "any"/"ok" with exit 0, the JSON parses and every number in
it is finite and non-negative (signed keys listed in SIGNED); a failed command leaves none of
its output files behind.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SIGNED = ("margin", "delta", "saving", "change", "vs_", "error", "diff", "slack", "headroom",
          "gain", "offset")
"""JSON keys whose numbers may be negative by meaning (a margin below zero = does not fit)."""

INT_POOL = ["0", "-1", "nan", "inf", "1e308", "9" * 400, "", "   ", "True", "[8]", "8 8",
            "8\x00", "0.5", "2**10", "\u0663", "\uff18", "1e3", "-0", "+1", "1_000", "0b11",
            "4294967297", "1e-5", "0x", "None", "٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣"]
FLOAT_POOL = ["0", "-1", "-0.0", "nan", "-inf", "inf", "Infinity", "1e308", "1e-320", "9" * 400,
              "", " ", "1e", "0x1p-2", "1,5", "\u0661.\u0665", "None", "5e-324",
              "1.7976931348623157e308", "-1e-9", "1e309", "NaN(123)", "2e0\n"]
CHOICE_POOL = ["", "FULL", " x", "zzz", "\U0001f642", "none\n", "0", "-1", "--json"]
TEXT_POOL = ["", " ", "\t", "../../etc/passwd", "x" * 300, "a\x00b", "h100\u200b",
             "\uff28\uff11\uff10\uff10", "CON", "-", "\U0001f642", "%n%s", "*", "{}", "y" * 70000]
OUT_PATH_POOL = ["", "/", "{tmp}/no/such/dir/out{k}.png", "{tmp}/fifo.png", "{tmp}/out{k}.bmp",
                 "{tmp}/out{k}", "/proc/version", "{tmp}/" + "n" * 300 + ".png", "{tmp}",
                 "{tmp}/fifo.html", "{tmp}/out{k}.html.png.html."]
"""a FIFO stands for a special file such as /dev/full: run as root, a writer that renamed its
temporary file over /dev/full would replace the device (it happened with --html; fixed)"""
IN_PATH_POOL = ["", "/", "/dev/zero", "/proc/self/environ", "{tmp}/missing.csv", "{tmp}",
                "{tmp}/" + "m" * 300, "/etc/shadow", "\udcff.csv"]

BASES: dict[str, list[str]] = {
    "memory": ["memory", "qwen2.5-0.5b", "--gpu", "a10g"],
    "train": ["train", "llama-3.2-1b", "--gpu", "l4", "--gpus", "8"],
    "roofline": ["roofline", "mistral-7b", "--gpu", "h20"],
    "flops": ["flops", "gpt2-medium"],
    "serve": ["serve", "llama-3.2-3b", "--gpu", "l40s"],
    "cost": ["cost", "h200"],
    "advise": ["advise", "qwen2.5-0.5b"],
    "plan": ["plan", "llama-3.2-1b"],
    "hardware": ["hardware"],
    "models": ["models"],
    "bench": ["bench", "--device", "cpu", "--quick", "--only", "launch", "--no-save"],
    "profile": ["profile", "{script}"],
}
SKIP_OPTS = {"--json", "--help", "--debug"}
SLOW_VALID = {"bench", "profile", "web"}
"""commands whose accepted values would measure for minutes or start a server: only the
values expected to be refused are swept through them (the rest in a real process, below).
bench and profile cases run as real processes: both arm their own SIGALRM (which would disarm
this sweep's time limit) and import torch, which an in-process time limit could interrupt
half-way (later imports then fail with 'duplicate registrations')"""


@dataclass
class Case:
    cls: str                       # option, conflict, file, env, web, measure
    argv: list[str] = field(default_factory=list)
    expect: str = "bad"            # bad, any, ok
    names: tuple[str, ...] = ()    # one of these must be in a "bad" message
    env: dict[str, str] | None = None
    web: tuple[str, str, Any, dict[str, str]] | None = None  # method, url, body, headers
    outputs: tuple[str, ...] = ()  # files a failed run must not leave
    process: bool = False          # run in a real process (env, web, timeouts)


# ---- values and their expectation ----------------------------------------------------------

def _as_int(v: str) -> int | None:
    try:
        return int(v)
    except ValueError:
        pass
    try:
        f = float(v)
    except ValueError:
        return None
    return int(f) if math.isfinite(f) and f == int(f) else None


def _expect_number(v: str, is_int: bool, lo: float | None, hi: float | None) -> str:
    x: float | int | None
    if is_int:
        x = _as_int(v)
    else:
        try:
            x = float(v)
        except ValueError:
            x = None
        if x is not None and (not math.isfinite(x) or x < 0):
            return "bad"
    if x is None:
        return "bad"
    if (lo is not None and x < lo) or (hi is not None and x > hi):
        return "bad"
    return "any"


def _kind(p: Any) -> tuple[str, list[str]]:
    """(integer, float, choice, path, bool or text; the choices) of a typer parameter."""
    import enum
    import typing

    t = p.type_descriptor.annotation
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if args:
        t = args[0]
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return "choice", [str(m.value) for m in t]
    names = {int: "integer", float: "float", bool: "bool", Path: "path"}
    return names.get(t, "text"), []


def _option_cases(rng: random.Random, tmp: str, per_option: int) -> list[Case]:
    from typer.main import get_command

    from gpuplan.cli.main import get_app

    group = get_command(get_app())
    cases = []
    for name, base in BASES.items():
        cmd = group.commands[name]  # type: ignore[attr-defined]
        for p in cmd.params:
            if p.param_type_name == "argument":
                continue
            flags = [o for o in p.opts if o.startswith("--")]
            tname, choices = _kind(p)
            if tname == "bool" or not flags or flags[0] in SKIP_OPTS:
                continue
            lo, hi = p.min, p.max
            if tname.startswith("integer") or tname.startswith("float"):
                pool = INT_POOL if tname.startswith("integer") else FLOAT_POOL
                vals = rng.sample(pool, per_option)
                exp = [_expect_number(v, tname.startswith("integer"), lo, hi) for v in vals]
            elif tname == "choice":
                vals = rng.sample(CHOICE_POOL, min(per_option, 3))
                exp = ["any" if v.strip().lower() in [c.lower() for c in choices]
                       else "bad" for v in vals]
            elif tname == "path":
                out = any(w in flags[0] for w in ("plot", "html")) or (
                    name == "profile" and flags[0] == "--trace")
                pool = OUT_PATH_POOL if out else IN_PATH_POOL
                vals = [v.format(tmp=tmp, k=len(cases)) for v in rng.sample(pool, per_option)]
                exp = ["bad"] * len(vals)
            else:
                vals = rng.sample(TEXT_POOL, min(per_option, 3))
                exp = ["bad"] * len(vals)
            for v, e in zip(vals, exp, strict=True):
                if name in SLOW_VALID and e != "bad":
                    continue
                argv = [a.format(script=f"{tmp}/ok.py") for a in base] + [f"{flags[0]}={v}"]
                outs = (v,) if tname == "path" and e == "bad" and v.startswith(tmp) else ()
                cases.append(Case("option", argv, e, tuple(flags), outputs=outs,
                                  process=name in ("bench", "profile")))
        for arg in [p for p in cmd.params if p.param_type_name == "argument"]:
            for v in rng.sample(TEXT_POOL, 2):
                argv = [name, v, *base[2:]] if len(base) > 1 else [name, v]
                if name == "profile":
                    argv = ["profile", v]
                cases.append(Case("option", argv, "bad", (arg.name or "", "model", "gpu",
                                                          "device", "script", "name")))
    return cases


# ---- conflicting pairs ------------------------------------------------------------------------

def _conflicts(tmp: str) -> list[Case]:
    t, m = ["train", "llama-3.2-1b", "--gpus", "8"], ["memory", "qwen2.5-0.5b"]
    s = ["serve", "llama-3.2-3b"]
    rows: list[tuple[list[str], tuple[str, ...]]] = [
        ([*t, "--dp", "3"], ("--dp", "--gpus")), ([*t, "--tp", "16"], ("--tp", "--gpus")),
        ([*t, "--pp", "17"], ("--pp",)), ([*t, "--cp", "3", "--seq-len", "4096"], ("--cp",)),
        ([*t, "--ep", "2"], ("--ep",)), ([*t, "--zero", "1", "--fsdp", "hybrid"], ("--fsdp",
                                                                               "--zero")),
        ([*t, "--virtual-stages", "4"], ("--virtual-stages", "--pp")),
        ([*t, "--gpus-per-node", "3"], ("--gpus-per-node",)),
        ([*t, "--global-batch", "7", "--micro-batch", "2"], ("--global-batch",)),
        ([*t, "--search", "--pp", "2"], ("--search", "--pp")),
        ([*t, "--top", "3"], ("--top",)), ([*t, "--scaling", "--search"], ("--scaling",
                                                                          "--search")),
        ([*t, "--finetune", "full", "--lora-rank", "8"], ("--lora-rank", "--finetune")),
        ([*t, "--lora-targets", "q_proj"], ("--lora-targets", "--finetune")),
        ([*m, "--mode", "infer", "--zero", "2"], ("--zero", "--mode")),
        ([*m, "--mode", "train", "--kv-dtype", "fp8"], ("--kv-dtype", "--mode")),
        ([*m, "--mode", "infer", "--optimizer", "sgd"], ("--optimizer", "--mode")),
        (["memory", "gpt2-medium", "--seq-len", "100000"], ("--seq-len",)),
        ([*m, "--gpu", "t4", "--precision", "fp8-mixed"], ("--precision", "fp8")),
        ([*s, "--rate", "2", "--max-throughput"], ("--rate", "--max-throughput")),
        ([*s, "--trace", f"{tmp}/ok_trace.csv", "--rate", "3"], ("--trace", "--rate")),
        ([*s, "--slo-ttft", "0.5"], ("--slo-ttft",)),
        ([*s, "--rate", "1", "--batch", "8"], ("--batch",)),
        ([*s, "--prompt-len", "uniform:10:20"], ("--prompt-len",)),
        ([*s, "--tp", "5"], ("--tp",)), (["serve", "gpt2-medium", "--prompt-len", "2000"],
                                     ("--prompt-len",)),
        ([*s, "--max-batch", "8"], ("--max-batch",)),
        (["cost", "h200", "--utilization", "0.5", "--years", "30"], ("--years",)),
        (["plan", "llama-3.2-1b", "--goal", "train", "--rate", "3"], ("--rate", "--goal")),
        (["plan", "llama-3.2-1b", "--goal", "serve", "--tokens", "1e9"], ("--tokens",
                                                                         "--goal")),
        (["advise", "qwen2.5-0.5b", "--goal", "pretrain", "--lora-rank", "4"],
         ("--lora-rank", "--goal")),
        (["advise", "qwen2.5-0.5b", "--goal", "serve", "--tokens", "1e9"], ("--tokens",
                                                                           "--goal")),
        (["roofline", "mistral-7b", "--phase", "decode", "--attention", "naive",
          "--compare-attention"], ("--compare-attention", "--phase")),
        (["flops", "gpt2", "--seq-len", "2048"], ("--seq-len",)),
        (["bench", "--device", "cpu", "--nproc", "2", "--only", "matmul"], ("--nproc",
                                                                           "--only")),
    ]
    return [Case("conflict", a, "bad", n, process=a[0] == "bench") for a, n in rows]


# ---- files ------------------------------------------------------------------------------------

GOOD_CONFIG = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376,
               "num_attention_heads": 8, "num_key_value_heads": 8, "num_hidden_layers": 4,
               "vocab_size": 32000, "max_position_embeddings": 2048}
GOOD_DEVICE = ('name = "Fuzz-GPU"\n[values]\nmemory = { value = "24 GB", source = "s" }\n'
               'memory_bandwidth = { value = "1 TB/s", source = "s" }\n'
               'peak_flops_bf16 = { value = "100 TFLOPS", source = "s" }\n')
GOOD_TRACE = "arrival_s,prompt_tokens,output_tokens\n0,100,20\n0.5,200,10\n"
GOOD_PRICES = "device,kind,usd\nh200,purchase,30000\n"
GOOD_API = '[providers.x]\nmodel = "llama-3.2-3b"\ninput_usd_per_mtok = 0.1\n' \
           'output_usd_per_mtok = 0.2\nsource = "s"\nas_of = "2026-01-01"\n'


def _variants(good: str, kind: str) -> dict[str, tuple[bytes, str]]:
    """name -> (content, expectation); derived from a valid file."""
    b = good.encode()
    v: dict[str, tuple[bytes, str]] = {
        "bom": (b"\xef\xbb\xbf" + b, "any"), "crlf": (b.replace(b"\n", b"\r\n"), "any"),
        "truncated": (b[: len(b) * 2 // 3], "bad"), "empty": (b"", "bad"),
        "nul": (b[:20] + b"\x00" + b[20:], "bad"), "utf16": (good.encode("utf-16"), "bad"),
        "binary": (bytes(range(256)) * 40, "bad"), "huge": (b + b" " * (17 << 20), "bad"),
        "latin1": (good.replace("s", "\xe9").encode("latin-1"), "bad"),
    }
    if kind == "json":
        v |= {"dup": (b'{"hidden_size": 512, ' + b[1:] + b"", "any"),
              "nested": (b'{"x":' + b"{\"a\":" * 5000 + b"1" + b"}" * 5001, "bad"),
              "list": (b"[" + b + b"]", "bad"), "nan": (b.replace(b"512", b"NaN", 1), "bad"),
              "str_num": (b.replace(b"512", b'"512"', 1), "any"),
              "float": (b.replace(b"512", b"512.5", 1), "bad"),
              "neg": (b.replace(b": 4,", b": -4,", 1), "bad"),
              "bignum": (b.replace(b"32000", b"3" * 400, 1), "bad"),
              "bool": (b.replace(b"512", b"true", 1), "bad"),
              "null": (b.replace(b"512", b"null", 1), "bad")}
    elif kind == "toml":
        v |= {"dup": (b + b'name = "again"\n', "bad"),
              "nested": (b"a = " + b"[" * 3000 + b"]" * 3000 + b"\n", "bad"),
              "wrong_type": (b.replace(b'"24 GB"', b"24", 1) if b"24 GB" in b else
                             b.replace(b"0.1", b'"cheap"', 1), "bad"),
              "nan": (b.replace(b'"24 GB"', b"nan", 1) if b"24 GB" in b else
                      b.replace(b"0.1", b"nan", 1), "bad"),
              "negative": (b.replace(b'"1 TB/s"', b'"-1 TB/s"', 1) if b"TB/s" in b else
                           b.replace(b"0.2", b"-0.2", 1), "bad")}
    else:  # csv
        lines = good.splitlines()
        v |= {"dup_header": ((lines[0] + "," + lines[0].split(",")[0] + "\n" +
                              "\n".join(lines[1:]) + "\n").encode(), "bad"),
              "only_header": ((lines[0] + "\n").encode(), "bad"),
              "nan": (good.replace(lines[1].split(",")[-1], "nan", 1).encode(), "bad"),
              "inf": (good.replace(lines[1].split(",")[-1], "inf", 1).encode(), "bad"),
              "neg": (good.replace(lines[1].split(",")[-1], "-5", 1).encode(), "bad"),
              "ragged": ((good + "1,2,3,4,5,6\n").encode(), "bad"),
              "quotes": ((good + '"unterminated,1,2\n').encode(), "bad"),
              "many_rows": ((lines[0] + "\n" + (lines[1] + "\n") * 3_000_000).encode(), "any")}
    return v


def _file_cases(tmp: str) -> list[Case]:
    cases = []
    loaders: list[tuple[str, str, str, Any]] = [
        ("config.json", json.dumps(GOOD_CONFIG, indent=1), "json",
         lambda p: (["memory", p, "--gpu", "a10g"], ("config.json", p))),
        ("device.toml", GOOD_DEVICE, "toml",
         lambda p: (["roofline", "gpt2", "--gpu", p], ("--gpu", "device", p))),
        ("trace.csv", GOOD_TRACE, "csv",
         lambda p: (["serve", "llama-3.2-3b", "--trace", p], ("--trace", p))),
        ("prices.csv", GOOD_PRICES, "csv",
         lambda p: (["cost", "h200", "--prices", p], ("--prices", p))),
        ("api.toml", GOOD_API, "toml",
         lambda p: (["serve", "llama-3.2-3b", "--api-prices", p], ("--api-prices", p))),
    ]
    for fname, good, kind, make in loaders:
        for vname, (content, exp) in _variants(good, kind).items():
            folder = Path(tmp) / f"{fname}-{vname}"
            folder.mkdir()
            path = folder / fname
            path.write_bytes(content)
            argv, names = make(str(path))
            cases.append(Case("file", argv, exp, tuple(Path(n).name if "/" in n else n
                                                       for n in names)))
    prof = _profile_variants(tmp)
    for path, exp in prof.values():
        cases.append(Case("file", ["roofline", "gpt2", "--profile", path], exp,
                          ("--profile", Path(path).name)))
    return cases


def _profile_variants(tmp: str) -> dict[str, tuple[str, str]]:
    base = {"identity": {"device": "cpu", "name": "fuzz"}, "kind": "cpu",
            "peak_flops_per_s": {"fp32": 1e11}, "memory_bandwidth_bytes_per_s": 2e10}
    raw: dict[str, tuple[bytes, str]] = {
        "array": (b"[1,2,3]", "bad"), "string": (b'"profile"', "bad"),
        "deep": (b'{"a":' * 4000 + b"1" + b"}" * 4000, "bad"),
        "nan_bw": (json.dumps(base).replace("2e10", "NaN").encode(), "bad"),
        "neg_peak": (json.dumps(base).replace("1e11", "-1e11").encode(), "bad"),
        "peak_str": (json.dumps(base).replace("1e11", '"fast"').encode(), "bad"),
        "dtype_x": (json.dumps(base).replace('"fp32"', '"fp13"').encode(), "bad"),
        "binary": (os.urandom(3000), "bad"), "bom_crlf": (b"\xef\xbb\xbf{\r\n}\r\n", "bad"),
        "big_int": (json.dumps(base).replace("2e10", "2" * 500).encode(), "bad"),
    }
    out = {}
    for name, (content, exp) in raw.items():
        p = Path(tmp) / f"profile-{name}.json"
        p.write_bytes(content)
        out[name] = (str(p), exp)
    return out


# ---- environment, measurement and the web API ------------------------------------------------

def _env_cases(tmp: str) -> list[Case]:
    binary = Path(tmp) / "env-binary.toml"
    binary.write_bytes(os.urandom(2048))
    empty_dir = Path(tmp) / "env-empty-dir"
    empty_dir.mkdir()
    rows: list[tuple[str, str, list[str], str, tuple[str, ...]]] = [
        ("GPUPLAN_DEVICES", str(binary), ["hardware", "--json"], "bad", ("GPUPLAN_DEVICES",)),
        ("GPUPLAN_DEVICES", str(binary), ["flops", "gpt2", "--json"], "ok", ()),
        ("GPUPLAN_DEVICES", "x" * 5000, ["memory", "gpt2", "--json"], "bad",
         ("GPUPLAN_DEVICES",)),
        ("GPUPLAN_DEVICES", f"{empty_dir}{os.pathsep}{os.pathsep}", ["hardware", "--json"],
         "any", ("GPUPLAN_DEVICES",)),
        ("GPUPLAN_DEVICES", "/dev/zero", ["memory", "gpt2", "--json"], "bad",
         ("GPUPLAN_DEVICES",)),
        ("GPUPLAN_PRICES", "/dev/zero", ["cost", "h200", "--json"], "bad", ("GPUPLAN_PRICES",)),
        ("GPUPLAN_PRICES", str(binary), ["cost", "h200", "--json"], "bad", ("GPUPLAN_PRICES",)),
        ("GPUPLAN_PRICES", "", ["cost", "h200", "--json"], "ok", ()),
        ("GPUPLAN_PRICES", f"{tmp}/nope.csv", ["advise", "gpt2", "--json"], "bad",
         ("GPUPLAN_PRICES",)),
        ("GPUPLAN_PRICES", str(binary), ["flops", "gpt2", "--json"], "ok", ()),
        ("GPUPLAN_DEBUG", "\U0001f642", ["flops", "gpt2", "--json"], "ok", ()),
        ("RANK", "zero", ["bench", "--device", "cpu", "--only", "launch", "--quick",
                          "--no-save", "--json"], "any", ("RANK",)),  # alone: not torchrun
        ("WORLD_SIZE", "-3", ["bench", "--device", "cpu", "--only", "launch", "--quick",
                              "--no-save", "--json"], "any", ("WORLD_SIZE",)),
        ("XDG_CACHE_HOME", "/proc/version", ["bench", "--device", "cpu", "--only", "launch",
                                             "--quick", "--json"], "any", ("XDG_CACHE_HOME",)),
        ("COLUMNS", "-5", ["memory", "gpt2"], "ok", ()),
        ("COLUMNS", "9" * 400, ["train", "gpt2"], "ok", ()),
        ("LANG", "C", ["models"], "ok", ()), ("PYTHONIOENCODING", "ascii", ["models"], "ok",
                                               ()),
    ]
    cases = [Case("env", argv, exp, names, env={k: v}, process=True)
             for k, v, argv, exp, names in rows]
    bench = ["bench", "--device", "cpu", "--only", "launch", "--quick", "--no-save", "--json"]
    for rank, world, name in [("zero", "2", "RANK"), ("3", "2", "RANK"), ("0", "0", "WORLD")]:
        cases.append(Case("env", bench, "bad", (name,), env={"RANK": rank, "WORLD_SIZE": world},
                          process=True))
    return cases


def _measure_cases(tmp: str) -> list[Case]:
    s = Path(tmp) / "ok.py"
    s.write_text("import sys\nprint('hi', sys.argv[1:])\n")
    binary = Path(tmp) / "binary.py"
    binary.write_bytes(os.urandom(4000))
    huge = Path(tmp) / "huge.py"
    huge.write_bytes(b"x = 1\n" * (4 << 20))
    b = ["bench", "--device", "cpu", "--no-save"]
    rows: list[tuple[list[str], str, tuple[str, ...]]] = [
        ([*b, "--only", "collectives", "--nproc", "4096"], "bad", ("--nproc",)),
        ([*b, "--only", "collectives", "--nproc", str((os.cpu_count() or 1) + 1)], "bad",
         ("--nproc",)),
        ([*b, "--only", "matmul,,memory"], "bad", ("--only",)),
        ([*b, "--only", "MATMUL"], "any", ("--only",)),
        ([*b, "--only", "matmul", "--memory-fraction", "1.5"], "bad", ("--memory-fraction",)),
        ([*b, "--only", "memory", "--memory-fraction", "1e-12"], "bad", ("--memory-fraction",
                                                                         "memory")),
        ([*b, "--only", "launch", "--timeout", "0"], "bad", ("--timeout",)),
        ([*b, "--only", "launch", "--timeout", "nan"], "bad", ("--timeout",)),
        ([*b, "--device", "cuda:7", "--only", "launch"], "bad", ("--device", "cuda")),
        ([*b, "--device", "mps"], "bad", ("--device",)),
        ([*b, "--plot", f"{tmp}/bench.svgz", "--only", "launch"], "bad", ("--plot",)),
        (["profile", f"{tmp}/absent.py"], "bad", ("script", "absent.py")),
        (["profile", str(binary)], "bad", ("script", "binary.py")),
        (["profile", str(huge)], "bad", ("script", "huge.py")),
        (["profile", tmp], "bad", ("script",)),
        (["profile", "/dev/zero"], "bad", ("script", "/dev/zero")),
        (["profile", str(s), "--timeout", "0.01"], "bad", ("--timeout",)),
        (["profile", str(s), "--steps", "0"], "bad", ("--steps",)),
        (["profile", str(s), "--warmup", "-1"], "bad", ("--warmup",)),
        (["profile", str(s), "--html", f"{tmp}/no/dir/r.html"], "bad", ("--html",)),
        (["profile", str(REPO / "tests/profile_scripts/raises.py"), "--timeout", "60"],
         "script_fails", ("raises.py", "script")),
        (["profile", str(REPO / "tests/profile_scripts/hangs.py"), "--timeout", "3"],
         "script_fails", ("--timeout", "hangs.py", "timeout")),
        (["profile", str(s), "--", "--json", "\x00", "x" * 10000], "script_fails",
         ("optimizer",)),
        (["web", "--port", "0"], "bad", ("--port",)),
        (["web", "--port", "70000"], "bad", ("--port",)),
        (["web", "--host", "300.1.1.1"], "bad", ("--host",)),
        (["web", "--host", ""], "bad", ("--host",)),
        (["web", "--time-limit", "inf"], "bad", ("--time-limit",)),
    ]
    return [Case("measure", a, e, n, process=a[0] in ("web", "bench", "profile"))
            for a, e, n in rows]


def _web_cases(rng: random.Random) -> list[Case]:
    j = {"content-type": "application/json"}
    rows: list[tuple[str, str, Any, dict[str, str], str, tuple[str, ...]]] = []
    for cmd in ["plan", "serve", "cost", "advise", "memory", "train", "roofline", "flops",
                "hardware", "models"]:
        for prefix in rng.sample(["/api/", "/view/", "/report/"], 2):
            rows += [
                ("POST", prefix + cmd, {"model": "gpt2", "zzz_extra": 1}, {}, "bad",
                 ("zzz_extra",)),
                ("POST", prefix + cmd, [], {}, "bad", ("body",)),
                ("POST", prefix + cmd, "model=gpt2", {"content-type": "text/plain"}, "bad",
                 ()),
            ]
    model_cmds = ["plan", "serve", "advise", "memory", "train", "roofline", "flops"]
    for cmd in model_cmds:
        rows += [
            ("POST", f"/api/{cmd}", {}, {}, "bad", ("model", "config")),
            ("POST", f"/api/{cmd}", {"model": 7}, {}, "bad", ("model",)),
            ("POST", f"/api/{cmd}", {"model": None}, {}, "bad", ("model", "config")),
            ("POST", f"/api/{cmd}", {"model": "gpt2", "config": {"model_type": "gpt2"}}, {},
             "bad", ("model", "config")),
            ("POST", f"/api/{cmd}", {"config": {"model_type": "llama", "hidden_size": -5}}, {},
             "bad", ("config", "hidden_size")),
            ("POST", f"/api/{cmd}", {"config": {**GOOD_CONFIG,
                                                "_name_or_path": "../../../../tmp/pwn"}}, {},
             "any", ()),
            ("POST", f"/api/{cmd}", {"config": [GOOD_CONFIG]}, {}, "bad", ("config",)),
            ("POST", f"/api/{cmd}", {"model": "\U0001f642" * 200}, {}, "bad", ("model",)),
            ("POST", f"/api/{cmd}", '{"model": "gpt2", "model": "llama-3-8b"}', j, "any", ()),
            ("POST", f"/api/{cmd}", b'\xef\xbb\xbf{"model": "gpt2"}', j, "any", ()),
        ]
    plan = "/api/plan"
    rows += [
        ("POST", plan, {"model": "gpt2", "gpus": 0}, {}, "bad", ("gpus",)),
        ("POST", plan, {"model": "gpt2", "gpus": 2.5}, {}, "bad", ("gpus",)),
        ("POST", plan, {"model": "gpt2", "gpus": True}, {}, "bad", ("gpus",)),
        ("POST", plan, {"model": "gpt2", "rate": False}, {}, "bad", ("rate",)),
        ("POST", plan, {"model": "gpt2", "gpus": "8"}, {}, "any", ()),
        ("POST", plan, {"model": "gpt2", "goal": ["train"]}, {}, "bad", ("goal",)),
        ("POST", plan, {"model": "gpt2", "goal": "TRAIN"}, {}, "any", ("goal",)),
        ("POST", plan, {"model": "gpt2", "tokens": -1}, {}, "bad", ("tokens",)),
        ("POST", plan, {"model": "gpt2", "tokens": 1e308}, {}, "any", ("tokens",)),
        ("POST", plan, {"model": "gpt2", "rate": 0}, {}, "bad", ("rate",)),
        ("POST", plan, {"model": "gpt2", "rate": 1e-300}, {}, "any", ("rate",)),
        ("POST", plan, {"model": "gpt2", "prompt_len": 5000}, {}, "bad", ("prompt_len",)),
        ("POST", plan, {"model": "gpt2", "output_len": 2 ** 63}, {}, "bad", ("output_len",)),
        ("POST", plan, {"model": "gpt2", "slo_ttft": "fast"}, {}, "bad", ("slo_ttft",)),
        ("POST", plan, {"model": "gpt2", "slo_tpot": {"$gt": 0}}, {}, "bad", ("slo_tpot",)),
        ("POST", plan, {"model": "gpt2", "gpu": "h100", "gpus": 1000000}, {}, "any", ()),
        ("POST", plan, {"model": "gpt2", "gpu": "/etc/passwd"}, {}, "bad", ("gpu",)),
        ("POST", plan, {"model": "gpt2", "gpu": "x.toml"}, {}, "bad", ("gpu",)),
        ("POST", plan, {"model": "gpt2", "json": False}, {}, "bad", ("json",)),
        ("POST", plan, {"model": "gpt2", "--gpus": 8}, {}, "bad", ("--gpus",)),
        ("POST", plan, {"model": "gpt2", "html": "/tmp/x.html"}, {}, "bad", ("html",)),
        ("POST", plan, '{"model": "gpt2", "gpus": 1e999}', j, "bad", ("gpus",)),
        ("POST", plan, '{"model": "gpt2"', j, "bad", ()),
        ("POST", plan, '{"model": "gpt2", "rate": -Infinity}', j, "bad", ("rate",)),
        ("POST", plan, b'{"model": "gpt2\xff"}', j, "bad", ()),
        ("POST", plan, "{\"model\": \"gpt2\", \"tokens\": " + "9" * 5000 + "}", j, "bad",
         ("tokens",)),
        ("POST", plan, json.dumps({"model": "gpt2", "pad": "x" * 400_000}), j, "bad", ()),
        ("POST", plan, '{"a":' * 200 + "1" + "}" * 200, j, "bad", ()),
        ("POST", plan, {"model": "gpt2"}, {"content-type": "application/x-www-form-urlencoded"},
         "any", ()),
        ("POST", plan, "", j, "bad", ()),
        ("POST", plan, "null", j, "bad", ()),
        ("GET", plan, None, {}, "bad", ()),
        ("PUT", "/api/memory", {"model": "gpt2"}, {}, "bad", ()),
        ("DELETE", "/api/commands", None, {}, "bad", ()),
        ("GET", "/api/../api/commands", None, {}, "any", ()),
        ("GET", "/static/../../../../etc/passwd", None, {}, "bad", ()),
        ("GET", "/static/%2e%2e/%2e%2e/app.py", None, {}, "bad", ()),
        ("GET", "/static/..%2f..%2fapp.py", None, {}, "bad", ()),
        ("GET", "/static/" + "a" * 5000, None, {}, "bad", ()),
        ("POST", "/api/bench", {"device": "cpu"}, {}, "bad", ()),
        ("POST", "/api/profile", {"script": "/etc/passwd"}, {}, "bad", ()),
        ("POST", "/api/web", {}, {}, "bad", ()),
        ("POST", "/api/MEMORY", {"model": "gpt2"}, {}, "bad", ()),
        ("POST", "/api/memory%00", {"model": "gpt2"}, {}, "bad", ()),
        ("GET", "/api/catalog", None, {}, "any", ()),
        ("POST", "/api/serve", {"model": "gpt2", "requests": 1000000, "rate": 1e6,
                                "max_batch": 1}, {}, "any", ()),
        ("POST", "/api/train", {"model": "llama-3-70b", "gpus": 1000000, "search": True},
         {}, "any", ()),
        ("POST", "/api/cost", {"gpu": "h200", "years": 0.01, "utilization": 0,
                               "purchase_usd_per_gpu": 1e308}, {}, "any", ()),
        ("POST", "/api/memory", {"model": "gpt2", "micro_batch": 16777216,
                                 "seq_len": 1024}, {}, "any", ()),
        ("POST", "/api/roofline", {"model": "gpt2", "top": -1}, {}, "bad", ("top",)),
        ("POST", "/api/advise", {"model": "gpt2", "budget": "NaN"}, {}, "bad", ("budget",)),
        ("POST", "/api/hardware", {"name": "h100\x00"}, {}, "bad", ("name",)),
        ("POST", "/api/models", {"name": ["gpt2", "gpt2"]}, {}, "bad", ("name",)),
        ("POST", "/api/serve", {"model": "gpt2", "prompt_len": "lognormal:5:1e308",
                                "rate": 1}, {}, "bad", ("prompt_len",)),
    ]
    return [Case("web", [m, u], e, n, web=(m, u, b, h)) for m, u, b, h, e, n in rows]


# ---- running --------------------------------------------------------------------------------

class Timeout(BaseException):
    pass


def _alarm(_sig: int, _frame: Any) -> None:
    raise Timeout


def _bad_numbers(x: Any, key: str = "") -> list[str]:
    if isinstance(x, dict):
        return [b for k, v in x.items() for b in _bad_numbers(v, str(k))]
    if isinstance(x, list):
        return [b for v in x for b in _bad_numbers(v, key)]
    if isinstance(x, (int, float)) and not isinstance(x, bool) and (
            not math.isfinite(x) or (x < 0 and not any(s in key for s in SIGNED))):
        return [f"{key}={x}"]
    return []


def _in_process(argv: list[str], limit: float) -> tuple[int, str, str, float]:
    from gpuplan.cli.main import main

    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, limit)
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except Timeout:
        code = -9
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    return code, out.getvalue(), err.getvalue(), time.perf_counter() - t0


def _in_subprocess(argv: list[str], env: dict[str, str] | None, limit: float
                   ) -> tuple[int, str, str, float]:
    e = {**os.environ, "PYTHONPATH": str(REPO / "src"), **(env or {})}
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-m", "gpuplan.cli.main", *argv], env=e,
                           capture_output=True, timeout=limit, text=True, errors="replace")
        return p.returncode, p.stdout, p.stderr, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        return -9, "", "", time.perf_counter() - t0


_CLIENT: list[Any] = []


def _web(case: Case, limit: float) -> tuple[int, str, str, float]:
    if not _CLIENT:
        from fastapi.testclient import TestClient

        from gpuplan.web.app import create_app

        _CLIENT.append(TestClient(create_app(time_limit_s=limit)))
    client = _CLIENT[0]
    assert case.web is not None
    method, url, body, headers = case.web
    kw: dict[str, Any] = {"headers": headers}
    if isinstance(body, (dict, list)) and "content-type" not in headers:
        kw["json"] = body
    elif isinstance(body, dict):
        kw["content"] = json.dumps(body)
    elif body is not None:
        kw["content"] = body
    t0 = time.perf_counter()
    r = client.request(method, url, **kw)
    took = time.perf_counter() - t0
    return r.status_code, r.text, r.headers.get("content-type", ""), took


def judge(case: Case, limit: float) -> tuple[list[str], float]:
    """The failures of one case (empty: it passed) and its time."""
    if case.web is not None:
        return _judge_web(case, limit)
    if (case.process or case.env) and not any("\x00" in a for a in case.argv):
        # (a NUL cannot reach a real process's argv; such a case runs in-process)
        code, out, err, took = _in_subprocess(case.argv, case.env, max(limit, 120.0))
    else:
        code, out, err, took = _in_process(case.argv, limit)
    bad: list[str] = []
    if code == -9:
        return [f"hang (> {limit:g} s)"], took
    if case.expect == "script_fails":  # the profiled script's own failure: its traceback,
        last = err.strip().splitlines()[-1] if err.strip() else ""  # then one line, exit 1
        ok = code == 1 and last.startswith("gpuplan: error:") and named(last, case.names) \
            and "gpuplan/" not in err.split("gpuplan: error:")[0]
        return ([] if ok else [f"script failure not reported as such (exit {code}): "
                               f"{err.strip()[-200:]}"]), took
    if "Traceback" in err:
        bad.append("traceback")
    if code == 1:
        bad.append("internal error (exit 1)")
    if case.expect == "bad":
        if code == 0:
            bad.append("exit 0 on invalid input")
        elif code == 2:
            if err.strip().count("\n") != 0:
                bad.append("more than one stderr line")
            if case.names and not named(err, case.names):
                bad.append("field not named")
            if len(err) > 600:
                bad.append(f"message of {len(err)} chars")
    elif code == 0 and "--json" in case.argv:
        bad += _check_json(out)
    elif code == 0 and case.expect != "bad" and not case.process:
        pass
    if case.expect == "ok" and code != 0:
        bad.append("valid input refused")
    if code not in (0, 2, 130) and code != 1:
        bad.append(f"exit {code}")
    for o in case.outputs:
        if code != 0 and o and os.path.exists(o) and os.path.isfile(o):
            bad.append(f"half-written {o[-40:]}")
    return [f"{b}: {err.strip()[:200]}" if b in ("field not named", "valid input refused",
                                                "internal error (exit 1)") else b
            for b in bad], took


def named(err: str, names: tuple[str, ...]) -> bool:
    """Does the message name one of the fields: the option as written (--micro-batch), its
    bare name as a word (micro-batch, micro_batch), a file's name, or an environment variable?"""
    text = err.removeprefix("gpuplan: ").removeprefix("error: ").lower()
    for n in names:
        n = n.lower()
        bare = n.lstrip("-")
        if n in text or (bare and re.search(rf"(?<![\w-]){re.escape(bare)}(?![\w-])", text)):
            return True
        if bare.replace("-", "_") in text and "-" in bare:
            return True
    return False


def _check_json(out: str) -> list[str]:
    try:
        obj = json.loads(out)
    except json.JSONDecodeError:
        return ["stdout is not one JSON object"]
    nums = _bad_numbers(obj)
    return [f"non-finite or negative JSON: {', '.join(nums[:4])}"] if nums else []


def _judge_web(case: Case, limit: float) -> tuple[list[str], float]:
    status, text, ctype, took = _web(case, limit)
    bad = []
    if took > limit + 5:
        bad.append(f"slow ({took:.1f} s)")
    if status >= 500 and status != 503:
        bad.append(f"HTTP {status}: {text[:160]}")
    if case.expect == "bad":
        if status < 400:
            bad.append(f"HTTP {status} on invalid input")
        elif "json" in ctype:
            body = json.loads(text)
            msg = json.dumps(body)[:2000].lower()
            if "error" not in body:
                bad.append("4xx without 'error'")
            if case.names and not any(n.lower() in msg for n in case.names):
                bad.append(f"field not named: {text[:160]}")
            if len(text) > 5000:
                bad.append(f"answer of {len(text)} chars")
        else:
            bad.append(f"4xx not JSON ({ctype})")
    elif case.expect == "ok" and status != 200:
        bad.append(f"valid refused: {status}")
    if status == 200 and "json" in ctype:
        nums = _bad_numbers(json.loads(text))
        if nums:
            bad.append(f"non-finite or negative JSON: {', '.join(nums[:4])}")
    return bad, took


def build(seed: int, tmp: str, per_option: int) -> list[Case]:
    rng = random.Random(seed)
    for fifo in ("fifo.png", "fifo.html"):
        os.mkfifo(Path(tmp) / fifo)
    (Path(tmp) / "ok_trace.csv").write_text(GOOD_TRACE)
    cases = (_option_cases(rng, tmp, per_option) + _conflicts(tmp) + _file_cases(tmp)
             + _env_cases(tmp) + _measure_cases(tmp) + _web_cases(rng))
    for c in cases:  # every CLI case asks for JSON (numbers checked); web cases have it
        if c.web is None and "--json" not in c.argv and c.argv[0] not in ("web",) \
                and "--" not in c.argv and c.cls != "env":
            c.argv.append("--json")
    return cases


def main_() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=4242)
    ap.add_argument("--per-option", type=int, default=3)
    ap.add_argument("--part", default="1/1", help="i/n: run every n-th case from the i-th")
    ap.add_argument("--limit", type=float, default=30.0, help="seconds per case")
    ap.add_argument("--only", default="", help="comma-separated classes")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    i, n = (int(x) for x in a.part.split("/"))
    with tempfile.TemporaryDirectory(prefix="gpuplan-adv-") as tmp:
        cases = build(a.seed, tmp, a.per_option)
        counts: dict[str, int] = {}
        for c in cases:
            counts[c.cls] = counts.get(c.cls, 0) + 1
        print(f"# {len(cases)} cases: {counts}")
        chosen = [c for k, c in enumerate(cases) if k % n == i - 1
                  and (not a.only or c.cls in a.only.split(","))]
        if a.list:
            for c in chosen:
                print(c.cls, c.expect, [x[:60] for x in c.argv])
            return
        tally: dict[str, dict[str, int]] = {}
        fails, slowest = [], 0.0
        for c in chosen:
            problems, took = judge(c, a.limit)
            slowest = max(slowest, took)
            t = tally.setdefault(c.cls, {"cases": 0, "failed": 0})
            t["cases"] += 1
            t["failed"] += bool(problems)
            for p in problems:
                fails.append(f"[{c.cls}] {' '.join(repr(x)[:50] for x in c.argv)} "
                             f"{'env=' + str(c.env)[:60] if c.env else ''}-> {p}")
        for cls, t in tally.items():
            print(f"{cls:>10}: {t['cases']:4d} cases, {t['failed']:3d} failed")
        print(f"   slowest: {slowest:.1f} s")
        for f in fails:
            print("  ", f)
        sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main_()
