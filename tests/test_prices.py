"""Prices on one basis: one dated source per kind, notes kept apart, user tables override."""

from __future__ import annotations

import pytest

from gpuplan.errors import GpuplanError, InputError
from gpuplan.specs.prices import KINDS, builtin_rows, load_prices


def test_one_source_and_date_per_kind() -> None:
    seen: dict[str, set[tuple[str, str]]] = {}
    for p, basis in builtin_rows():
        if basis:
            seen.setdefault(p.kind, set()).add((p.source, p.as_of))
    assert set(seen) == set(KINDS)
    for kind, sources in seen.items():
        assert len(sources) == 1, (kind, sources)


def test_every_row_has_a_source_and_date() -> None:
    for p, _ in builtin_rows():
        assert p.source and p.as_of and p.usd > 0


def test_notes_do_not_leak_into_the_basis() -> None:
    t = load_prices()
    assert t.usd("H100-SXM", "on_demand") == 2.69
    assert any(n.usd == 12.29 for n in t.notes["H100-SXM"])
    assert t.usd("TPU-v5p", "on_demand") is None  # only a note (another provider)


def test_user_table_overrides_and_keeps_the_old_as_note(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "p.csv"
    f.write_text("device,kind,usd\nh100,on_demand,1.5\nmi300x,on_demand,2.2\n")
    t = load_prices(f)
    assert t.usd("H100-SXM", "on_demand") == 1.5
    assert t.usd("MI300X", "on_demand") == 2.2
    assert any(n.usd == 2.69 for n in t.notes["H100-SXM"])
    monkeypatch.setenv("GPUPLAN_PRICES", str(f))
    assert load_prices().usd("H100-SXM", "on_demand") == 1.5


def test_bad_user_tables(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "p.csv"
    f.write_text("device,kind,usd\nh100,hourly,1.5\n")
    with pytest.raises(InputError, match="kind"):
        load_prices(f)
    f.write_text("device,usd\nh100,1.5\n")
    with pytest.raises(GpuplanError, match="kind"):
        load_prices(f)
    f.write_text("device,kind,usd\nh100,spot,-1\n")
    with pytest.raises(InputError, match="usd"):
        load_prices(f)
    with pytest.raises(InputError, match="prices"):
        load_prices(tmp_path / "missing.csv")
