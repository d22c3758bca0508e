"""Buy versus rent: the rule of thumb must come out of the numbers, energy is linear in the
power price, break-even is where the two totals agree, and the items add up."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplan.errors import InputError
from gpuplan.estimate.tco import HOURS_PER_YEAR, TcoInputs, break_even_utilization, buy_costs, rent_costs, tco
from gpuplan.specs.catalog import get_device
from gpuplan.specs.prices import load_prices

DATA_CENTRE = ("H100-SXM", "H200")
"""data-centre GPUs with both a purchase and an on-demand price on the built-in basis"""


def _inputs(name: str, u: float, gpus: int = 8, years: float = 3.0) -> TcoInputs:
    p, d = load_prices(), get_device(name)
    purchase, rent = p.usd(d.name, "purchase"), p.usd(d.name, "on_demand")
    assert purchase and rent and d.tdp_w
    return TcoInputs(gpus=gpus, years=years, utilization=u, purchase_usd_per_gpu=purchase,
                     board_power_w=d.tdp_w, on_demand_usd_per_gpu_hour=rent)


@pytest.mark.parametrize("name", DATA_CENTRE)
def test_steady_load_owns_bursty_load_rents(name: str) -> None:
    steady = tco(_inputs(name, 0.95))
    assert steady["buy"]["total_usd"] < steady["rent"]["total_usd"]
    bursty = tco(_inputs(name, 0.05))
    assert bursty["buy"]["total_usd"] > bursty["rent"]["total_usd"]


@pytest.mark.parametrize("name", DATA_CENTRE)
def test_break_even_totals_agree_within_one_percent(name: str) -> None:
    t = _inputs(name, 0.5)
    u = break_even_utilization(t)
    assert u is not None and 0.05 < u < 0.95
    buy, rent = buy_costs(t, u)["total_usd"], rent_costs(t, u)["total_usd"]
    assert buy == pytest.approx(rent, rel=0.01)


def test_no_break_even_when_renting_is_cheap() -> None:
    t = replace(_inputs("H100-SXM", 0.5), on_demand_usd_per_gpu_hour=0.10)
    assert break_even_utilization(t) is None


@settings(max_examples=30, deadline=None)
@given(price=st.floats(0.0, 1.0), u=st.floats(0.0, 1.0))
def test_energy_linear_in_power_price(price: float, u: float) -> None:
    t = replace(_inputs("H100-SXM", u), usd_per_kwh=price)
    one = buy_costs(replace(t, usd_per_kwh=1.0), u)["energy_usd"]
    assert buy_costs(t, u)["energy_usd"] == pytest.approx(price * one, abs=1e-6)


def test_energy_formula_exact() -> None:
    # 8 x 700 W x (1 + 0.82 host) x 0.5 x 3 x 8760 h x PUE 1.5 / 1000 x $0.10
    t = replace(_inputs("H100-SXM", 0.5), pue=1.5, usd_per_kwh=0.10, host_power_share=0.82)
    expect = 8 * 700 * 1.82 * 0.5 * 3 * 8760 * 1.5 / 1000 * 0.10
    assert buy_costs(t, 0.5)["energy_usd"] == pytest.approx(expect)


def test_items_add_up_and_residual_is_straight_line() -> None:
    t = _inputs("H100-SXM", 0.7, gpus=16, years=2.0)
    b = buy_costs(t, 0.7)
    assert b["network_usd"] > 0  # 16 GPUs span two servers
    assert b["capex_usd"] == pytest.approx(b["gpus_usd"] + b["servers_usd"] + b["network_usd"])
    assert b["residual_usd"] == pytest.approx(b["capex_usd"] * (1 - 2.0 / t.useful_life_years))
    assert b["total_usd"] == pytest.approx(b["capex_usd"] + b["energy_usd"] + b["facility_usd"]
                                           + b["maintenance_usd"] + b["staff_usd"]
                                           - b["residual_usd"])
    assert buy_costs(t, 0.7)["network_usd"] > buy_costs(replace(t, gpus=8), 0.7)["network_usd"]


def test_rent_pays_hours_used_reserved_pays_all() -> None:
    t = replace(_inputs("H100-SXM", 0.25), reserved_usd_per_gpu_hour=2.0)
    r = rent_costs(t, 0.25)
    hours = 3 * HOURS_PER_YEAR * 8
    assert r["on_demand_usd"] == pytest.approx(hours * 0.25 * t.on_demand_usd_per_gpu_hour)
    assert r["reserved_usd"] == pytest.approx(hours * 2.0)


def test_bad_inputs_name_the_field() -> None:
    with pytest.raises(InputError, match="utilization"):
        tco(_inputs("H100-SXM", 1.5))
    with pytest.raises(InputError, match="pue"):
        tco(replace(_inputs("H100-SXM", 0.5), pue=0.9))
