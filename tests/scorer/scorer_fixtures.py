"""Helpers for the scorer tests: where the shared data lives, and small fleets."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from scorer import ClusterState, NodeSpec, default_catalog

REPO = Path(__file__).resolve().parents[2]
GAVEL = "gavel_isolated_throughputs.csv"


def shared_data_dir() -> Path:
    """GPUFLOW_SHARED_DATA, else <repo>/../shared/data."""
    return Path(os.environ.get("GPUFLOW_SHARED_DATA", REPO.parent / "shared" / "data"))


def node(
    node_id: str,
    model: str = "H100",
    gpus: int = 8,
    *,
    region: str = "eu",
    zone: str = "z0",
    rack: str = "r0",
    islands: tuple[tuple[int, ...], ...] = (),
    interconnect: str | None = None,
    price: float = 0.0,
) -> NodeSpec:
    spec = default_catalog().get(model)
    return NodeSpec(
        node_id=node_id,
        region=region,
        zone=zone,
        rack=rack,
        gpu_model=model,
        gpu_count=gpus,
        gpu_memory_mib=spec.memory_mib if spec else 16384,
        interconnect=interconnect or (spec.interconnect if spec else "pcie"),
        nvlink_islands=islands,
        price_per_gpu_hour=price,
    )


def fleet(nodes: Iterable[NodeSpec]) -> ClusterState:
    state = ClusterState(capacity=4)
    for n in nodes:
        state.upsert_node(n)
    return state
