"""Load the built-in catalogs (devices, model presets) and resolve names, aliases and file paths.

Users add their own devices with files of the same format: point GPUPLAN_DEVICES at files or
folders (separated like PATH), or pass a file path wherever a device name is accepted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

from gpuplan.errors import GpuplanError, UnknownNameError
from gpuplan.specs.device import Device
from gpuplan.specs.device_file import load_device_file
from gpuplan.specs.files import exists, is_dir, is_file, shown, user_path
from gpuplan.specs.hf_config import load_hf_config
from gpuplan.specs.model import ModelSpec
from gpuplan.specs.model_file import load_model_file

_CATALOG = resources.files("gpuplan") / "catalog"


def normalize(name: str) -> str:
    """Case-, space-, dash- and underscore-insensitive key: 'H100 SXM' == 'h100-sxm'."""
    return re.sub(r"[\s_\-]+", "", name.strip().lower())


def _toml_files(folder: Path | Iterable[Path]) -> list[Path]:
    return sorted(p for p in (folder.iterdir() if isinstance(folder, Path) else folder)
                  if p.name.endswith(".toml"))


def _user_device_paths() -> list[Path]:
    paths: list[Path] = []
    for part in os.environ.get("GPUPLAN_DEVICES", "").split(os.pathsep):
        if not part:
            continue
        p = user_path(part)
        if is_dir(p):
            try:
                paths.extend(_toml_files(p))
            except OSError as e:
                raise GpuplanError(f"GPUPLAN_DEVICES: cannot list {shown(part)} "
                                   f"({e.strerror})") from None
        elif is_file(p):
            paths.append(p)
        else:
            raise GpuplanError(f"GPUPLAN_DEVICES: {shown(part)} is neither a .toml file nor a "
                               "folder")
    return paths


class DeviceCatalog:
    """Devices by canonical name, with a case-insensitive alias index."""

    def __init__(self, devices: Iterable[Device]) -> None:
        self.devices: dict[str, Device] = {}
        self._index: dict[str, str] = {}
        for d in devices:
            self.add(d)

    def add(self, device: Device) -> None:
        keys = {normalize(device.name), *(normalize(a) for a in device.aliases)}
        for key in keys:
            owner = self._index.get(key)
            if owner is not None and owner != device.name:
                raise GpuplanError(
                    f"device {device.name!r}: name or alias {key!r} is already used by {owner!r}"
                )
        # A user file with the name of a built-in device replaces it.
        self.devices[device.name] = device
        for key in keys:
            self._index[key] = device.name

    def get(self, name: str, field: str = "--gpu") -> Device:
        """`field`: the option or argument that named the device, named in errors."""
        if name.endswith(".toml"):
            path = user_path(name)
            if not is_file(path):
                raise GpuplanError(f"{field}: file {shown(name)} does not exist (a device is a "
                                   "catalog name, an alias, or a device .toml file)")
            return load_device_file(path)
        canonical = self._index.get(normalize(name))
        if canonical is None:
            raise UnknownNameError(field, name, sorted(self.devices))
        return self.devices[canonical]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.devices.values())

    def __len__(self) -> int:
        return len(self.devices)


@lru_cache(maxsize=1)
def _builtin_devices() -> tuple[Device, ...]:
    folder = _CATALOG / "devices"
    files = sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)
    return tuple(load_device_file(Path(str(f))) for f in files)


def device_catalog() -> DeviceCatalog:
    """Built-in devices plus the user's (GPUPLAN_DEVICES)."""
    cat = DeviceCatalog(_builtin_devices())
    for path in _user_device_paths():
        try:
            dev = load_device_file(path)
        except GpuplanError as e:
            raise GpuplanError(f"GPUPLAN_DEVICES: {e} (fix the file or remove it from "
                               "GPUPLAN_DEVICES)") from None
        cat.devices.pop(dev.name, None)
        cat._index = {k: v for k, v in cat._index.items() if v != dev.name}
        cat.add(dev)
    return cat


def get_device(name: str, field: str = "--gpu") -> Device:
    """A device by catalog name, alias (case-insensitive) or path to a device .toml file;
    `field` is the option that named it (errors name it)."""
    return device_catalog().get(name, field)


# ---- model presets -------------------------------------------------------------------------


@lru_cache(maxsize=1)
def _builtin_models() -> dict[str, ModelSpec]:
    folder = _CATALOG / "models"
    models: dict[str, ModelSpec] = {}
    for f in sorted((f for f in folder.iterdir() if f.name.endswith(".toml")), key=lambda f: f.name):
        spec = load_model_file(Path(str(f)))
        models[normalize(spec.name)] = spec
    return models


def model_presets() -> list[ModelSpec]:
    """Built-in model presets, in file order."""
    return list(_builtin_models().values())


def get_model(name: str) -> ModelSpec:
    """A model by preset name (case-insensitive), or a path to a Hugging Face config.json."""
    path = user_path(name)
    if is_dir(path):  # a Hugging Face model folder
        if not is_file(path / "config.json"):
            raise GpuplanError(f"model: folder {shown(name)} has no config.json")
        return load_hf_config(path / "config.json")
    if name.endswith(".json") or is_file(path):
        if not is_file(path):
            what = "is not a regular file" if exists(path) else "does not exist"
            raise GpuplanError(f"model: config file {shown(name)} {what}")
        return load_hf_config(path)
    spec = _builtin_models().get(normalize(name))
    if spec is None:
        raise UnknownNameError("model", name, [m.name for m in _builtin_models().values()])
    return spec
