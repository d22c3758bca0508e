"""Typed, validated descriptions: devices, models (and later clusters, workloads)."""

from gpuplan.specs.catalog import device_catalog, get_device, get_model, model_presets
from gpuplan.specs.device import Device
from gpuplan.specs.model import ModelSpec

__all__ = ["Device", "ModelSpec", "device_catalog", "get_device", "get_model", "model_presets"]
