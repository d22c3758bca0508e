"""Model preset files (TOML): the fields of ModelSpec, plus where they come from.

    name = "llama-3-8b"
    family = "llama"
    source = "meta-llama/Meta-Llama-3-8B config.json"
    source_url = "https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"
    source_date = "2024-04"
    vocab_size = 128256
    ...
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.errors import GpuplanError
from gpuplan.specs.device_file import first_error
from gpuplan.specs.model import ModelSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def model_from_record(raw: dict[str, Any], origin: str = "record") -> ModelSpec:
    try:
        return ModelSpec.model_validate(raw)
    except ValidationError as e:
        raise GpuplanError(f"{origin}: {first_error(e)}") from None


def load_model_file(path: Path) -> ModelSpec:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise GpuplanError(f"{path}: cannot read model file ({e.strerror})") from None
    except tomllib.TOMLDecodeError as e:
        raise GpuplanError(f"{path}: not valid TOML ({e})") from None
    return model_from_record(raw, str(path))
