"""Per-token API prices (a dated, user-editable table): loader and validation."""

from __future__ import annotations

from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuplan.errors import GpuplanError


class ApiPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    models: tuple[str, ...] = Field(default=(), description="presets it serves; () = any")
    input_usd_per_mtok: float = Field(ge=0, le=1e6, allow_inf_nan=False)
    output_usd_per_mtok: float = Field(ge=0, le=1e6, allow_inf_nan=False)
    source: str
    url: str | None = None
    date: str
    uncertain: bool = False


def parse_api_prices(text: str, where: str = "api prices") -> list[ApiPrice]:
    """Entries of an `[[api]]` TOML table; one clear error naming the entry otherwise."""
    from gpuplan.specs.files import parse_toml

    data = parse_toml(text, where)
    out = []
    extra = sorted(set(data) - {"api"})
    if extra:
        raise GpuplanError(f"{where}: unknown key(s) {', '.join(extra)[:80]}; expected only "
                           "[[api]] entries")
    entries = data.get("api", [])
    if entries == []:
        raise GpuplanError(f"{where}: holds no [[api]] entries; expected at least one")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise GpuplanError(f"{where}: `api` must be an array of tables ([[api]] entries)")
    for i, entry in enumerate(entries):
        try:
            out.append(ApiPrice(**entry))
        except (ValidationError, TypeError) as e:
            first = str(e).splitlines()[1:3] if isinstance(e, ValidationError) else [str(e)]
            raise GpuplanError(f"{where}: entry {i + 1} ({entry.get('name', '?')}): "
                               f"{' '.join(s.strip() for s in first)}") from None
    return out


def builtin_api_prices() -> list[ApiPrice]:
    text = resources.files("gpuplan.catalog").joinpath("api_prices.toml").read_text()
    return parse_api_prices(text, "catalog/api_prices.toml")
