"""Compare gpuplan's training step-time model with published training runs.

For every record in benchmarks/training_runs.py: build the cluster and TrainConfig, call
gpuplan.estimate.training.step_time, convert the prediction into the published metric with the
source's own FLOP-counting convention, and print published vs predicted with the signed error.
Statistics use each record's primary metric; secondary metrics are printed but not counted.

    PYTHONPATH=src python benchmarks/validate_training.py [--split calibration|validation|all]
        [--lofo] [--family NAME ...] [--json] [--markdown] [--verbose] [--csv PATH]

--split: whole families. `calibration` (default): training_runs.py and
data/training_calibration.csv, the only rows constants are fitted on. `validation`: the hold-out
families of data/training_validation.csv, fixed before modelling; score them once, never tune
on them. --lofo: leave one calibration family out at a time, fit the end-to-end factor on the
others (fit_training.py), predict the one left out. Each run is predicted with its framework
profile (record field `framework`). --json prints one JSON document instead of the table.
--markdown prints only the summary table (for the README). --csv cross-checks the published values against
shared/data/training_runs.csv (found automatically when the checkout sits next to shared/).

Error % = (predicted - published) / published. "speed %" is the same comparison expressed as
throughput (for time and GPU-hour metrics the sign flips): positive = gpuplan predicts a
faster run than was published.

If gpuplan's memory model says a published configuration does not fit, the row is still timed
(on a copy of the device whose capacity check is lifted; capacity plays no part in the timing)
and flagged "mem-miss": the source ran it, so the memory model over-estimates there.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if (HERE.parent / "src").is_dir():
    sys.path.insert(0, str(HERE.parent / "src"))

from training_runs import (  # noqa: E402
    CONVENTIONS,
    FAMILIES,
    OWN_CSV_RUN_IDS,
    RUNS,
    SKIPPED,
    Metric,
    TrainingRun,
    memory_not_scored,
    run_device,
)

from gpuplan.estimate.accuracy import REGIMES, training_regime  # noqa: E402
from gpuplan.estimate.efficiency import Efficiency, framework_efficiency  # noqa: E402
from gpuplan.estimate.memory import TrainConfig  # noqa: E402
from gpuplan.estimate.training import StepResult, step_time  # noqa: E402
from gpuplan.specs.catalog import get_device  # noqa: E402
from gpuplan.specs.cluster import default_cluster  # noqa: E402
from gpuplan.specs.device import Device  # noqa: E402
from gpuplan.specs.framework import (  # noqa: E402
    Framework,
    get_framework,
    resolve_framework,
)

TIME_CONVENTIONS = ("gpu-hours", "wall-days", "wall-minutes")


# ---- split --------------------------------------------------------------------------------

def split_of() -> dict[str, str]:
    """run_id -> 'calibration' | 'validation', as each record names it (the validation rows are
    whole hold-out families in benchmarks/data/training_validation.csv)."""
    return {r.run_id: r.split for r in RUNS}


# ---- conversion ---------------------------------------------------------------------------

def megatron_eq3_flops(run: TrainingRun, global_batch: int) -> float:
    """Narayanan et al. 2021 eq. 3, FLOPs per iteration (with recompute)."""
    m, s = run.model, int(run.train["seq_len"])
    h, layers, v = m.hidden_size, m.num_layers, m.vocab_size
    return 96 * global_batch * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))


def convert(run: TrainingRun, metric: Metric, res: StepResult) -> float:
    """The prediction expressed in `metric`'s units and convention."""
    step = res.step_time_s
    assert step
    gpus = run.num_gpus
    tps = res.tokens_per_s or 0.0
    m, s = run.model, int(run.train["seq_len"])
    c = metric.convention
    if c == "megatron-eq3":
        return megatron_eq3_flops(run, res.global_batch) / gpus / step / 1e12
    if c == "llmfoundry-mfu":  # collect_results.py: (3 flops_per_seq + 3 attn) * seq/s
        n = m.params()
        per_seq = 3 * 2 * n * s + 3 * m.num_layers * 2 * 2 * m.hidden_size * s * s
        peak = get_device(run.device).matmul_peak("bf16")
        return 100 * per_seq * (res.global_batch / step) / (gpus * peak)
    if c == "palm-mfu":  # PaLM App. B: 6N + 12 L H Q T per token
        per_tok = 6 * m.params() + 12 * m.num_layers * m.num_heads * m.head_size * s
        peak = get_device(run.device).matmul_peak("bf16")
        return 100 * per_tok * tps / (gpus * peak)
    if c == "library-hfu":
        return 100 * (res.hfu or 0.0)
    if c == "tokens-per-gpu":
        return tps / gpus
    if c == "model-tflops":  # PaLM App. B counting, in TFLOP/s per GPU
        per_tok = 6 * m.params() + 12 * m.num_layers * m.num_heads * m.head_size * s
        return per_tok * tps / gpus / 1e12
    assert metric.tokens, f"{run.run_id}: {c} needs the run's token count"
    wall = metric.tokens / tps
    if c == "gpu-hours":
        return wall * gpus / 3600
    if c == "wall-days":
        return wall / 86400
    if c == "wall-minutes":
        return wall / 60
    raise ValueError(f"{run.run_id}: unknown convention {c!r} (known: {', '.join(CONVENTIONS)})")


