"""Latency of the web API against a real `gpuplan web` server on loopback, next to the same
command run in-process without HTTP (what the API adds: validation, argv, HTTP, JSON).

Run with `PYTHONPATH=src python benchmarks/bench_web.py`; prints the median and p90 of N calls
per request. The machine is shared: run it when idle and say so with the result.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

from gpuplan.cli.main import main as cli_main

REQUESTS = [
    ("memory", {"model": "llama-3-8b", "gpu": "h100", "micro_batch": 2, "zero": 3, "dp": 8}),
    ("memory", {"model": "llama-3-70b", "gpu": "h100", "mode": "infer", "tp": 4, "batch": 8,
                "context": 8192}),
    ("roofline", {"model": "llama-3-8b", "gpu": "h100", "seq_len": 4096}),
    ("train", {"model": "llama-3-8b", "gpu": "h100", "gpus": 8, "scaling": True}),
    ("train", {"model": "llama-3-70b", "gpu": "h100", "gpus": 256, "global_batch": 1024,
               "search": True}),
]
N = 15


def _argv(cmd: str, body: dict) -> list[str]:
    out = [cmd, body["model"]]
    for k, v in body.items():
        if k == "model":
            continue
        out += [f"--{k.replace('_', '-')}"] if v is True else [f"--{k.replace('_', '-')}", str(v)]
    return [*out, "--json"]


def _time(fn: object, n: int = N) -> tuple[float, float]:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return statistics.median(ts), ts[int(0.9 * (len(ts) - 1))]


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan.cli.main", "web", "--port", str(port)],
                            env=os.environ.copy(), stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        with contextlib.suppress(OSError):
            urllib.request.urlopen(url + "/api/commands", timeout=1)
            break
        time.sleep(0.1)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}; {N} calls each, median / p90")
    try:
        for cmd, body in REQUESTS:
            data = json.dumps(body).encode()

            def http(cmd: str = cmd, data: bytes = data) -> None:
                req = urllib.request.Request(f"{url}/api/{cmd}", data=data,
                                             headers={"content-type": "application/json"})
                urllib.request.urlopen(req, timeout=60).read()

            def direct(cmd: str = cmd, body: dict = body) -> None:
                with contextlib.redirect_stdout(io.StringIO()):
                    cli_main(_argv(cmd, body))

            http()
            direct()  # warm both
            h, d = _time(http), _time(direct)
            print(f"{cmd:9s} {json.dumps(body)[:70]:72s} API {h[0] * 1e3:7.1f} / {h[1] * 1e3:7.1f} "
                  f"ms   in-process {d[0] * 1e3:7.1f} / {d[1] * 1e3:7.1f} ms   "
                  f"overhead {(h[0] - d[0]) * 1e3:+.1f} ms")
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
