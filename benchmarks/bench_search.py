"""How fast `gpuplan train --search` evaluates layouts (goal: >= 100,000 layouts/s on one core).

Prints evaluated layouts, seconds (excluding the final re-timing of the top 10 with the
reference model) and layouts per second for several jobs; run with
`python benchmarks/bench_search.py`.
"""

from __future__ import annotations

import platform
import statistics

from gpuplan.estimate.memory import TrainConfig
from gpuplan.estimate.search import search
from gpuplan.specs import get_device, get_model
from gpuplan.specs.cluster import default_cluster

JOBS = [
    ("llama-3-8b", "h100", 64, 512, 4096),
    ("llama-3-70b", "h100", 1024, 1024, 4096),
    ("gpt3-175b", "a100-sxm-80gb", 1024, 1536, 2048),
    ("llama-3.1-405b", "h100", 2048, 2048, 8192),
    ("mixtral-8x7b", "h100", 64, 512, 4096),
]


def main() -> None:
    print(f"machine: {platform.machine()}, python {platform.python_version()}, one process")
    rates = []
    for model, gpu, gpus, gb, seq in JOBS:
        m, c = get_model(model), default_cluster(get_device(gpu), gpus)
        base = TrainConfig(micro_batch=1, seq_len=seq, global_batch=gb, fused=True,
                           dropout=False)
        runs = [search(m, c, base, top=10) for _ in range(3)]
        best = min(runs, key=lambda r: r.seconds)
        rates.append(best.layouts_per_s)
        print(f"{model:16s} {gpus:5d} x {gpu:14s}: {best.evaluated:7,d} layouts, "
              f"{best.fitting:7,d} fit, {best.seconds:.3f} s -> {best.layouts_per_s:9,.0f}/s "
              f"(best of 3)")
    print(f"median rate: {statistics.median(rates):,.0f} layouts/s")


if __name__ == "__main__":
    main()
