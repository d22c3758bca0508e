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

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuplan.errors import GpuplanError
from gpuplan.specs.device_file import first_error
from gpuplan.specs.files import parse_toml, read_text, shown
from gpuplan.specs.model import ModelSpec


def model_from_record(raw: dict[str, Any], origin: str = "record") -> ModelSpec:
    try:
        return ModelSpec.model_validate(raw)
    except ValidationError as e:
        raise GpuplanError(f"{origin}: {first_error(e)}") from None


def load_model_file(path: Path) -> ModelSpec:
    raw = parse_toml(read_text(path, "model file"), f"model file {shown(path)}")
    return model_from_record(raw, str(path))
