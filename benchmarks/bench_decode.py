"""Measured decode TTFT/TPOT on this machine next to gpuplan's prediction from the machine's
measured profile: `gpuplan bench --only decode` (measure/decode_check.py) run and saved with
the machine and its load. Bar, fixed before measuring: TTFT and TPOT each within 25% of the
prediction.

The machine is shared: the script waits (up to --wait seconds) for a 1-minute load average
below --max-load before each attempt, runs --attempts times and records every attempt's load.
Run: PYTHONPATH=src python benchmarks/bench_decode.py [--device cpu|cuda] [--quick]
Writes benchmarks/results/decode-<date>-<device>.txt."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import time
from pathlib import Path

from gpuplan.measure.bench import parse_only, run_bench


def wait_quiet(max_load: float, wait_s: float) -> float:
    t0 = time.time()
    while os.getloadavg()[0] >= max_load and time.time() - t0 < wait_s:
        time.sleep(10)
    return os.getloadavg()[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--attempts", type=int, default=3)
    ap.add_argument("--max-load", type=float, default=1.5)
    ap.add_argument("--wait", type=float, default=600.0)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads for the whole run (profile and decode alike; 1 is "
                         "steadier on a shared machine); 0 = torch's default")
    ap.add_argument("--tag", default="", help="suffix of the results file")
    args = ap.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    lines = [f"# bench_decode {dt.datetime.now().isoformat(timespec='seconds')} {args.device}, "
             f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python "
             f"{platform.python_version()}; bar: TTFT and TPOT each within 25% of the prediction",
             "# attempt  load_1min_start  ops/step  per_op_us  ttft_meas  ttft_pred  ttft_err"
             "  tpot_meas  tpot_pred  tpot_err  floor  pass",
             "# per_op_us: eager cost per dispatched op amid the weight streams (quiet: without)"]
    for i in range(args.attempts):
        load = wait_quiet(args.max_load, args.wait)
        r = run_bench(args.device, args.quick, parse_only("decode", None))
        d = r["decode"]
        m, p = d["measured"], d["predicted"]
        lines.append(
            f"{i + 1:>9}  {load:>15.2f}  {d['ops_per_step']:>8}  "
            f"{d['eager_op_overhead_s'] * 1e6:>9.1f}  {m['ttft_s'] * 1e3:>7.1f}ms  "
            f"{p['ttft_s'] * 1e3:>7.1f}ms  {d['ttft_error_ratio']:>+8.1%}  "
            f"{m['tpot_s'] * 1e3:>7.1f}ms  {p['tpot_s'] * 1e3:>7.1f}ms  "
            f"{d['tpot_error_ratio']:>+8.1%}  {p['weight_read_floor_s'] * 1e3:>4.1f}ms  "
            f"{'PASS' if d['tpot_within_tolerance'] and d['ttft_within_tolerance'] else 'FAIL'}")
        lines.append(f"#   profile: matmul {json.dumps(r['matmul_flops_per_s'])} FLOP/s, memory "
                     f"{r['memory_bw_bytes_per_s']:.4g} B/s; {d['threads']} threads; load "
                     f"{d['load_average']}; model {d['params'] / 1e6:.1f}M params, prompt "
                     f"{d['prompt_len']}, output {d['output_len']}, {d['dtype']}; per-op cost "
                     f"without streams {d['eager_op_overhead_quiet_s'] * 1e6:.1f} us")
        print("\n".join(lines[-2:]), flush=True)
    out = Path(__file__).parent / "results" / f"decode-{dt.date.today()}-{args.device}{args.tag}.txt"
    out.write_text("\n".join(lines) + "\n")
    print(f"written {out}")


if __name__ == "__main__":
    main()
