"""Buy versus rent: total cost of ownership of N GPUs over Y years at a utilization U.

Owning (every item in US$ over the horizon):
- capex = GPUs at the purchase price + the server's share per GPU (CPUs, memory, chassis,
  NICs) + the cluster network per GPU when the GPUs span more than one server;
- energy = board power x count x U x hours x PUE x $/kWh, plus the host's share of power
  (CPUs, fans, NICs: a share of board power) the same way;
- facility = provisioned IT power (kW) x colocation $/kW-month x months (space, cooling plant
  and power capacity are paid whether or not the GPUs are busy);
- maintenance = a share of the hardware price per year; staff = $ per GPU-year;
- residual = what the hardware is still worth at the end (straight-line depreciation over its
  useful life), subtracted.
Renting: on-demand and spot are paid for the hours used (U x hours); reserved capacity is paid
for every hour of the term. The break-even utilization is where owning and renting on demand
cost the same, solved by bisection on the two totals.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuplan.errors import InputError

HOURS_PER_YEAR = 8760.0


@dataclass(frozen=True)
class Default:
    value: float
    source: str
    date: str


DEFAULTS: dict[str, Default] = {
    "server_share_of_gpu_price": Default(
        0.29, "derived: Thinkmate HGX H100 8-GPU server quotation ~$310k incl. InfiniBand "
        "cards (cited in a public H100 cluster cost sheet) / 8 = $38,750 per GPU, less the "
        "$30,000 GPU = $8,750 = 0.29 x GPU price", "2024-08"),
    "network_usd_per_gpu": Default(
        4248.0, "derived from the same cost sheet: 1,024 GPUs, 48 x 64-port 400 Gb/s "
        "InfiniBand switches at $36k (FS.com) + $2.62M cables and transceivers = $4.35M / "
        "1,024; charged only when the GPUs span more than one server", "2024-08"),
    "host_power_share": Default(
        0.82, "derived: NVIDIA DGX H100 datasheet, 10.2 kW max system power for 8 x 700 W "
        "GPUs: (10.2 - 5.6) / 5.6", "2023-03"),
    "usd_per_kwh": Default(
        0.09, "EIA Electric Power Annual (data for 2023): Virginia, the largest US data-centre "
        "market, average commercial 8.95 and industrial 8.92 cents/kWh", "2024-10"),
    "pue": Default(
        1.56, "Uptime Institute Global Data Center Survey 2024: industry-average PUE 1.56 "
        "(hyperscalers report 1.1-1.2); recalled, not re-read", "2024"),
    "facility_usd_per_kw_month": Default(
        150.0, "wholesale colocation, Tier-1 US markets (Ashburn, Silicon Valley): "
        "$140-160 per kW-month, power billed separately (third-party market page)",
        "2026-01"),
    "maintenance_share_per_year": Default(
        0.15, "hardware support/maintenance 15-20% of hardware cost per year (data-centre "
        "cost guide, third-party); NVIDIA DGX support about 20% of list per year", "2025"),
    "staff_usd_per_gpu_year": Default(
        781.0, "assumption: one $200k/year infrastructure engineer (guides quote $150-250k) "
        "per 256 GPUs (32 eight-GPU servers)", "2025"),
    "useful_life_years": Default(
        5.0, "assumption: straight-line depreciation over 5 years (Microsoft and Alphabet "
        "depreciate servers over 6 years since 2022-23; GPUs age faster)", "2025"),
}


@dataclass(frozen=True)
class TcoInputs:
    """Everything the TCO needs; prices per GPU, powers in watts, rates per GPU-hour."""

    gpus: int
    years: float
    utilization: float
    purchase_usd_per_gpu: float
    board_power_w: float
    on_demand_usd_per_gpu_hour: float
    reserved_usd_per_gpu_hour: float | None = None
    spot_usd_per_gpu_hour: float | None = None
    server_usd_per_gpu: float | None = None
    """None: the default share of the GPU price"""
    network_usd_per_gpu: float = DEFAULTS["network_usd_per_gpu"].value
    gpus_per_node: int = 8
    host_power_share: float = DEFAULTS["host_power_share"].value
    usd_per_kwh: float = DEFAULTS["usd_per_kwh"].value
    pue: float = DEFAULTS["pue"].value
    facility_usd_per_kw_month: float = DEFAULTS["facility_usd_per_kw_month"].value
    maintenance_share_per_year: float = DEFAULTS["maintenance_share_per_year"].value
    staff_usd_per_gpu_year: float = DEFAULTS["staff_usd_per_gpu_year"].value
    useful_life_years: float = DEFAULTS["useful_life_years"].value


def validate(t: TcoInputs) -> None:
    if t.gpus < 1:
        raise InputError("gpus", t.gpus, "a whole number >= 1")
    if not t.years > 0:
        raise InputError("years", t.years, "a positive number of years")
    if not 0 <= t.utilization <= 1:
        raise InputError("utilization", t.utilization, "a fraction in [0, 1]")
    if not t.pue >= 1:
        raise InputError("pue", t.pue, "a number >= 1 (total facility power / IT power)")
    if not t.useful_life_years > 0:
        raise InputError("useful_life_years", t.useful_life_years, "a positive number")
    for f in ("purchase_usd_per_gpu", "board_power_w", "on_demand_usd_per_gpu_hour",
              "network_usd_per_gpu", "usd_per_kwh", "facility_usd_per_kw_month",
              "maintenance_share_per_year", "staff_usd_per_gpu_year", "host_power_share"):
        if getattr(t, f) < 0:
            raise InputError(f, getattr(t, f), "a number >= 0")


def buy_costs(t: TcoInputs, utilization: float) -> dict[str, float]:
    """Owning's items over the horizon (US$); `total_usd` = their sum less the residual."""
    hours = t.years * HOURS_PER_YEAR
    server = (t.server_usd_per_gpu if t.server_usd_per_gpu is not None
              else DEFAULTS["server_share_of_gpu_price"].value * t.purchase_usd_per_gpu)
    network = t.network_usd_per_gpu if t.gpus > t.gpus_per_node else 0.0
    hardware = t.gpus * (t.purchase_usd_per_gpu + server + network)
    it_kw = t.gpus * t.board_power_w * (1 + t.host_power_share) / 1000
    energy_kwh = it_kw * utilization * hours * t.pue
    gpu_share = 1 / (1 + t.host_power_share)
    residual = hardware * max(0.0, 1 - t.years / t.useful_life_years)
    items = {
        "capex_usd": hardware,
        "gpus_usd": t.gpus * t.purchase_usd_per_gpu,
        "servers_usd": t.gpus * server,
        "network_usd": t.gpus * network,
        "energy_usd": energy_kwh * t.usd_per_kwh,
        "energy_gpu_usd": energy_kwh * t.usd_per_kwh * gpu_share,
        "energy_host_usd": energy_kwh * t.usd_per_kwh * (1 - gpu_share),
        "energy_kwh": energy_kwh,
        "facility_usd": it_kw * t.facility_usd_per_kw_month * 12 * t.years,
        "maintenance_usd": hardware * t.maintenance_share_per_year * t.years,
        "staff_usd": t.gpus * t.staff_usd_per_gpu_year * t.years,
        "residual_usd": residual,
        "depreciation_usd": hardware - residual,
    }
    items["total_usd"] = (hardware + items["energy_usd"] + items["facility_usd"]
                          + items["maintenance_usd"] + items["staff_usd"] - residual)
    return items


