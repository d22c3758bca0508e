"""`advise`: the seeds' scenarios come out of the numbers, every row says why, a CPU row is
always there, and goals map to evaluators (so `serve` can plug in)."""

from __future__ import annotations

import pytest

from gpuplan.errors import InputError
from gpuplan.estimate.advise import EVALUATORS, advise, make_goal
from gpuplan.specs.catalog import device_catalog, get_model
from gpuplan.specs.prices import load_prices


def _rank(model: str, goal: str, **kw: float) -> dict:  # type: ignore[type-arg]
    m = get_model(model)
    p = load_prices()
    return advise(m, list(device_catalog()), make_goal(m, goal, **kw),
                  lambda n: p.usd(n, "on_demand"))


@pytest.fixture(scope="module")
def qlora_8b() -> dict:  # type: ignore[type-arg]
    return _rank("llama-3-8b", "qlora")


def test_405b_pretraining_puts_a_large_memory_part_first() -> None:
    r = _rank("llama-3.1-405b", "pretrain")
    best = r["ranking"][0]
    assert best["meets_goal"] and best["method"] == "search"
    cap = {d.name: d.memory_bytes for d in device_catalog()}
    assert cap[best["device"]] >= 80e9
    assert best["gpus"] >= 1024 and best["why"].startswith("best")
    assert r["runner_up"] is not None


def test_qlora_8b_puts_a_24_to_48_gb_card_in_the_top_three(qlora_8b: dict) -> None:  # type: ignore[type-arg]
    cap = {d.name: d.memory_bytes for d in device_catalog()}
    top3 = [o["device"] for o in qlora_8b["ranking"][:3]]
    assert any(24e9 <= cap[d] <= 48e9 for d in top3), top3


def test_rows_are_ordered_and_explained(qlora_8b: dict) -> None:  # type: ignore[type-arg]
    rows = qlora_8b["ranking"]
    met = [o for o in rows if o["meets_goal"]]
    assert met == rows[: len(met)]
    assert [o["cost_usd"] for o in met] == sorted(o["cost_usd"] for o in met)
    for o in rows:
        assert o["why"]
        assert {"device", "gpus", "fits", "cost_usd", "time_s", "why"} <= set(o)
    # a card that cannot hold the model says memory is why
    t4 = next(o for o in rows if o["device"] == "T4")
    assert not t4["fits"] or not t4["meets_goal"]


def test_cpu_row_always_shown_with_the_gap(qlora_8b: dict) -> None:  # type: ignore[type-arg]
    cpu = qlora_8b["ranking"][-1]
    assert cpu["method"] == "cpu" and "x the best GPU option" in cpu["why"]
    assert cpu["time_s"] > qlora_8b["best"]["time_s"]


def test_budget_and_deadline_fail_with_reasons() -> None:
    r = _rank("llama-3-8b", "qlora", budget_usd=0.01)
    assert r["best"] is None
    assert any("over budget" in o["why"] for o in r["ranking"])
    r = _rank("llama-3-8b", "lora", days=0.001)
    assert any("misses the deadline" in o["why"] for o in r["ranking"])


def test_goals_map_to_evaluators_and_serve_is_not_yet_one() -> None:
    assert set(EVALUATORS) == {"pretrain", "finetune", "lora", "qlora"}
    with pytest.raises(InputError, match="goal"):
        make_goal(get_model("gpt2"), "serve")


def test_a_searched_row_over_its_capacity_says_it_may_not_fit() -> None:
    """A layout whose predicted peak exceeds the GPU's memory but is within the memory model's
    error band counts as fitting ('tight'); its row must say so, not print 'X of Y GB' with X >
    Y as if that were room to spare."""
    import re

    rows = _rank("llama-3-8b", "pretrain")["ranking"]
    searched = [o for o in rows if o["method"] == "search" and o["fits"]]
    assert searched
    tight = 0
    for o in searched:
        m = re.search(r"(?:predicted )?([\d.]+) of ([\d.]+) GB", o["why"])
        assert m, o["why"]
        if float(m[1]) > float(m[2]):
            tight += 1
            assert "may not fit" in o["why"], o["why"]
    assert tight  # this goal has such rows (RTX-4090 x 32, H100-PCIE x 8 at the time of writing)