# ---- evaluation ---------------------------------------------------------------------------

@dataclass
class Row:
    run: TrainingRun
    metric: Metric
    split: str
    predicted: float | None = None
    fits_as_given: bool = True
    note: str = ""
    result: StepResult | None = field(default=None, repr=False)

    @property
    def error_pct(self) -> float | None:
        if self.predicted is None:
            return None
        return 100 * (self.predicted - self.metric.value) / self.metric.value

    @property
    def speed_pct(self) -> float | None:
        """Predicted vs published throughput: positive = gpuplan predicts faster."""
        if self.predicted is None or self.predicted <= 0:
            return None
        ratio = self.predicted / self.metric.value
        if self.metric.convention in TIME_CONVENTIONS:
            ratio = 1 / ratio
        return 100 * (ratio - 1)


def run_framework(run: TrainingRun, auto: bool = False) -> tuple[Framework, TrainConfig]:
    """The stack and job `run` is predicted with, as `gpuplan train` sets them up: its family's
    framework profile, named (`--framework`); or (`auto`) no framework, only the layout and
    `--fused` (the row's own kernels where it states them), the stack inferred from the layout
    (specs.framework.auto_framework)."""
    cfg = TrainConfig(**run.train)
    if auto:
        cfg = replace(cfg, fused=run.train.get("fused", True))
        fw = resolve_framework(None, cfg).with_overlap(run.overlap) \
            .with_attention_kernel(run.attention_kernel)
        return fw, fw.apply(cfg, named=False)
    fw = get_framework(run.framework).with_overlap(run.overlap) \
        .with_attention_kernel(run.attention_kernel)
    return fw, fw.apply(cfg, named=True)


def run_efficiency(run: TrainingRun, device: Device,
                   end_to_end: float | Mapping[str, float] | None = None,
                   auto: bool = False) -> Efficiency:
    """The efficiency gpuplan uses for `run`: its framework profile's attention kernel and
    overlaps on the device's measured ceilings, with the end-to-end factor given (one value, or
    one per stack class; default: the fitted END_TO_END_BY_STACK of the profile's class)."""
    return framework_efficiency(device, run_framework(run, auto)[0], end_to_end)