def rent_costs(t: TcoInputs, utilization: float) -> dict[str, Any]:
    """Renting on demand (the basis: `total_usd`), reserved for the whole term, and spot."""
    hours = t.years * HOURS_PER_YEAR
    used = t.gpus * hours * utilization
    out: dict[str, Any] = {"total_usd": used * t.on_demand_usd_per_gpu_hour,
                           "on_demand_usd": used * t.on_demand_usd_per_gpu_hour,
                           "usd_per_gpu_hour": t.on_demand_usd_per_gpu_hour}
    out["reserved_usd"] = (t.gpus * hours * t.reserved_usd_per_gpu_hour
                           if t.reserved_usd_per_gpu_hour is not None else None)
    out["spot_usd"] = (used * t.spot_usd_per_gpu_hour
                       if t.spot_usd_per_gpu_hour is not None else None)
    return out


def break_even_utilization(t: TcoInputs, tol: float = 1e-9) -> float | None:
    """Utilization at which owning and renting on demand cost the same, by bisection on
    buy(u) - rent(u). None when renting is cheaper even at 100% (no crossing in [0, 1])."""
    def gap(u: float) -> float:
        return float(buy_costs(t, u)["total_usd"] - rent_costs(t, u)["total_usd"])

    lo, hi = 0.0, 1.0
    if gap(hi) > 0:
        return None
    if gap(lo) <= 0:
        return 0.0
    while hi - lo > tol:
        mid = (lo + hi) / 2
        if gap(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


def tco(t: TcoInputs) -> dict[str, Any]:
    """Buy and rent totals at the given utilization, cost per used GPU-hour, break-even."""
    validate(t)
    buy: dict[str, Any] = dict(buy_costs(t, t.utilization))
    rent = rent_costs(t, t.utilization)
    used_h = t.gpus * t.years * HOURS_PER_YEAR * t.utilization
    buy["usd_per_used_gpu_hour"] = buy["total_usd"] / used_h if used_h else None
    rent["usd_per_used_gpu_hour"] = rent["total_usd"] / used_h if used_h else None
    if rent["reserved_usd"] is not None:
        rent["reserved_usd_per_used_gpu_hour"] = (rent["reserved_usd"] / used_h
                                                  if used_h else None)
    be = break_even_utilization(t)
    options = {"buy": buy["total_usd"], "on_demand": rent["on_demand_usd"],
               "reserved": rent["reserved_usd"], "spot": rent["spot_usd"]}
    priced = {k: v for k, v in options.items() if v is not None}
    cheapest = min(priced, key=lambda k: priced[k])
    return {"gpus": t.gpus, "years": t.years, "utilization": t.utilization,
            "used_gpu_hours": used_h, "buy": buy, "rent": rent,
            "break_even_utilization": be, "cheapest": cheapest,
            "verdict": _verdict(buy["total_usd"], rent["total_usd"], be),
            "inputs": asdict(t)}


def _verdict(buy: float, rent: float, be: float | None) -> str:
    where = (f"owning pays off above {be:.0%} utilization" if be is not None
             else "renting on demand is cheaper even at 100% utilization")
    if buy < rent:
        return f"own: {rent / buy:.2f}x cheaper than renting on demand here; {where}"
    return f"rent: owning costs {buy / rent:.2f}x renting on demand here; {where}" if rent \
        else f"rent: nothing is used, owning still costs; {where}"
