"""Per-token API prices (a dated, user-editable table): loader and validation."""

from __future__ import annotations

import sys
from importlib import resources

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuplan.errors import GpuplanError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ApiPrice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    models: tuple[str, ...] = Field(default=(), description="presets it serves; () = any")
    input_usd_per_mtok: float = Field(ge=0)
    output_usd_per_mtok: float = Field(ge=0)
    source: str
    url: str | None = None
    date: str
    uncertain: bool = False


def parse_api_prices(text: str, where: str = "api prices") -> list[ApiPrice]:
    """Entries of an `[[api]]` TOML table; one clear error naming the entry otherwise."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise GpuplanError(f"{where}: not valid TOML ({e})") from None
    out = []
    for i, entry in enumerate(data.get("api", [])):
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