def evaluate(run: TrainingRun, efficiency: Callable[[Device], Efficiency] | None = None,
             end_to_end: float | Mapping[str, float] | None = None, auto: bool = False
             ) -> tuple[StepResult | None, bool, str]:
    """Step time of `run`. When gpuplan's memory model rejects a configuration that the source
    ran, time it anyway on a copy of the device with the capacity check lifted (capacity is
    used only for the fit test, never in the timing) and say so."""
    device = run_device(run.device)
    _, cfg = run_framework(run, auto)
    cluster = default_cluster(device, run.num_gpus, run.gpus_per_node, **run.cluster)
    eff = efficiency(device) if efficiency else run_efficiency(run, device, end_to_end, auto)
    res = step_time(run.model, cluster, cfg, eff)
    if res.fits:
        return res, True, ""
    need = res.memory.total_bytes / 2**30
    cap = res.memory.capacity_bytes / 2**30
    roomy = device.model_copy(update={"memory_bytes": 10**15, "usable_memory_bytes": None})
    cluster = default_cluster(roomy, run.num_gpus, run.gpus_per_node, **run.cluster)
    retry = step_time(run.model, cluster, cfg, eff)
    note = (f"memory model: {need:.1f} GiB > {cap:.1f} GiB, but the published run fit; "
            "timed with the capacity check lifted")
    return (retry if retry.step_time_s else None), False, note


def run_all(runs: list[TrainingRun] | tuple[TrainingRun, ...], splits: dict[str, str],
            efficiency: Callable[[Device], Efficiency] | None = None,
            end_to_end: float | Mapping[str, float] | None = None,
            auto: bool = False) -> list[Row]:
    rows = []
    for run in runs:
        res, fits, note = evaluate(run, efficiency, end_to_end, auto)
        for metric in run.metrics:
            row = Row(run, metric, splits[run.run_id], fits_as_given=fits, note=note,
                      result=res)
            if res is not None and res.step_time_s:
                row.predicted = convert(run, metric, res)
            rows.append(row)
    return rows


# ---- statistics ---------------------------------------------------------------------------

