"""The serving screen (closed-form steady continuous batching, `estimate.serve_rank.point`)
next to the request-level simulator's saturating throughput (`gpuplan serve --max-throughput`)
on the same latency model, KV capacity and engine limits: how much the screen behind
`advise --goal serve` and plan's options gives away. No SLO, so both run at the KV/engine cap.

Run with `PYTHONPATH=src python benchmarks/check_serve_screen.py`; results in
benchmarks/results/.
"""

from __future__ import annotations

from gpuplan.estimate.latency import step_model
from gpuplan.estimate.serve_plan import run_sim
from gpuplan.estimate.serve_rank import BLOCK_SIZE, MAX_BATCH, MAX_TOKENS, ServeLoad, screen
from gpuplan.specs.catalog import get_device, get_model
from gpuplan.specs.serving import ServeConfig

CASES = [("llama-3-8b", "h100", 1), ("llama-3-8b", "a100-80gb", 1), ("llama-3-8b", "l40s", 1),
         ("llama-3-70b", "h100", 4), ("qwen2.5-7b", "rtx-4090", 1)]


def main() -> None:
    print("model, device, tp: screen req/s (batch) | simulated max req/s (peak batch) | ratio")
    for name, dev, tp in CASES:
        m, d, cfg = get_model(name), get_device(dev), ServeConfig(tp=tp)
        o = screen(m, d, cfg, ServeLoad(512, 256, 1.0, 1e9, 1e9), 1.0)
        ctx = {"m": m, "d": d, "cfg": cfg, "sm": step_model(m, d, cfg)}
        r = run_sim(ctx, "512", "256", True, None, None, "continuous", False, 0, None, None,
                    None, MAX_BATCH, MAX_TOKENS, BLOCK_SIZE, 0.90, False)
        rps = o.requests_per_s_per_replica or 0.0
        print(f"{name}, {d.name}, tp {tp}: {rps:.2f} ({o.batch}) | "
              f"{r['requests_per_s']:.2f} ({r['batch']}) | {rps / r['requests_per_s']:.2f}")


if __name__ == "__main__":
    main()
