"""Measured decode TTFT/TPOT on this machine next to gpuplan's prediction from the machine's
measured profile (matmul FLOP/s, memory bandwidth and launch overhead from `gpuplan bench`,
measured in the same run). Bar: TPOT within 25% of the prediction.

The prediction uses the serving latency model with eager-PyTorch kernel counts (the model runs
through Hugging Face `transformers`, unfused) and no engine factors: the measured profile is the
efficiency. Run: PYTHONPATH=src python benchmarks/bench_decode.py [--device cpu|cuda] [--quick]
Writes benchmarks/results/decode-<date>-<device>.txt."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
from pathlib import Path

from gpuplan.estimate.efficiency import efficiency_from_profile
from gpuplan.estimate.latency import latency, step_model
from gpuplan.measure.bench import run_bench
from gpuplan.measure.decode import DECODER_CONFIG, measure_decode
from gpuplan.measure.profile import match_catalog
from gpuplan.specs.catalog import get_device
from gpuplan.specs.hf_config import spec_from_hf_dict
from gpuplan.specs.serving import ServeConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--output", type=int, default=64)
    args = ap.parse_args()
    dtype = "fp32" if args.device == "cpu" else "bf16"
    prof = run_bench(args.device, args.quick, ("matmul", "memory", "launch"))
    carrier = match_catalog(prof["identity"]) or get_device(
        "epyc-9654" if args.device == "cpu" else "h100")
    eff = efficiency_from_profile(prof, carrier)
    spec = spec_from_hf_dict(DECODER_CONFIG, "decoder-104m")
    cfg = ServeConfig(weight_dtype=dtype, kv_dtype=dtype, act_dtype=dtype, fused=False)
    sm = step_model(spec, carrier, cfg, eff)
    pred = latency(sm, 1, args.prompt, args.output)
    meas = measure_decode(args.device, args.prompt, args.output, 1, dtype)
    lines = [
        f"# bench_decode {dt.date.today()} {args.device} ({prof['device']}), "
        f"{meas['threads']} threads, Python {platform.python_version()}, load average "
        f"{prof['identity'].get('load_average_start')} -> {os.getloadavg()}",
        f"# model: {meas['params'] / 1e6:.1f}M-param Llama decoder from a transformers config "
        f"(random weights), {dtype}, batch 1, prompt {args.prompt}, output {args.output}",
        f"# profile: matmul {json.dumps(prof['matmul_flops_per_s'])} FLOP/s, memory "
        f"{prof['memory_bw_bytes_per_s']:.4g} B/s, launch {prof.get('launch_overhead_s')} s; "
        f"rates applied to catalog carrier {carrier.name}",
        f"# kernels per layer (eager, from ops/decode.py): {sm.kernels_per_layer:.1f}",
        f"{'quantity':<8} {'measured':>12} {'predicted':>12} {'error':>8}",
    ]
    ok = True
    for k in ("ttft_s", "tpot_s"):
        m, p = meas[k], getattr(pred, k)
        err = p / m - 1
        lines.append(f"{k:<8} {m * 1e3:>10.2f}ms {p * 1e3:>10.2f}ms {err:>+8.1%}")
        if k == "tpot_s":
            ok = abs(err) <= 0.25
    lines.append(f"TPOT within 25%: {'PASS' if ok else 'FAIL'}; runs: ttft "
                 f"{[round(x * 1e3, 2) for x in meas['ttft_runs_s']]} ms, tpot "
                 f"{[round(x * 1e3, 2) for x in meas['tpot_runs_s']]} ms")
    print("\n".join(lines))
    out = Path(__file__).parent / "results" / f"decode-{dt.date.today()}-{args.device}.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
