"""How far off a training estimate of this kind of job has been: the regime a job falls in and
the leave-one-family-out step-time error of the published runs in the same regime.

The class-wide error (efficiency.HELD_OUT_ERROR_BY_STACK) averages over very different jobs.
The errors are not spread evenly: where data-parallel communication is large against the
compute between two gradient syncs and crosses nodes, the real runs depend on what the sources
rarely state (the cluster's network, its collectives' real rate), and the error tail is long.
The regime is a property of the layout alone, so a user's job and a published run are sorted
the same way:

- data-parallel communication per sync, per rank, is ~ parameters / (tp x pp) bytes and the
  compute between syncs ~ parameters / (tp x pp) x the tokens each rank of the sync group
  processes, so their ratio goes as 1 / (those tokens) (ZeRO-0/1/2 sync once per step; ZeRO-3
  gathers and reduce-scatters every micro-batch: Rajbhandari et al. 2020 §5);
- a job in one node runs its collectives on the scale-up link.

The cut (16k tokens between syncs per rank: two 8k or four 4k sequences) was set at stop 21
after the calibration rows' errors had been looked at by tokens per GPU, so it is descriptive:
it says where the model is weak, it changes no prediction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuplan.specs.workload import TrainConfig

LOFO_RESULTS = "benchmarks/results/training-lofo-2026-12-04-stop24b.txt"
"""The leave-one-family-out results file (`benchmarks/validate_training.py --lofo --markdown`)
that HELD_OUT_ERROR_BY_REGIME and efficiency.HELD_OUT_ERROR_BY_STACK are copied from; the tests
read it back, so the constants and the file are regenerated together."""

COMM_HEAVY_SYNC_TOKENS = 16384
"""tokens per rank between data-parallel gradient syncs below which a multi-node job is
'communication-heavy' (see the module docstring)"""

REGIMES: tuple[str, ...] = ("one node", "multi-node", "multi-node, communication-heavy")


def sync_tokens_per_rank(cfg: TrainConfig) -> float:
    """Tokens each rank of the data-parallel sync group (dp x cp ranks) processes between two
    gradient syncs: a whole step's share under ZeRO-0/1/2 (one sync per step), one micro-batch's
    share under ZeRO-3 (gathers and reduce-scatters every micro-batch)."""
    if cfg.zero_stage == 3:
        return cfg.micro_batch * cfg.seq_len / cfg.cp
    gb = cfg.global_batch or cfg.micro_batch * cfg.dp
    return gb * cfg.seq_len / (cfg.dp * cfg.cp)


def training_regime(cfg: TrainConfig, gpus: int, gpus_per_node: int) -> str:
    """One of REGIMES for a job of `cfg` on `gpus` GPUs, `gpus_per_node` to a node."""
    if gpus <= gpus_per_node:
        return "one node"
    if cfg.dp * cfg.cp > 1 and sync_tokens_per_rank(cfg) < COMM_HEAVY_SYNC_TOKENS:
        return "multi-node, communication-heavy"
    return "multi-node"


HELD_OUT_ERROR_BY_REGIME: dict[str, tuple[float, float, int]] = {
    "one node": (8.8, 23.4, 343), "multi-node": (8.8, 29.5, 903),
    "multi-node, communication-heavy": (11.5, 60.2, 101)}
"""Per regime: (median, 90th percentile) |error| % of tokens/s, and the row count, of the
published calibration runs each predicted with its own family left out of the end-to-end fit,
every stack class pooled (`benchmarks/validate_training.py --lofo`, LOFO_RESULTS; families on
device configurations the catalog does not model excluded, as for HELD_OUT_ERROR_BY_STACK)."""


def regime_accuracy(regime: str) -> dict[str, object]:
    """The step-time error of the published runs in `regime` (HELD_OUT_ERROR_BY_REGIME)."""
    median, p90, rows = HELD_OUT_ERROR_BY_REGIME[regime]
    return {"regime": regime, "median_abs_error_pct": median, "p90_abs_error_pct": p90,
            "rows": rows, "sync_tokens_cut": COMM_HEAVY_SYNC_TOKENS,
            "basis": "leave-one-family-out over the calibration runs of this regime, every "
                     f"stack class ({LOFO_RESULTS})"}
