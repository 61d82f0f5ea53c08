"""Accelerator facts the agents need: catalogue names, NVML name mapping, and twin physics.

The scorer's catalogue holds performance figures; this table holds only what a node agent or
its simulated twin needs to produce believable telemetry (power envelope, clocks, memory).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CATALOGUE_NAMES", "MODELS", "GpuPhysics", "catalogue_name", "physics"]


@dataclass(frozen=True)
class GpuPhysics:
    """Power/clock envelope of one accelerator model, as NVML reports it."""

    name: str
    tdp_w: float
    idle_w: float
    max_sm_mhz: int
    idle_sm_mhz: int
    memory_mib: int
    interconnect: str = "pcie"
    compute_capability: str | None = None
    vendor: str = "nvidia"


MODELS: dict[str, GpuPhysics] = {
    m.name: m
    for m in (
        GpuPhysics("K80", 150, 25, 875, 324, 11441, "pcie", "3.7"),
        GpuPhysics("P100", 250, 30, 1480, 405, 16280, "nvlink", "6.0"),
        GpuPhysics("V100-16", 300, 40, 1530, 135, 16160, "nvlink", "7.0"),
        GpuPhysics("V100-32", 300, 40, 1530, 135, 32510, "nvlink", "7.0"),
        GpuPhysics("T4", 70, 10, 1590, 300, 15360, "pcie", "7.5"),
        GpuPhysics("A10G", 300, 25, 1710, 210, 23028, "pcie", "8.6"),
        GpuPhysics("L4", 72, 16, 2040, 210, 23034, "pcie", "8.9"),
        GpuPhysics("L40S", 350, 35, 2520, 210, 46068, "pcie", "8.9"),
        GpuPhysics("A100-40", 400, 55, 1410, 210, 40960, "nvlink", "8.0"),
        GpuPhysics("A100-80", 400, 60, 1410, 210, 81920, "nvlink", "8.0"),
        GpuPhysics("H100", 700, 70, 1980, 345, 81559, "nvlink", "9.0"),
        GpuPhysics("H200", 700, 75, 1980, 345, 143771, "nvlink", "9.0"),
        GpuPhysics("Ascend910B", 400, 70, 1800, 400, 65536, "hccs", None, "huawei"),
        GpuPhysics("MI300X", 750, 120, 2100, 400, 196608, "xgmi", None, "amd"),
    )
}
CATALOGUE_NAMES: tuple[str, ...] = tuple(MODELS)

_GENERIC = GpuPhysics("generic", 300, 40, 1500, 300, 16384)

# NVML product names -> catalogue names. Order matters: the first pattern that matches wins.
_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bH200", "H200"),  # not GH200 (Grace Hopper: a different part)
    (r"\bH100", "H100"),
    (r"A100.*80\s*GB|A100.*80G", "A100-80"),
    (r"A100", "A100-40"),
    (r"L40S", "L40S"),
    (r"\bL4\b", "L4"),
    (r"A10G", "A10G"),
    (r"\bT4\b", "T4"),
    (r"V100.*32\s*GB", "V100-32"),
    (r"V100", "V100-16"),
    (r"P100", "P100"),
    (r"K80", "K80"),
    (r"MI300X", "MI300X"),
    (r"910B", "Ascend910B"),
)


def catalogue_name(product_name: str, memory_mib: int | None = None) -> str:
    """Map an NVML product name ("NVIDIA A100-SXM4-80GB") to a catalogue name ("A100-80").

    Memory disambiguates names that omit it (an "A100 PCIe" with 80 GiB is an A100-80).
    Unrecognised names come back tidied ("NVIDIA GH200 480GB" -> "GH200-480GB").
    """
    for pattern, name in _PATTERNS:
        if re.search(pattern, product_name, re.IGNORECASE):
            if memory_mib and name in ("A100-40", "V100-16"):
                big = memory_mib > (60_000 if name == "A100-40" else 24_000)
                return {"A100-40": "A100-80", "V100-16": "V100-32"}[name] if big else name
            return name
    tidy = re.sub(r"^(NVIDIA|Tesla)\s+", "", product_name.strip(), flags=re.IGNORECASE)
    return re.sub(r"\s+", "-", tidy) or "unknown"


def physics(model: str) -> GpuPhysics:
    """The envelope of a catalogue model; a generic 300 W part when unknown."""
    return MODELS.get(model, _GENERIC)
