"""How long `gpuplan advise` takes per goal (goal: a few seconds on one core), and what it picks.

Run with `PYTHONPATH=src python benchmarks/bench_advise.py`; results with the machine go in
benchmarks/results/.
"""

from __future__ import annotations

import platform
import time

from gpuplan.estimate.advise import advise, make_goal
from gpuplan.specs import get_model
from gpuplan.specs.catalog import device_catalog
from gpuplan.specs.prices import load_prices

JOBS = [("llama-3.1-405b", "pretrain"), ("llama-3-70b", "pretrain"), ("llama-3-8b", "finetune"),
        ("llama-3-8b", "lora"), ("llama-3-8b", "qlora"), ("llama-3-70b", "qlora")]


def main() -> None:
    print(f"machine: {platform.machine()}, python {platform.python_version()}, one process")
    prices = load_prices()
    devices = list(device_catalog())
    for model, goal in JOBS:
        m = get_model(model)
        t0 = time.perf_counter()
        r = advise(m, devices, make_goal(m, goal), lambda n: prices.usd(n, "on_demand"))
        dt = time.perf_counter() - t0
        best = r["best"]
        pick = (f"{best['gpus']:,} x {best['device']}, ${best['cost_usd']:,.0f}, "
                f"{best['time_days']:.3g} days" if best else "nothing meets the goal")
        top3 = ", ".join(o["device"] for o in r["ranking"][:3])
        print(f"{model:15s} {goal:9s}: {dt:5.2f} s; best {pick}; top 3: {top3}")


if __name__ == "__main__":
    main()
