"""`gpuplan cost`: buy versus rent (TCO) for N GPUs over Y years at a utilization."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.cli.catalog_cmds import JsonOpt
from gpuplan.cli.guards import finite
from gpuplan.errors import GpuplanError
from gpuplan.report.output import emit, table
from gpuplan.specs.limits import MAX_GPUS

PricesOpt = Annotated[Path | None, typer.Option(
    "--prices", help="your price table (CSV: device,kind,usd[,as_of,source,url,note]); "
                     "default $GPUPLAN_PRICES, else the built-in basis")]

MAX_USD = 1e9
"""any one price or cost per GPU (US$); an hourly, per-kWh or monthly rate at most MAX_RATE_USD"""
MAX_RATE_USD = 1e6

_ROWS = [("GPUs", "gpus_usd"), ("servers (host share)", "servers_usd"),
         ("cluster network", "network_usd"), ("energy (GPUs + host, x PUE)", "energy_usd"),
         ("facility (colocation per kW)", "facility_usd"), ("maintenance", "maintenance_usd"),
         ("staff", "staff_usd"), ("residual value (subtracted)", "residual_usd")]


def _usd(x: float | None) -> str:
    return units.format_usd(x) if x is not None else "-"


def _render(con: Console, r: dict[str, Any]) -> None:
    b, rent = r["buy"], r["rent"]
    t = table(f"{r['gpus']} x {r['device']} for {r['years']:g} years at "
              f"{r['utilization']:.0%} utilization: {r['verdict']}",
              [("", "left"), ("US$", "right")],
              caption="Owning: capex + energy + facility + maintenance + staff - residual. "
                      "Renting: on-demand and spot pay the hours used, reserved every hour.")
    for label, key in _ROWS:
        t.add_row(f"buy: {label}", _usd(b[key]))
    t.add_row("buy: total", _usd(b["total_usd"]))
    t.add_row("buy: per GPU-hour used", _usd(b["usd_per_used_gpu_hour"]))
    t.add_row(f"rent on demand at ${rent['usd_per_gpu_hour']:.2f}/GPU-h", _usd(rent["total_usd"]))
    t.add_row("rent: per GPU-hour used", _usd(rent["usd_per_used_gpu_hour"]))
    t.add_row("rent reserved (whole term)", _usd(rent["reserved_usd"]))
    t.add_row("rent spot (hours used; may be interrupted)", _usd(rent["spot_usd"]))
    be = r["break_even_utilization"]
    t.add_row("break-even utilization (buy = rent on demand)",
              f"{be:.1%}" if be is not None else "none (renting is cheaper at 100%)")
    t.add_row("cheapest option here", r["cheapest"].replace("_", " "))
    con.print(t)
    at = table("assumptions", [("input", "left"), ("value", "right"), ("source (date)", "left")])
    for k, v in r["assumptions"].items():
        at.add_row(k, f"{v['value']:g}", f"{v['source']} ({v['date']})")
    con.print(at)


def _pick(name: str, flag: float | None, basis: Any, fallback: Any = None) -> tuple[float, dict]:
    """A value and where it came from: the flag, the price basis or the sourced default."""
    if flag is not None:
        return flag, {"value": flag, "source": "command-line flag", "date": "now"}
    if basis is not None:
        return basis.usd, {"value": basis.usd, "source": basis.source, "date": basis.as_of}
    if fallback is not None:
        return fallback.value, {"value": fallback.value, "source": fallback.source,
                                "date": fallback.date}
    raise GpuplanError(f"cost: no {name} for this device on the price basis; pass "
                       f"--{name.replace('_', '-')} or a --prices file with that row")


def on_demand_price(device: str, flag: float | None, prices: Path | None) -> dict[str, Any]:
    """The on-demand rate a run is costed at: the flag, else the price basis (None when the
    basis has no row for the device: the run is then not costed)."""
    if flag is not None:
        return {"usd_per_gpu_hour": flag, "source": "--usd-per-gpu-hour"}
    from gpuplan.specs.prices import load_prices

    p = load_prices(prices).get(device, "on_demand")
    if p is None:
        return {"usd_per_gpu_hour": None, "source": f"no on-demand price for {device} on the "
                "price basis; pass --usd-per-gpu-hour or --prices"}
    return {"usd_per_gpu_hour": p.usd, "source": p.source, "as_of": p.as_of}


def register(app: typer.Typer) -> None:
    @app.command()
    def cost(
        gpu: Annotated[str, typer.Argument(help="device name, alias or .toml")],
        gpus: Annotated[int, typer.Option("--gpus", "-n", min=1, max=MAX_GPUS)] = 8,
        years: Annotated[float, typer.Option("--years", min=0.01, max=20)] = 3.0,
        utilization: Annotated[float, typer.Option(
            "--utilization", "-u", min=0.0, max=1.0, help="share of hours the GPUs are busy")]
        = 0.7,
        usd_per_kwh: Annotated[float | None, typer.Option(
            "--usd-per-kwh", callback=finite(0, MAX_RATE_USD))] = None,
        pue: Annotated[float | None, typer.Option("--pue", callback=finite(1.0, 10.0))] = None,
        purchase: Annotated[float | None, typer.Option(
            "--purchase-usd-per-gpu", callback=finite(0, MAX_USD))] = None,
        rent: Annotated[float | None, typer.Option(
            "--rent-usd-per-gpu-hour", callback=finite(0, MAX_RATE_USD), help="on-demand rate")] = None,
        reserved: Annotated[float | None, typer.Option(
            "--reserved-usd-per-gpu-hour", callback=finite(0, MAX_RATE_USD))]
        = None,
        spot: Annotated[float | None, typer.Option(
            "--spot-usd-per-gpu-hour", callback=finite(0, MAX_RATE_USD))] = None,
        server: Annotated[float | None, typer.Option(
            "--server-usd-per-gpu", callback=finite(0, MAX_USD),
            help="host share per GPU (default 0.29 x GPU price)")]
        = None,
        network: Annotated[float | None, typer.Option(
            "--network-usd-per-gpu", callback=finite(0, MAX_USD))] = None,
        facility: Annotated[float | None, typer.Option(
            "--facility-usd-per-kw-month", callback=finite(0, MAX_RATE_USD))]
        = None,
        maintenance: Annotated[float | None, typer.Option(
            "--maintenance-share", min=0, max=1, help="of hardware price per year")] = None,
        staff: Annotated[float | None, typer.Option(
            "--staff-usd-per-gpu-year", callback=finite(0, MAX_USD))] = None,
        life: Annotated[float | None, typer.Option(
            "--useful-life-years", callback=finite(0.1, 100))] = None,
        power: Annotated[float | None, typer.Option(
            "--board-power-w", callback=finite(1, 1e5), help="default: the catalog's TDP")] = None,
        prices: PricesOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Buy versus rent: total cost of ownership, cost per used GPU-hour, break-even."""
        from gpuplan.estimate.tco import DEFAULTS, Default, TcoInputs, tco
        from gpuplan.specs.catalog import get_device
        from gpuplan.specs.prices import load_prices

        d = get_device(gpu, "device")
        table_ = load_prices(prices)
        a: dict[str, dict[str, Any]] = {}
        v: dict[str, Any] = {}
        v["purchase_usd_per_gpu"], a["purchase_usd_per_gpu"] = _pick(
            "purchase_usd_per_gpu", purchase, table_.get(d.name, "purchase"))
        v["on_demand_usd_per_gpu_hour"], a["on_demand_usd_per_gpu_hour"] = _pick(
            "rent_usd_per_gpu_hour", rent, table_.get(d.name, "on_demand"))
        for key, flag, kind in (("reserved_usd_per_gpu_hour", reserved, "reserved"),
                                ("spot_usd_per_gpu_hour", spot, "spot")):
            p = table_.get(d.name, kind)
            if flag is not None or p is not None:
                v[key], a[key] = _pick(key, flag, p)
        tdp = Default(d.tdp_w, f"catalog TDP of {d.name}", "catalog") if d.tdp_w else None
        v["board_power_w"], a["board_power_w"] = _pick("board_power_w", power, None, tdp)
        for key, flag in (("usd_per_kwh", usd_per_kwh), ("pue", pue),
                          ("network_usd_per_gpu", network),
                          ("facility_usd_per_kw_month", facility),
                          ("maintenance_share_per_year", maintenance),
                          ("staff_usd_per_gpu_year", staff), ("useful_life_years", life),
                          ("host_power_share", None)):
            v[key], a[key] = _pick(key, flag, None, DEFAULTS[key])
        if server is not None:
            v["server_usd_per_gpu"], a["server_usd_per_gpu"] = _pick("server", server, None)
        else:
            dflt = DEFAULTS["server_share_of_gpu_price"]
            a["server_share_of_gpu_price"] = {"value": dflt.value, "source": dflt.source,
                                              "date": dflt.date}
        res = tco(TcoInputs(gpus=gpus, years=years, utilization=utilization, **v))
        r = {"device": d.name, **res, "assumptions": a,
             "price_basis": table_.sources(), "user_prices": table_.user_file}
        emit(r, as_json, lambda con: _render(con, r))
