"""gpuflow's decision core: pure, deterministic, numpy only.

Public surface: domain types (JobSpec, NodeSpec, Assignment, PlacementResult, RegionView), the
capability catalogue, the throughput model, the cluster state with reservations, the plugin
framework and registry, the regional Placer, the router's rank_regions and placer presets.
"""

from __future__ import annotations

from gpuflow_errors import GpuflowError
from scorer.catalog import Catalog, GpuModelSpec, default_catalog, load_catalog
from scorer.errors import (
    CatalogError,
    InvalidSpecError,
    ReservationError,
    ScorerError,
    UnknownNodeError,
    UnknownPluginError,
)
from scorer.framework import CycleContext, FilterPlugin, Insufficient, ScorePlugin, Status
from scorer.memory import MemoryNeed, memory_advice, memory_need, memory_need_mib, memory_refusal
from scorer.placer import Placer
from scorer.policies import PRESETS, PlacerPreset, make_placer, preset
from scorer.registry import (
    DEFAULT_FILTERS,
    DEFAULT_SCORES,
    FILTERS,
    SCORES,
    build_filter,
    build_score,
    register_filter,
    register_score,
)
from scorer.router import rank_regions
from scorer.state import ClusterState
from scorer.throughput import GAVEL_CSV, ThroughputModel, gavel_throughputs, load_gavel_csv
from scorer.types import Assignment, JobSpec, NodeSpec, PlacementResult, RegionView
from scorer.weights import job_weights

__all__ = [
    "DEFAULT_FILTERS",
    "DEFAULT_SCORES",
    "FILTERS",
    "GAVEL_CSV",
    "PRESETS",
    "SCORES",
    "Assignment",
    "Catalog",
    "CatalogError",
    "ClusterState",
    "CycleContext",
    "FilterPlugin",
    "GpuModelSpec",
    "GpuflowError",
    "Insufficient",
    "InvalidSpecError",
    "JobSpec",
    "MemoryNeed",
    "NodeSpec",
    "PlacementResult",
    "Placer",
    "PlacerPreset",
    "RegionView",
    "ReservationError",
    "ScorePlugin",
    "ScorerError",
    "Status",
    "ThroughputModel",
    "UnknownNodeError",
    "UnknownPluginError",
    "build_filter",
    "build_score",
    "default_catalog",
    "gavel_throughputs",
    "job_weights",
    "load_catalog",
    "load_gavel_csv",
    "make_placer",
    "memory_advice",
    "memory_need",
    "memory_need_mib",
    "memory_refusal",
    "preset",
    "rank_regions",
    "register_filter",
    "register_score",
]
