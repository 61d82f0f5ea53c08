"""Fleet descriptions: regions, node pools, links and faults, loaded from YAML into frozen specs.

A fleet file looks like `agents/fleets/demo.yaml`. Every malformed field raises
`FleetSpecError` naming its dotted path (`regions.us-east.pools[1].gpus_per_node`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agents.errors import FleetSpecError
from agents.models import physics
from agents.tiers import TierPolicy
from scorer.errors import InvalidSpecError
from scorer.stacks import parse_stack

__all__ = [
    "FaultRates",
    "FleetSpec",
    "PoolSpec",
    "RegionSpec",
    "demo_fleet",
    "load_fleet",
    "parse_fleet",
]


# Next to this module (not importlib.resources: an editable install may see a namespace package).
_FLEETS_DIR = Path(__file__).resolve().parent / "fleets"


@dataclass(frozen=True)
class PoolSpec:
    """A homogeneous group of nodes in one region."""

    name: str
    gpu_model: str
    gpus_per_node: int
    gpu_memory_mib: int
    interconnect: str = "pcie"
    nvlink_islands: tuple[tuple[int, ...], ...] = ()
    count: int | None = None  # exact node count; else `weight` shares the rest
    weight: float = 1.0
    price_per_gpu_hour: float = 0.0
    cpu_milli: int = 0
    memory_mib: int = 0
    mig_enabled: bool = False
    software_stack: str = ""  # "cuda-12.4", "rocm-6.2", "cann-8.0"; "" = the vendor's, any version


@dataclass(frozen=True)
class RegionSpec:
    name: str
    cloud: str
    zones: tuple[str, ...]
    racks_per_zone: int = 4
    price_multiplier: float = 1.0
    carbon_g_per_kwh: float = 400.0
    price_per_kwh: float = 0.10
    renewable_share: float = 0.2
    utc_offset_h: float = 0.0
    pools: tuple[PoolSpec, ...] = ()


@dataclass(frozen=True)
class FaultRates:
    """Random faults per node-hour (0 disables); tests inject faults explicitly instead."""

    gpu_lost_per_node_hour: float = 0.0
    node_down_per_node_hour: float = 0.0
    link_degraded_per_link_hour: float = 0.0
    thermal_throttle_share: float = 0.08  # share of GPUs with poor cooling


@dataclass(frozen=True)
class FleetSpec:
    name: str
    regions: tuple[RegionSpec, ...]
    rtt_ms: Mapping[tuple[str, str], float] = field(default_factory=dict)
    link_capacity_gbps: float = 100.0
    faults: FaultRates = field(default_factory=FaultRates)
    tiers: TierPolicy = field(default_factory=TierPolicy)
    driver_version: str = "560.35.03"

    def region(self, name: str) -> RegionSpec:
        for r in self.regions:
            if r.name == name:
                return r
        raise FleetSpecError("regions", f"no region {name!r}")

    def links(self) -> list[tuple[str, str]]:
        """Directed links between regions with a known RTT."""
        return sorted(self.rtt_ms)


def _get(raw: Mapping[str, Any], key: str, where: str, kind: type, default: Any = ...) -> Any:
    path = f"{where}.{key}" if where else key
    if key not in raw:
        if default is ...:
            raise FleetSpecError(path, "required")
        return default
    value = raw[key]
    try:
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError
            return value
        return kind(value)
    except (TypeError, ValueError):
        raise FleetSpecError(path, f"expected {kind.__name__}, got {value!r}") from None


def _islands(raw: Any, gpus: int, where: str) -> tuple[tuple[int, ...], ...]:
    if raw is None:
        return ()
    try:
        islands = tuple(tuple(int(i) for i in group) for group in raw)
    except (TypeError, ValueError):
        raise FleetSpecError(where, "expected a list of lists of GPU indices") from None
    seen = [i for g in islands for i in g]
    if len(seen) != len(set(seen)) or any(not 0 <= i < gpus for i in seen):
        raise FleetSpecError(where, f"indices must be distinct and in 0..{gpus - 1}")
    return islands


def _pool(raw: Mapping[str, Any], where: str) -> PoolSpec:
    if not isinstance(raw, Mapping):
        raise FleetSpecError(where, "expected a mapping")
    model = _get(raw, "gpu_model", where, str)
    envelope = physics(model)
    gpus = _get(raw, "gpus_per_node", where, int)
    if not 1 <= gpus <= 64:
        raise FleetSpecError(f"{where}.gpus_per_node", f"must be 1..64, got {gpus}")
    count = _get(raw, "count", where, int, None)
    weight = _get(raw, "weight", where, float, 1.0)
    if (count is not None and count < 0) or weight < 0:
        raise FleetSpecError(f"{where}.count", "count and weight must be >= 0")
    return PoolSpec(
        name=_get(raw, "name", where, str, f"{model.lower()}x{gpus}"),
        gpu_model=model,
        gpus_per_node=gpus,
        gpu_memory_mib=_get(raw, "gpu_memory_mib", where, int, envelope.memory_mib),
        interconnect=_get(raw, "interconnect", where, str, envelope.interconnect),
        nvlink_islands=_islands(raw.get("nvlink_islands"), gpus, f"{where}.nvlink_islands"),
        count=count,
        weight=weight,
        price_per_gpu_hour=_get(raw, "price_per_gpu_hour", where, float, 0.0),
        cpu_milli=_get(raw, "cpu_milli", where, int, 0),
        memory_mib=_get(raw, "memory_mib", where, int, 0),
        mig_enabled=_get(raw, "mig_enabled", where, bool, False),
        software_stack=_stack(raw, where),
    )


def _stack(raw: Mapping[str, Any], where: str) -> str:
    text = _get(raw, "software_stack", where, str, "")
    try:
        parse_stack(text)
    except InvalidSpecError as exc:
        raise FleetSpecError(f"{where}.software_stack", str(exc).partition(": ")[2]) from None
    return text.strip().lower()


def _region(name: str, raw: Mapping[str, Any]) -> RegionSpec:
    where = f"regions.{name}"
    if not isinstance(raw, Mapping):
        raise FleetSpecError(where, "expected a mapping")
    zones_raw = raw.get("zones", 1)
    zones = (
        tuple(f"{name}-{chr(ord('a') + i)}" for i in range(int(zones_raw)))
        if isinstance(zones_raw, int)
        else tuple(str(z) for z in zones_raw)
    )
    if not zones:
        raise FleetSpecError(f"{where}.zones", "at least one zone")
    pools_raw = raw.get("pools") or []
    if not isinstance(pools_raw, list) or not pools_raw:
        raise FleetSpecError(f"{where}.pools", "expected a non-empty list")
    return RegionSpec(
        name=name,
        cloud=_get(raw, "cloud", where, str, ""),
        zones=zones,
        racks_per_zone=max(1, _get(raw, "racks_per_zone", where, int, 4)),
        price_multiplier=_get(raw, "price_multiplier", where, float, 1.0),
        carbon_g_per_kwh=_get(raw, "carbon_g_per_kwh", where, float, 400.0),
        price_per_kwh=_get(raw, "price_per_kwh", where, float, 0.10),
        renewable_share=_get(raw, "renewable_share", where, float, 0.2),
        utc_offset_h=_get(raw, "utc_offset_h", where, float, 0.0),
        pools=tuple(_pool(p, f"{where}.pools[{i}]") for i, p in enumerate(pools_raw)),
    )


def _rtt(raw: Any, regions: set[str]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    if not isinstance(raw, Mapping):
        raise FleetSpecError("rtt_ms", "expected a mapping of region -> {region: ms}")
    for src, row in raw.items():
        for dst, ms in (row or {}).items():
            where = f"rtt_ms.{src}.{dst}"
            if src not in regions or dst not in regions:
                raise FleetSpecError(where, "unknown region")
            out[(str(src), str(dst))] = float(ms)
            out.setdefault((str(dst), str(src)), float(ms))  # symmetric unless both given
    return out


def parse_fleet(raw: Mapping[str, Any], name: str = "fleet") -> FleetSpec:
    """Build a FleetSpec from parsed YAML/JSON."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("regions"), Mapping):
        raise FleetSpecError("regions", "expected a mapping of region name -> region")
    regions = tuple(_region(str(k), v) for k, v in raw["regions"].items())
    faults_raw = raw.get("faults") or {}
    try:
        faults = FaultRates(**{k: float(v) for k, v in faults_raw.items()})
        tiers = TierPolicy.from_mapping(raw.get("tiers") or {})
    except (TypeError, ValueError) as exc:
        raise FleetSpecError("faults/tiers", str(exc)) from None
    return FleetSpec(
        name=str(raw.get("name", name)),
        regions=regions,
        rtt_ms=_rtt(raw.get("rtt_ms") or {}, {r.name for r in regions}),
        link_capacity_gbps=_get(raw, "link_capacity_gbps", "", float, 100.0),
        faults=faults,
        tiers=tiers,
        driver_version=_get(raw, "driver_version", "", str, "560.35.03"),
    )


def load_fleet(path: str | Path) -> FleetSpec:
    """Load a fleet YAML file; `demo` (or `demo.yaml`) names the packaged demo fleet."""
    p = Path(path)
    if not p.exists() and p.suffix in ("", ".yaml"):
        packaged = _FLEETS_DIR / f"{p.stem}.yaml"
        if packaged.is_file():
            return parse_fleet(yaml.safe_load(packaged.read_text()), p.stem)
    try:
        raw = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise FleetSpecError(str(path), f"cannot read fleet file: {exc}") from exc
    return parse_fleet(raw, p.stem)


def demo_fleet() -> FleetSpec:
    """The packaged demo fleet (4+ regions, 6+ GPU models)."""
    return load_fleet("demo")
