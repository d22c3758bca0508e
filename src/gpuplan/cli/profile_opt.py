"""`--profile FILE`: estimates on a machine's measured ceilings (`gpuplan bench`) instead of
datasheet peaks x priors. Shared by roofline, train and memory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuplan.estimate.efficiency import Efficiency, efficiency_from_profile
from gpuplan.specs.device import Device

ProfileOpt = Annotated[Path | None, typer.Option(
    "--profile", help="measured machine profile (JSON from `gpuplan bench`) for the ceilings")]


def load(path: Path) -> dict[str, Any]:
    from gpuplan.measure.profile import load_profile

    return load_profile(path)


def describe(profile: dict[str, Any], device: Device) -> dict[str, Any]:
    """What the profile is and whether it was measured on `device`."""
    from gpuplan.measure.profile import match_catalog

    match = match_catalog(profile.get("identity", {}))
    same = match is not None and match.name == device.name
    info: dict[str, Any] = {"path": profile.get("path"), "device": profile["device"],
                            "date": profile["date"],
                            "matmul_flops_per_s": profile["matmul_flops_per_s"],
                            "memory_bw_bytes_per_s": profile["memory_bw_bytes_per_s"],
                            "launch_overhead_s": profile.get("launch_overhead_s"),
                            "measured_on_this_device": same}
    if not same:
        info["note"] = (f"profile measured on {profile['device']!r}"
                        f"{f' (catalog {match.name})' if match else ''}, not on {device.name}: "
                        f"its measured rates replace {device.name}'s for the dtypes it has")
    return info


def apply(path: Path, device: Device, base: Efficiency | None = None
          ) -> tuple[Efficiency, dict[str, Any]]:
    """(efficiency with the measured rates, description for the output's assumptions)."""
    prof = load(path)
    return efficiency_from_profile(prof, device, base), describe(prof, device)
