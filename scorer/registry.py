"""Registry: plugin name -> builder; an unknown name raises UnknownPluginError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scorer import filters, scores
from scorer.errors import UnknownPluginError
from scorer.framework import FilterPlugin, ScorePlugin

__all__ = [
    "DEFAULT_FILTERS",
    "DEFAULT_SCORES",
    "FILTERS",
    "SCORES",
    "build_filter",
    "build_score",
    "register_filter",
    "register_score",
]

FILTERS: dict[str, Callable[..., FilterPlugin]] = {
    "gpu_model": filters.GpuModelFilter,
    "region": filters.RegionFilter,
    "zone": filters.ZoneFilter,
    "precision": filters.PrecisionFilter,
    "memory": filters.MemoryFilter,
    "software_stack": filters.SoftwareStackFilter,
    "runnable": filters.RunnableFilter,
    "host_resources": filters.HostResourcesFilter,
    "health": filters.HealthFilter,
    "capacity": filters.CapacityFilter,
    "communication": filters.CommunicationFilter,
}

SCORES: dict[str, Callable[..., ScorePlugin]] = {
    "compute": scores.ComputeScore,
    "memory_fit": scores.MemoryFitScore,
    "topology": scores.TopologyScore,
    "cost": scores.CostScore,
    "carbon": scores.CarbonScore,
    "data_affinity": scores.DataAffinityScore,
    "fragmentation": scores.FragmentationScore,
    "load_balance": scores.LoadBalanceScore,
    "porting": scores.PortingScore,
    "bin_pack": scores.BinPackScore,
    "first_fit": scores.FirstFitScore,
    "fgd": scores.FgdScore,
    "model_pressure": scores.ModelPressureScore,
    "communication": scores.CommunicationScore,
}

DEFAULT_FILTERS: tuple[str, ...] = tuple(FILTERS)
DEFAULT_SCORES: tuple[str, ...] = (
    "compute",
    "memory_fit",
    "topology",
    "cost",
    "carbon",
    "data_affinity",
    "fragmentation",
    "load_balance",
    "communication",
    "porting",
)


def _build(kind: str, table: dict[str, Callable[..., Any]], name: str, args: dict[str, Any]) -> Any:
    try:
        builder = table[name]
    except KeyError:
        known = ", ".join(sorted(table))
        raise UnknownPluginError(f"no {kind} plugin {name!r} (known: {known})") from None
    return builder(**args)


def build_filter(name: str, **args: Any) -> FilterPlugin:
    return _build("filter", FILTERS, name, args)


def build_score(name: str, **args: Any) -> ScorePlugin:
    return _build("score", SCORES, name, args)


def register_filter(name: str, builder: Callable[..., FilterPlugin]) -> None:
    FILTERS[name] = builder


def register_score(name: str, builder: Callable[..., ScorePlugin]) -> None:
    SCORES[name] = builder
