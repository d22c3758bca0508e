"""Prices on one basis: one dated source per price kind, every other quote kept as a note.

The built-in table is `catalog/prices.csv`; rows with `basis = yes` form the basis (one source
per kind, checked when loading), the others are notes shown next to it. Users load their own
table with the same columns (`device,kind,usd` required; `unit,as_of,source,url,note`
optional) from a file (`--prices FILE`) or the GPUPLAN_PRICES environment variable; a user row
replaces the basis price of its (device, kind).
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from gpuplan.errors import GpuplanError, InputError
from gpuplan.specs.catalog import device_catalog

KINDS = ("on_demand", "reserved", "spot", "purchase")
"""on_demand, reserved and spot in US$ per GPU-hour; purchase in US$ per GPU (the card alone)"""
ENV = "GPUPLAN_PRICES"


@dataclass(frozen=True)
class Price:
    device: str
    kind: str
    usd: float
    as_of: str
    source: str
    url: str = ""
    note: str = ""

    def to_json(self) -> dict[str, object]:
        key = "usd" if self.kind == "purchase" else "usd_per_gpu_hour"
        return {key: self.usd, "kind": self.kind, "as_of": self.as_of, "source": self.source,
                "url": self.url or None, "note": self.note or None}


@dataclass
class PriceTable:
    """Basis prices by (device, kind), notes by device, and where each came from."""

    basis: dict[tuple[str, str], Price] = field(default_factory=dict)
    notes: dict[str, list[Price]] = field(default_factory=dict)
    user_file: str | None = None

    def get(self, device: str, kind: str) -> Price | None:
        if kind not in KINDS:
            raise InputError("price kind", kind, ", ".join(KINDS))
        return self.basis.get((device, kind))

    def usd(self, device: str, kind: str) -> float | None:
        p = self.get(device, kind)
        return p.usd if p is not None else None

    def sources(self) -> dict[str, str]:
        """The basis of each kind: its source and date (user rows say so)."""
        out: dict[str, str] = {}
        for p in self.basis.values():
            out.setdefault(p.kind, f"{p.source} ({p.as_of})")
        return out


MAX_PRICE_USD = 1e9
"""any one price row (US$: a GPU's purchase price is the largest kind)"""


def _parse(text: str, origin: str, user: bool) -> list[tuple[Price, bool]]:
    rows: list[tuple[Price, bool]] = []
    reader = csv.DictReader(io.StringIO(text))
    missing = {"device", "kind", "usd"} - set(reader.fieldnames or [])
    if missing:
        raise GpuplanError(f"{origin}: price table lacks column(s) {', '.join(sorted(missing))}; "
                           "expected device,kind,usd[,as_of,source,url,note]")
    cat = device_catalog()
    for i, r in enumerate(reader, start=2):
        kind = (r.get("kind") or "").strip()
        if kind not in KINDS:
            raise InputError(f"{origin} line {i}: kind", kind, ", ".join(KINDS))
        try:
            usd = float(r["usd"])
        except (TypeError, ValueError):
            raise InputError(f"{origin} line {i}: usd", r.get("usd"), "a number") from None
        if not 0 < usd <= MAX_PRICE_USD:
            raise InputError(f"{origin} line {i}: usd", usd,
                             f"a positive number at most {MAX_PRICE_USD:g}")
        try:
            device = cat.get((r.get("device") or "").strip(), "device").name
        except GpuplanError as e:
            raise GpuplanError(f"{origin} line {i}: {e}") from None
        p = Price(device, kind, usd, (r.get("as_of") or "").strip() or "user",
                  (r.get("source") or "").strip() or f"user price table {origin}",
                  (r.get("url") or "").strip(), (r.get("note") or "").strip())
        rows.append((p, user or (r.get("basis") or "").strip().lower() == "yes"))
    return rows


@lru_cache(maxsize=1)
def _builtin_text() -> str:
    return (resources.files("gpuplan") / "catalog" / "prices.csv").read_text(encoding="utf-8")


def builtin_rows() -> list[tuple[Price, bool]]:
    """The built-in rows as (price, is_basis)."""
    return list(_builtin_rows())


@lru_cache(maxsize=1)
def _builtin_rows() -> tuple[tuple[Price, bool], ...]:
    return tuple(_parse(_builtin_text(), "catalog/prices.csv", user=False))


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The built-in basis, overridden by the user's table (`path`, else $GPUPLAN_PRICES)."""
    table = PriceTable()
    for p, is_basis in builtin_rows():
        if is_basis:
            table.basis[(p.device, p.kind)] = p
        else:
            table.notes.setdefault(p.device, []).append(p)
    user = str(path) if path is not None else os.environ.get(ENV) or None
    if user:
        f = Path(user).expanduser()
        from gpuplan.specs.files import is_file

        field = "--prices" if path is not None else ENV
        if not is_file(f):
            raise InputError(field, user,
                             "a CSV file with columns device,kind,usd[,as_of,source,url,note]")
        from gpuplan.specs.files import read_text

        try:
            parsed = _parse(read_text(f, f"{field} price table"), f"{field} {f.name}", user=True)
        except csv.Error as e:
            raise InputError(field, f.name, f"a CSV file ({e})") from None
        if not parsed:
            raise InputError(field, f.name, "a price table with at least one row under its "
                             "header (device,kind,usd)")
        for p, _ in parsed:
            old = table.basis.get((p.device, p.kind))
            if old is not None:
                table.notes.setdefault(p.device, []).append(old)
            table.basis[(p.device, p.kind)] = p
        table.user_file = str(f)
    return table
