"""Jobs routed to a region this worker owns are placed here, without the `jobs.routed` hop."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from faust.types import TP

from infra.config import load_config
from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.runtime.ownership import Ownership
from streams.runtime.runtime import Runtime
from streams.scheduler.core import Scheduler


def _node(node_id: str, region: str, gpus: int) -> dict[str, Any]:
    return {"node_id": node_id, "region": region, "gpu_model": "A100-80", "gpu_count": gpus,
            "gpu_memory_mib": 81920, "zone": "z1", "rack": "r1",
            "price_per_gpu_hour": 2.0 if region == "eu" else 9.0}  # fmt: skip


def _job(job_id: str, gpus: int) -> dict[str, Any]:
    return {"event_id": f"e-{job_id}", "ts": 1, "job_id": job_id, "gpu_count": gpus,
            "gpu_milli": 1000, "kind": "TRAINING", "precision": "FP16"}  # fmt: skip


def _runtime(owned: set[str], *, local: bool = True) -> Runtime:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4,
                  region_order=("eu", "us"), view_ttl_s=0.0)  # fmt: skip
    for n in (_node("eu-1", "eu", 8), _node("us-1", "us", 8)):
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    config = load_config(env={})
    config = dataclasses.replace(
        config, worker=dataclasses.replace(config.worker, local_placement=local)
    )
    rt = Runtime(config, SingleObjectCodec(), s)
    # this worker holds the placer partitions of `owned` (as the last rebalance assigned them)
    parts = {TP(JOBS_ROUTED, s.partition_of(r)) for r in owned}
    rt.ownership = Ownership(s.partition_of, lambda: parts)
    return rt


def _route(rt: Runtime, job: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    out = rt.place_owned(rt.scheduler.route(job, started_ns=0))
    return [(m.topic, m.record.get("region"), m.record.get("outcome", "")) for m in out]


@pytest.mark.parametrize(
    ("owned", "local", "expected"),
    [
        # eu is cheaper, so the router picks it; this worker owns it: decided here, no hop
        ({"eu", "us"}, True, [(DECISIONS_PLACEMENT, "eu", "PLACED")]),
        # another worker owns eu: handed over on jobs.routed, as before
        ({"us"}, True, [(JOBS_ROUTED, "eu", "")]),
        # switched off: always the hop
        ({"eu", "us"}, False, [(JOBS_ROUTED, "eu", "")]),
    ],
)
def test_owned_regions_are_placed_without_a_hop(
    owned: set[str], local: bool, expected: list[tuple[str, str | None, str]]
) -> None:
    assert _route(_runtime(owned, local=local), _job("j1", 4)) == expected


def test_a_spill_over_to_a_region_owned_elsewhere_is_handed_over() -> None:
    rt = _runtime({"eu"})
    assert _route(rt, _job("fill", 8)) == [(DECISIONS_PLACEMENT, "eu", "PLACED")]
    # eu is full now: the job goes to us (ranked first, or spilled), owned elsewhere
    [(topic, region, _)] = _route(rt, _job("next", 8))
    assert (topic, region) == (JOBS_ROUTED, "us")
