"""Tables and the measured roofline chart of `gpuplan bench`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from gpuplan import units
from gpuplan.report.output import column_scale, num, table
from gpuplan.units import DTYPE_BYTES

ELEM_BYTES = DTYPE_BYTES


def _s(x: float | None) -> str:
    return units.format_seconds(x) if x is not None else "-"


def _bw(x: float | None) -> str:
    return units.format_bandwidth(x) if x is not None else "-"


def _mem(x: int | None) -> str:
    return units.format_bytes(x) if x is not None else "n/a"


def _matmul(con: Console, r: dict[str, Any]) -> None:
    done = [x for x in r["matmul"].values() if "skipped" not in x]
    fu, fs = column_scale([x["sustained_flops_per_s"] for x in done] +
                          [x["best_flops_per_s"] for x in done], "FLOP/s")
    t = table("matmul, sustained and best in " + fu,
              [("dtype", "left"), ("m x n x k", "right"), ("sustained", "right"),
               ("rounds", "right"), ("spread", "right"), ("best", "right"), ("n", "right"),
               ("sizes", "right"), ("note", "left")],
              caption="m x n x k = the best size; sustained = that size re-measured in rounds, "
                      "the best round's median (mamf-finder's max); spread = (best - worst) / "
                      "best over the rounds; best = best single sample; n = samples; sizes = "
                      "sizes tried")
    for dt, x in r["matmul"].items():
        if "skipped" in x:
            t.add_row(dt, "-", "-", "-", "-", "-", "-", "0", x["skipped"])
            continue
        b = x["best_size"]
        sk = x["skipped_sizes"]
        note = f"{len(sk)} sizes skipped ({sk[0].split(': ', 1)[1][:40]}...)" if sk else ""
        rep = x.get("repeats") or {}
        if rep and not rep["stable"]:
            note = "UNSTABLE: rounds disagree (busy machine?); " + note
        t.add_row(dt, f"{b['m']}x{b['n']}x{b['k']}", num(x["sustained_flops_per_s"], fs),
                  str(rep.get("rounds", "-")),
                  f"{rep['spread']:.0%}" if rep else "-",
                  num(x["best_flops_per_s"], fs), str(x["n"]),
                  str(len(x["sizes"])), note)
    con.print(t)


def _memory(con: Console, r: dict[str, Any]) -> None:
    m = r["memory"]
    t = table(f"memory: buffers of {units.format_bytes(m['buffer_bytes'])}, bytes = read + "
              f"written ({m['statistic']})",
              [("kernel", "left"), ("bytes / call", "right"), ("median", "right"),
               ("bandwidth", "right"), ("best", "right"), ("n", "right")])
    rows = [m["copy"], m["triad"]]
    rows += [dict(v, kind=k) for k, v in m.get("host_device", {}).items() if isinstance(v, dict)]
    for x in rows:
        t.add_row(x["kind"], units.format_bytes(x["bytes"]), _s(x["time_s"]),
                  _bw(x["bw_bytes_per_s"]), _bw(x["best_bw_bytes_per_s"]), str(x["stats"]["n"]))
    con.print(t)
    s = table("working-set sweep (copy; plateaus = cache levels, then DRAM/HBM)",
              [("working set", "right"), ("bandwidth", "right"), ("note", "left")])
    for x in m["sweep"]:
        s.add_row(units.format_bytes(x["working_set_bytes"], binary=True), _bw(x["bw_bytes_per_s"]),
                  "< 3x launch overhead: dispatch-bound" if x.get("overhead_bound") else "")
    con.print(s)


def _fusion(con: Console, r: dict[str, Any]) -> None:
    t = table(f"fusion: eager vs torch.compile, measured vs predicted (roofline of "
              f"{r.get('prediction_device')})",
              [("chain", "left"), ("variant", "left"), ("measured", "right"),
               ("predicted", "right"), ("peak alloc", "right"), ("kernels (model)", "right")])
    rows = [(c["name"], c, ("eager", "compiled")) for c in r.get("fusion", [])]
    if "attention" in r:
        a = r["attention"]
        sh = a["shape"]
        rows.append((f"attention b{sh['batch']} h{sh['heads']} s{sh['seq']} d{sh['head_dim']}",
                     a, ("naive", "sdpa")))
    for name, row, (va, vb) in rows:
        for v in (va, vb):
            x = row[v]
            if "skipped" in x:
                t.add_row(name, v, "skipped", "", "", x["skipped"][:60])
                continue
            t.add_row(name, v, _s(x["time_s"]), _s(x["predicted_time_s"]), _mem(x["peak_bytes"]),
                      str(x["predicted_kernels"]))
        if "speedup_measured" in row:
            t.add_row("", "speedup", f"{row['speedup_measured']:.2f}x",
                      f"{row['speedup_predicted']:.2f}x", "", "")
    con.print(t)


def _collectives(con: Console, r: dict[str, Any]) -> None:
    t = table(f"collectives ({r.get('collectives_launch', '')}); time = max over ranks of the "
              f"median; busbw = algbw x bus factor (nccl-tests)",
              [("op", "left"), ("bytes", "right"), ("time", "right"), ("algbw", "right"),
               ("busbw", "right"), ("rank skew", "right")])
    for op, rows in r["collectives"].items():
        for x in rows:
            t.add_row(op, units.format_bytes(x["bytes"], binary=True), _s(x["time_s"]),
                      _bw(x["algbw_bytes_per_s"]), _bw(x["busbw_bytes_per_s"]),
                      _s(x["rank_skew_s"]))
    con.print(t)


def _decode(con: Console, r: dict[str, Any]) -> None:
    d = r["decode"]
    t = table(f"decode through transformers: {d['params'] / 1e6:.1f}M-param Llama decoder, "
              f"{d['dtype']}, batch 1, prompt {d['prompt_len']}, output {d['output_len']}, "
              f"{d['threads']} threads; predicted from this run's profile "
              f"({d['prediction_device']})",
              [("", "left"), ("measured", "right"), ("predicted", "right"), ("error", "right")],
              caption=f"eager per-op cost {_s(d['eager_op_overhead_s'])} x "
                      f"{d['ops_per_step']} ops per step ({d['eager_overhead_what']}); "
                      f"weight-read floor {_s(d['predicted']['weight_read_floor_s'])}; "
                      f"load average {d['load_average']['start']} -> "
                      f"{d['load_average']['end']}")
    for k in ("ttft", "tpot"):
        t.add_row(k.upper(), _s(d["measured"][f"{k}_s"]), _s(d["predicted"][f"{k}_s"]),
                  f"{d[f'{k}_error_ratio']:+.1%}")
    con.print(t)
    for k in ("ttft", "tpot"):
        ok = "within" if d[f"{k}_within_tolerance"] else "NOT within"
        con.print(f"decode {k.upper()} {ok} {d['tolerance_ratio']:.0%} of its prediction")


def render(con: Console, r: dict[str, Any]) -> None:
    ident = r["identity"]
    con.print(f"[bold]{r['device']}[/bold] ({ident['kind']}; torch {ident['torch']}, "
              f"{ident['torch_threads']} threads of {ident['cpu_cores']} cores; load average "
              f"{ident.get('load_average_start')} -> {ident.get('load_average_end')}; "
              f"{'quick' if r['quick'] else 'full'} run, {r['runtime_s']:.1f} s)")
    if "matmul" in r:
        _matmul(con, r)
    if "memory" in r:
        _memory(con, r)
    if "launch" in r:
        d = r["sync_demo"]
        con.print(f"launch overhead: {_s(r['launch_overhead_s'])} per op ({r['launch']['what']})."
                  f"\nsync demo, {d['work']}: synchronised {_s(d['synced_s'])}, host timer "
                  f"without sync {_s(d['unsynced_s'])} ({d['ratio']:.2f}x)")
    if "fusion" in r or "attention" in r:
        _fusion(con, r)
    if r.get("collectives"):
        _collectives(con, r)
    if "decode" in r:
        _decode(con, r)
    cmp = r.get("compare")
    if cmp is not None:
        if cmp["catalog_device"] is None:
            con.print(f"compare: {cmp['note']}; measured numbers only")
        else:
            t = table(f"measured vs catalog {cmp['catalog_device']} ({cmp['note']})",
                      [("", "left"), ("measured", "right"), ("catalog", "right"),
                       ("measured / catalog", "right")])
            for x in cmp["rows"]:
                f = units.format_flops_per_s if x["unit"] == "FLOP/s" else units.format_bandwidth
                t.add_row(x["what"], f(x["measured"]), f(x["catalog"]) if x["catalog"] else "-",
                          f"{x['ratio']:.1%}" if x["ratio"] is not None else "-")
            con.print(t)
    for u in r.get("unstable") or []:
        con.print(f"[bold]warning[/bold]: {u['what']}: {u['reason']}")
    if r.get("profile_path"):
        con.print(f"profile saved: {r['profile_path']} (use with --profile)")


def measured_chart(r: dict[str, Any], path: Path) -> Path:
    """The measured roofline: measured roofs per dtype and bandwidth, each matmul size and
    each fusion/attention case as a point at its attained FLOP/s."""
    from gpuplan.measure.profile import measured_device
    from gpuplan.report.plot import roofline_chart

    dev = measured_device(r)
    bw = r["memory_bw_bytes_per_s"]
    pts = []
    for dt, x in r.get("matmul", {}).items():
        best = x.get("best_size", {})
        for p in x.get("sizes", []):
            nbytes = (p["m"] * p["k"] + p["k"] * p["n"] + p["m"] * p["n"]) * ELEM_BYTES[dt]
            inten = p["flops"] / nbytes
            top = all(p[k] == best.get(k) for k in "mnk")
            pts.append({"name": f"{dt} {p['m']}x{p['n']}x{p['k']}", "intensity": inten,
                        "attained": p["flops_per_s"], "share": 0.02 if top else 0.01,
                        "label": f"{dt} best {p['m']}x{p['n']}x{p['k']}: "
                                 f"{units.format_flops_per_s(p['flops_per_s'])}",
                        "bound": "compute" if inten * bw >= p["flops_per_s"] else "memory"})
    dtypes = tuple(dt for dt in ("fp8", "bf16", "fp16", "tf32", "fp32", "fp64", "int8")
                   if dt in r["matmul_flops_per_s"])
    title = f"measured roofline of {r['device']} ({r['date']}; points: matmul sizes)"
    return roofline_chart(dev, pts, path, title, label_top=len(dtypes), dtypes=dtypes,
                          bandwidth=bw, legend=("matmul size, under its dtype's roof",
                                                "matmul size, left of the ridge"))
