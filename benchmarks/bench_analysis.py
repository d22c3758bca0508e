"""How long analysis takes: the analytic path for a 405B model (goal: well under a second) and
tracing a 7B model on the meta device. Prints figures; run with `python benchmarks/bench_analysis.py`.
"""

from __future__ import annotations

import platform
import statistics
import time


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def main() -> None:
    from gpuplan.estimate.analysis import analyze
    from gpuplan.ops.transformer import build_training
    from gpuplan.specs import get_device, get_model

    print(f"machine: {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")
    m405, h100 = get_model("llama-3.1-405b"), get_device("h100")
    med, best = timed(lambda: build_training(m405, 1, 8192), repeat=20)
    print(f"build_training llama-3.1-405b (126 layers), batch 1 x 8192: median {med * 1e3:.2f} ms,"
          f" best {best * 1e3:.2f} ms (n=20)")
    med, best = timed(lambda: analyze(m405, h100, "train", 1, 8192, fused=True), repeat=20)
    print(f"roofline + fusion llama-3.1-405b on H100: median {med * 1e3:.2f} ms, "
          f"best {best * 1e3:.2f} ms (n=20)")
    try:
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        print("tracing: skipped (torch/transformers not installed)")
        return
    import gpuplan

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
                      num_attention_heads=32, vocab_size=32000)
    with torch.device("meta"):
        model = LlamaForCausalLM(cfg)
    ids = torch.zeros(1, 2048, dtype=torch.long)
    med, best = timed(lambda: gpuplan.trace(model, input_ids=ids, labels=ids), repeat=3)
    print(f"trace llama-2-7b shape on meta (forward + backward), batch 1 x 2048: median "
          f"{med:.2f} s, best {best:.2f} s (n=3)")


if __name__ == "__main__":
    main()