def _percentile(xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(xs)
    if not s:
        return math.nan
    k = (len(s) - 1) * q / 100
    lo, hi = math.floor(k), math.ceil(k)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats(rows: list[Row]) -> dict[str, Any]:
    errs = [abs(r.error_pct) for r in rows if r.error_pct is not None]
    speed = [r.speed_pct for r in rows if r.speed_pct is not None]
    return {
        "rows": len(rows), "predicted": len(errs),
        "no_prediction": sum(1 for r in rows if r.predicted is None),
        "memory_model_misses": sum(1 for r in rows if not r.fits_as_given
                                   and not memory_not_scored(r.run)),
        "median_abs_error_pct": _percentile(errs, 50) if errs else None,
        "p90_abs_error_pct": _percentile(errs, 90) if errs else None,
        "max_abs_error_pct": max(errs) if errs else None,
        "median_speed_bias_pct": _percentile(speed, 50) if speed else None,
    }


def summary(rows: list[Row]) -> dict[str, Any]:
    primary = [r for r in rows if r.metric.primary]
    fams = [f for f in FAMILIES if any(r.run.family == f for r in primary)]
    return {"all": stats(primary),
            "families": {f: stats([r for r in primary if r.run.family == f]) for f in fams}}


# ---- output -------------------------------------------------------------------------------

def _fmt(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1f}"


def print_table(rows: list[Row]) -> None:
    w = max(len(r.run.run_id) for r in rows)
    mw = max(len(f"{r.metric.column} ({r.metric.convention})") for r in rows)
    print(f"{'run_id':<{w}}  {'metric':<{mw}} {'published':>10} {'predicted':>10} "
          f"{'error%':>7} {'speed%':>7}  flags")
    for r in rows:
        flags = []
        if not r.metric.primary:
            flags.append("secondary")
        if not r.fits_as_given and memory_not_scored(r.run):
            flags.append(memory_not_scored(r.run))
        elif not r.fits_as_given:
            flags.append("mem-miss" if r.predicted is not None else "mem-miss: not timed")
        name = f"{r.metric.column} ({r.metric.convention})"
        print(f"{r.run.run_id:<{w}}  {name:<{mw}} {_fmt(r.metric.value):>10} "
              f"{_fmt(r.predicted):>10} {_pct(r.error_pct):>7} {_pct(r.speed_pct):>7}  "
              f"{', '.join(flags)}")


def markdown(summ: dict[str, Any], title: str) -> str:
    lines = [f"{title}", "",
             "| family | rows | median abs error % | p90 abs error % | median speed bias % |"
             " memory-model misses |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]

    def line(name: str, s: dict[str, Any]) -> str:
        return (f"| {name} | {s['predicted']}/{s['rows']} | {_fmt(s['median_abs_error_pct'], 3)}"
                f" | {_fmt(s['p90_abs_error_pct'], 3)} | {_pct(s['median_speed_bias_pct'])} |"
                f" {s['memory_model_misses']} |")

    for fam, s in summ["families"].items():
        lines.append(line(fam, s))
    lines.append(line("**all**", summ["all"]))
    return "\n".join(lines)


def print_summary(summ: dict[str, Any]) -> None:
    a = summ["all"]
    print(f"\nrows (primary metric): {a['rows']}, predicted {a['predicted']}, "
          f"no prediction {a['no_prediction']}, memory-model misses {a['memory_model_misses']}")
    print(f"median |error| {_fmt(a['median_abs_error_pct'], 3)} %, 90th percentile "
          f"{_fmt(a['p90_abs_error_pct'], 3)} %, max {_fmt(a['max_abs_error_pct'], 3)} %, "
          f"median speed bias {_pct(a['median_speed_bias_pct'])} % (+ = predicted faster)")
    w = max(len(f) for f in summ["families"])
    print(f"\n{'family':<{w}}  {'n':>4} {'med|err|%':>9} {'p90|err|%':>9} {'speed bias%':>11}"
          f" {'mem-miss':>8}")
    for fam, s in summ["families"].items():
        print(f"{fam:<{w}}  {s['predicted']:>4} {_fmt(s['median_abs_error_pct'], 3):>9} "
              f"{_fmt(s['p90_abs_error_pct'], 3):>9} {_pct(s['median_speed_bias_pct']):>11} "
              f"{s['memory_model_misses']:>8}")


def row_json(r: Row) -> dict[str, Any]:
    res = r.result
    out: dict[str, Any] = {
        "run_id": r.run.run_id, "family": r.run.family, "split": r.split,
        "metric": r.metric.column, "convention": r.metric.convention,
        "primary": r.metric.primary, "published": r.metric.value, "predicted": r.predicted,
        "error_pct": r.error_pct, "speed_pct": r.speed_pct,
        "fits_as_given": r.fits_as_given, "note": r.note,
        "device": r.run.device, "gpus": r.run.num_gpus, "train": r.run.train,
        "inferred": list(r.run.inferred),
    }
    if res is not None and res.step_time_s:
        out.update({
            "step_time_s": res.step_time_s, "tokens_per_s_per_gpu": (res.tokens_per_s or 0)
            / r.run.num_gpus, "mfu": res.mfu, "hfu": res.hfu, "dominant": res.dominant,
            "bubble_fraction": res.bubble_fraction,
            "breakdown_share": {k: v / res.step_time_s for k, v in res.breakdown.items()},
            "memory_gib": res.memory.total_bytes / 2**30,
        })
    return out


# ---- csv cross-check ----------------------------------------------------------------------

def find_csv() -> Path | None:
    env = os.environ.get("GPUPLAN_SHARED_DATA")
    candidates = [Path(env) / "training_runs.csv"] if env else []
    for base in (HERE.parent, *HERE.parents):
        candidates += [base / "shared" / "data" / "training_runs.csv",
                       base.parent / "shared" / "data" / "training_runs.csv"]
    return next((p for p in candidates if p.is_file()), None)


def _first_number(cell: str) -> float | None:
    m = re.search(r"[-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?", cell or "")
    return float(m.group(0).replace(",", "")) if m else None


def check_csv(path: Path) -> list[str]:
    """Published values in RUNS that disagree with the csv's cell (first number in it)."""
    table = {r["run_id"]: r for r in csv.DictReader(path.open())}
    problems = []
    known = {r.run_id for r in RUNS} | {s.run_id for s in SKIPPED}
    problems += [f"csv row {rid} is neither modelled nor skipped" for rid in table
                 if rid not in known]
    for run in RUNS:
        if run.run_id in OWN_CSV_RUN_IDS:
            continue
        row = table.get(run.run_id)
        if row is None:
            problems.append(f"{run.run_id}: not in {path.name}")
            continue
        for m in run.metrics:
            cell = row.get(m.column, "")
            got = _first_number(cell)
            want = m.value
            if run.run_id.startswith("flashattn-train"):  # csv gives tokens/s per 8-GPU node
                want = m.value * 8 / 1e3
            if got is None or not math.isclose(got, want, rel_tol=1e-3):
                problems.append(f"{run.run_id}: {m.column} = {want:g} here, {cell!r} in csv")
    return problems


def library_version() -> dict[str, Any]:
    """gpuplan commit of this checkout (read-only git queries) and whether src/ has edits."""
    import subprocess
    root = HERE.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "src_modified": None}
    return {"commit": head or None, "src_modified": bool(dirty)}


# ---- main ---------------------------------------------------------------------------------

def print_lofo(as_markdown: bool) -> int:
    from fit_training import (
        fit_classes,
        grid_errors,
        lofo,
        lofo_rows,
        lofo_rows_by,
        objective,
        row_labels,
    )

    tables = grid_errors()
    res = lofo(tables)
    fams = [r.family for r in res]
    fitted = fit_classes(tables, fams)
    if as_markdown:
        print("| family (left out) | rows | stack class: end-to-end fitted on the others | "
              "median abs error % | p90 abs error % | max abs error % |")
        print("| --- | ---: | --- | ---: | ---: | ---: |")
    else:
        print(f"{'family (left out)':<28} {'n':>4} {'e2e':>18} {'med|err|%':>9} "
              f"{'p90|err|%':>9} {'max|err|%':>9}")
    for r in res:
        e2e = ", ".join(f"{c} {e:.2f}" for c, e in r.end_to_end.items())
        if as_markdown:
            print(f"| {r.family} | {r.n} | {e2e} | {r.median_abs_error_pct:.1f} | "
                  f"{r.p90_abs_error_pct:.1f} | {r.max_abs_error_pct:.1f} |")
        else:
            print(f"{r.family:<28} {r.n:>4} {e2e:>18} {r.median_abs_error_pct:>9.1f}"
                  f" {r.p90_abs_error_pct:>9.1f} {r.max_abs_error_pct:>9.1f}")
    lo = [r.median_abs_error_pct for r in res]
    objs = ", ".join(f"{c} {e:.2f} (objective {objective(tables[c][e], fams)[0]:.1f} %)"
                     for c, e in fitted.items())
    print(f"\nLOFO: median over families of the left-out family's median |error| "
          f"{_percentile(lo, 50):.1f} %, worst family {max(lo):.1f} %; fitted on all "
          f"calibration families: {objs}")
    for c, errs in lofo_rows(tables).items():
        print(f"LOFO rows, stack class {c} (families on modelled devices): {len(errs)} rows, "
              f"median |error| "
              f"{_percentile(errs, 50):.1f} %, p90 {_percentile(errs, 90):.1f} %")
    by_regime = lofo_rows_by(tables, row_labels(row_regime))
    for regime in REGIMES:
        errs = by_regime.get(regime, [])
        if errs:
            print(f"LOFO rows, regime {regime} (families on modelled devices, every class): "
                  f"{len(errs)} rows, median |error| {_percentile(errs, 50):.1f} %, "
                  f"p90 {_percentile(errs, 90):.1f} %")
    pooled = [e for errs in by_regime.values() for e in errs]
    print(f"LOFO rows, every class and regime pooled (families on modelled devices): "
          f"{len(pooled)} rows, median |error| {_percentile(pooled, 50):.1f} %, "
          f"p90 {_percentile(pooled, 90):.1f} %")
    return 0


def row_regime(r: Row) -> str:
    """The regime (estimate.accuracy.training_regime) of a row's job as its stack runs it."""
    _, cfg = run_framework(r.run)
    return training_regime(cfg, r.run.num_gpus, r.run.gpus_per_node)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--split", choices=("calibration", "validation", "all"),
                    default="calibration",
                    help="calibration families (default), the hold-out validation families "
                         "(score them once, never tune on them), or all")
    ap.add_argument("--lofo", action="store_true",
                    help="leave-one-family-out over the calibration families: fit the "
                         "end-to-end factor on the others, predict the one left out")
    ap.add_argument("--no-framework", action="store_true",
                    help="predict each run as a user naming no framework would: its layout and "
                         "--fused only, the stack inferred from the layout (auto)")
    ap.add_argument("--family", nargs="+", choices=FAMILIES, metavar="FAMILY",
                    help="only these families (a family column value of the data)")
    ap.add_argument("--json", action="store_true", help="one JSON document")
    ap.add_argument("--markdown", action="store_true", help="only the summary as markdown")
    ap.add_argument("--verbose", action="store_true", help="notes and breakdown per row")
    ap.add_argument("--csv", type=Path, default=None,
                    help="training_runs.csv to cross-check published values (default: found "
                         "next to the checkout; 'none' to skip)")
    args = ap.parse_args(argv)

    if args.lofo:
        return print_lofo(args.markdown)
    t0 = time.perf_counter()
    splits = split_of()
    runs = [r for r in RUNS if (args.split == "all" or splits[r.run_id] == args.split)
            and (not args.family or r.family in args.family)]
    rows = run_all(runs, splits, auto=args.no_framework)
    elapsed = time.perf_counter() - t0
    summ = summary(rows)
    csv_path = None if (args.csv and str(args.csv) == "none") else (args.csv or find_csv())
    problems = check_csv(csv_path) if csv_path else []

    if args.json:
        doc = {"split": args.split, "summary": summ, "rows": [row_json(r) for r in rows],
               "skipped": [{"run_id": s.run_id, "reason": s.reason} for s in SKIPPED],
               "conventions": CONVENTIONS, "csv": csv_path.name if csv_path else None,
               "csv_problems": problems, "runtime_s": elapsed, "library": library_version()}
        json.dump(doc, sys.stdout, indent=1, default=str)
        print()
        return 0
    if args.markdown:
        print(markdown(summ, f"Training step-time model vs {summ['all']['rows']} published runs "
                             f"(split: {args.split})"))
        return 0
    print_table(rows)
    if args.verbose:
        for r in rows:
            if not r.metric.primary:
                continue
            res = r.result
            print(f"\n{r.run.run_id}: {r.run.notes}")
            for inf in r.run.inferred:
                print(f"  inferred  {inf}")
            if r.note:
                print(f"  {r.note}")
            if res is not None and res.step_time_s:
                shares = ", ".join(f"{k} {v / res.step_time_s:.0%}"
                                   for k, v in res.breakdown.items() if v)
                print(f"  step {res.step_time_s:.4g} s, MFU {res.mfu:.1%}, HFU {res.hfu:.1%}: "
                      f"{shares}")
    print_summary(summ)
    print(f"\nskipped {len(SKIPPED)} csv rows:")
    for s in SKIPPED:
        print(f"  {s.run_id}: {s.reason}")
    if csv_path:
        print(f"\ncsv cross-check ({csv_path.name}): "
              + ("published values agree" if not problems else f"{len(problems)} problems"))
        for p in problems:
            print(f"  {p}")
    print(f"\n{len(runs)} runs evaluated in {elapsed:.2f} s (split: {args.split})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
