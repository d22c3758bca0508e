"""`gpuplan hardware` and `gpuplan models`: the catalogs, every number with its source."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from gpuplan import units
from gpuplan.report.output import emit, table
from gpuplan.specs.catalog import device_catalog, get_device, get_model, model_presets
from gpuplan.specs.device import DTYPES, Device
from gpuplan.specs.model import ModelSpec

JsonOpt = Annotated[bool, typer.Option("--json", help="print one JSON object (SI units)")]


def device_summary(d: Device) -> dict[str, Any]:
    return {
        "name": d.name, "vendor": d.vendor, "kind": d.kind, "year": d.year,
        "memory_bytes": d.memory_bytes, "usable_memory_bytes": d.usable_memory_bytes,
        "capacity_bytes": d.capacity_bytes, "mem_bw_bytes_per_s": d.mem_bw_bytes_per_s,
        "peak_flops_per_s": dict(d.peak_flops_per_s), "tdp_w": d.tdp_w,
        "cloud_usd_per_hour": d.cloud_usd_per_hour,
        "price_basis_usd": _basis(d.name),
        "sources": {k: p.source for k, p in d.provenance.items()},
    }


def _basis(name: str) -> dict[str, float]:
    """The device's prices on the one-basis table (specs/prices.py), by kind."""
    from gpuplan.specs.prices import KINDS, load_prices

    table_ = load_prices()
    return {k: v for k in KINDS if (v := table_.usd(name, k)) is not None}


def device_detail(d: Device) -> dict[str, Any]:
    def link(x):
        return (None if x is None else {"name": x.name, "bw_bytes_per_s": x.bw_bytes_per_s})
    ridge = {dt: d.ridge_flops_per_byte(dt) for dt in d.peak_flops_per_s}
    return {
        **device_summary(d),
        "aliases": list(d.aliases), "form_factor": d.form_factor, "memory_type": d.memory_type,
        "l2_cache_bytes": d.l2_cache_bytes, "compute_units": d.compute_units,
        "compute_unit_name": d.compute_unit_name, "pcie_gen": d.pcie_gen,
        "scale_up": link(d.scale_up), "pcie": link(d.pcie), "scale_out": link(d.scale_out),
        "list_price_usd": d.list_price_usd, "ridge_flops_per_byte": ridge, "notes": d.notes,
        "ceilings": dict(d.ceilings),
        "topology": d.topology.model_dump() if d.topology else None,
        "sources": {k: p.model_dump() for k, p in d.provenance.items()},
    }


def _tflops(d: Device, dtype: str) -> str:
    v = d.peak_flops_per_s.get(dtype)  # what the device file lists, no fallback between dtypes
    if not v:
        return "-"
    return f"{v / 1e12:.0f}" if v >= 1e14 else f"{v / 1e12:.1f}"


_LIST_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _render_devices(con: Console, devices: list[Device]) -> None:
    cols = [("name", "left"), ("mem GB", "right"), ("BW TB/s", "right")]
    cols += [(dt, "right") for dt in _LIST_DTYPES]
    cols += [("TDP W", "right"), ("$/h", "right")]
    t = table(f"{len(devices)} devices: dense peak TFLOP/s per dtype", cols,
              caption="mem = memory (GB = 1e9 bytes); BW = memory bandwidth; TDP = board power; "
                      "$/h = cloud price per GPU-hour; '-' = not in the device file (no fast "
                      "path). `gpuplan hardware NAME` shows kind, sources and dates. $/h: the "
                      "on-demand price basis (catalog/prices.csv; `gpuplan cost`).")
    for d in devices:
        t.add_row(d.name, f"{d.memory_bytes / 1e9:.0f}", f"{d.mem_bw_bytes_per_s / 1e12:.2f}",
                  *(_tflops(d, dt) for dt in _LIST_DTYPES),
                  f"{d.tdp_w:.0f}" if d.tdp_w else "-",
                  f"{p:.2f}" if (p := _basis(d.name).get("on_demand")) else "-")
    con.print(t)


