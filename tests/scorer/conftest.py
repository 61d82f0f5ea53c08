"""Shared fixtures: the Gavel table (package data, scorer/data/) and fleets.

Helpers are handed to tests as fixtures (`node`, `fleet`, `context`), so no test imports this
module (the suite runs with pytest's importlib import mode, as pyproject sets it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from scorer import (
    GAVEL_CSV,
    ClusterState,
    CycleContext,
    JobSpec,
    NodeSpec,
    ThroughputModel,
    default_catalog,
    load_gavel_csv,
)
from scorer.outcome import model_vectors

REPO = Path(__file__).resolve().parents[2]


def make_node(
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


def make_fleet(nodes: Iterable[NodeSpec]) -> ClusterState:
    state = ClusterState(capacity=4)
    for n in nodes:
        state.upsert_node(n)
    return state


def make_context(
    state: ClusterState, job: JobSpec, throughput: ThroughputModel | None = None
) -> CycleContext:
    """The frozen cycle input the Placer would build for `job` over every node."""
    tp = throughput or ThroughputModel(state.catalog)
    return CycleContext(job, state, tp, state.slots(), model_vectors(job, state.models, tp))


@pytest.fixture(scope="session")
def gavel_csv() -> Path:
    return GAVEL_CSV  # package data: always there


@pytest.fixture(scope="session")
def gavel(gavel_csv: Path) -> ThroughputModel:
    return load_gavel_csv(gavel_csv)


@pytest.fixture
def node() -> Callable[..., NodeSpec]:
    return make_node


@pytest.fixture
def fleet() -> Callable[[Iterable[NodeSpec]], ClusterState]:
    return make_fleet


@pytest.fixture
def context() -> Callable[..., CycleContext]:
    return make_context


@pytest.fixture
def repo() -> Path:
    return REPO