def _render_device(con: Console, d: Device) -> None:
    t = table(f"{d.name} ({d.vendor} {d.form_factor}, {d.year})",
              [("field", "left"), ("value", "right"), ("source", "left"), ("date", "left")],
              caption="~ marks an uncertain value. Peaks are dense (no sparsity).", wrap=(0, 1, 2))

    def row(field: str, key: str, text: str) -> None:
        p = d.provenance.get(key)
        mark = "~ " if p and p.uncertain else ""
        note = f" ({p.note})" if p and p.note else ""
        t.add_row(field, mark + text, (p.source + note) if p else "", p.date if p else "")

    row("memory", "memory_bytes", f"{units.format_bytes(d.memory_bytes)} {d.memory_type}")
    if d.usable_memory_bytes is not None:
        u = d.usable_memory_bytes
        row("usable memory", "usable_memory_bytes",
            f"{units.format_bytes(u)} ({units.format_bytes(u, binary=True)})")
    else:
        t.add_row("usable memory", "-", "not in the catalog: the planner uses the vendor's figure",
                  "")
    row("memory bandwidth", "mem_bw_bytes_per_s", units.format_bandwidth(d.mem_bw_bytes_per_s))
    for dt in DTYPES:
        if dt in d.peak_flops_per_s:
            row(f"peak {dt}", f"peak.{dt}", units.format_flops_per_s(d.peak_flops_per_s[dt]))
    for dt in ("bf16", "fp16", "fp32"):
        if dt in d.peak_flops_per_s:
            t.add_row(f"ridge point ({dt})", f"{d.ridge_flops_per_byte(dt):.0f} FLOP/B",
                      "peak / bandwidth", "")
            break
    if d.l2_cache_bytes:
        row("L2 / last-level cache", "l2_cache_bytes", units.format_bytes(d.l2_cache_bytes))
    if d.compute_units:
        row(f"{d.compute_unit_name or 'compute units'}", "compute_units", str(d.compute_units))
    if d.tdp_w:
        row("TDP", "tdp_w", f"{d.tdp_w:.0f} W")
    for key, label in (("scale_up", "scale-up link"), ("pcie", "host link"),
                       ("scale_out", "scale-out network")):
        link = getattr(d, key)
        if link:
            row(label, key, f"{link.name}: {units.format_bandwidth(link.bw_bytes_per_s)} per dir.")
    if d.list_price_usd:
        row("list price", "list_price_usd", units.format_usd(d.list_price_usd))
    if d.cloud_usd_per_hour:
        row("cloud price", "cloud_usd_per_hour", f"${d.cloud_usd_per_hour:.2f}/GPU-h")
    con.print(t)


def model_summary(m: ModelSpec) -> dict[str, Any]:
    return {"name": m.name, "family": m.family, "arch": m.arch, "params": m.params(),
            "active_params": m.active_params(), "layers": m.num_layers,
            "hidden_size": m.hidden_size, "source": m.source}


def model_detail(m: ModelSpec) -> dict[str, Any]:
    arch = m.model_dump(exclude={"name", "source", "source_url", "source_date"})
    arch.update(kv_heads=m.kv_heads, head_dim=m.head_size, is_moe=m.is_moe, is_mla=m.is_mla)
    return {
        **model_summary(m), "architecture": arch, "params_breakdown": m.params_breakdown(),
        "non_embedding_params": m.non_embedding_params(), "source_url": m.source_url,
        "source_date": m.source_date,
    }


def _render_models(con: Console, models: list[ModelSpec]) -> None:
    t = table(f"{len(models)} model presets", [
        ("name", "left"), ("family", "left"), ("params", "right"), ("active", "right"),
        ("layers", "right"), ("d_model", "right"), ("heads", "right"), ("kv heads", "right")],
        caption="params = all parameters, in billions (1e9); active = parameters used per "
                "token (mixture of experts only). `gpuplan models NAME` shows the architecture "
                "and its source; a config.json path works too.")
    for m in models:
        t.add_row(m.name, m.family, f"{m.params() / 1e9:.3g}",
                  f"{m.active_params() / 1e9:.3g}" if m.is_moe else "", str(m.num_layers),
                  str(m.hidden_size), str(m.num_heads), str(m.kv_heads))
    con.print(t)


def _render_model(con: Console, m: ModelSpec) -> None:
    t = table(f"{m.name} ({m.family}, {m.arch}) - {m.params():,} parameters",
              [("field", "left"), ("value", "right")],
              caption=f"source: {m.source or 'n/a'} {m.source_url or ''} {m.source_date or ''}")
    fields = m.model_dump(exclude={"name", "source", "source_url", "source_date", "family"})
    for k, v in fields.items():
        if v not in (None, 0, False) or k in ("tie_embeddings",):
            t.add_row(k, str(v))
    for k, v in m.params_breakdown().items():
        t.add_row(f"params: {k}", f"{v:,}")
    t.add_row("params: total", f"{m.params():,}")
    if m.is_moe:
        t.add_row("params: active per token", f"{m.active_params():,}")
    con.print(t)


def register(app: typer.Typer) -> None:
    @app.command()
    def hardware(
        name: Annotated[str | None, typer.Argument(
            help="device name or alias (case-insensitive) or a device .toml file")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """The device catalog; with NAME, every number of one device with its source."""
        if name is None:
            devices = list(device_catalog())
            emit({"devices": [device_summary(d) for d in devices]}, as_json,
                 lambda con: _render_devices(con, devices))
        else:
            d = get_device(name, "device")
            emit(device_detail(d), as_json, lambda con: _render_device(con, d))

    @app.command()
    def models(
        name: Annotated[str | None, typer.Argument(
            help="preset name (case-insensitive) or a Hugging Face config.json path")] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """Built-in model presets; with NAME, one model's architecture and exact parameters."""
        if name is None:
            presets = model_presets()
            emit({"models": [model_summary(m) for m in presets]}, as_json,
                 lambda con: _render_models(con, presets))
        else:
            m = get_model(name)
            emit(model_detail(m), as_json, lambda con: _render_model(con, m))
