"""Regional state has one owner: entries go to their region's changelog partition, and a
revoked region's nodes, reservations and queued jobs leave the worker's memory."""

from __future__ import annotations

from typing import Any

import faust
import pytest

from infra.topics import JOBS_ROUTED, RegionPartitioner
from scorer import ClusterState, Placer
from streams.runtime.ownership import Ownership, region_table
from streams.scheduler.core import Scheduler

ORDER = ("a", "b", "c")  # pinned: a -> 0, b -> 1, c -> 2 of 4 partitions


def node(node_id: str, region: str) -> dict[str, Any]:
    return {"node_id": node_id, "region": region, "gpu_model": "A100-80", "gpu_count": 8,
            "gpu_memory_mib": 81920, "zone": "z", "rack": "r",
            "price_per_gpu_hour": 2.0}  # fmt: skip


def placed(job_id: str, region: str, node_id: str) -> dict[str, Any]:
    assignment = {"node_id": node_id, "gpu_indices": [0], "gpu_milli": 1000}
    return {"job_id": job_id, "outcome": "PLACED", "region": region, "gpu_model": "A100-80",
            "assignments": [assignment]}  # fmt: skip


def scheduler() -> Scheduler:
    state = ClusterState()
    s = Scheduler(
        state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4,
        region_order=ORDER,
    )  # fmt: skip
    for n in (node("a1", "a"), node("a2", "a"), node("b1", "b"), node("c1", "c")):
        s.nodes[n["node_id"]] = n
    s.queue["qa"] = {"region": "a", "job": {"job_id": "qa"}, "queued_ts": 1}
    s.queue["qb"] = {"region": "b", "job": {"job_id": "qb"}, "queued_ts": 1}
    return s


def test_a_revoked_region_leaves_memory() -> None:
    s = scheduler()
    logged = {"ja": placed("ja", "a", "a1"), "jb": placed("jb", "b", "b1")}
    s.rebuild(logged)  # owns everything: every region, both placements restored
    assert set(s.state.region_views()) == {"a", "b", "c"}
    assert set(s.state.jobs) == {"ja", "jb"}

    owns = {"a", "c"}.__contains__  # a rebalance took b away
    s.rebuild(logged, owns=owns)
    assert set(s.state.region_views()) == {"a", "c"}
    assert set(s.nodes) == {"a1", "a2", "c1"}
    assert set(s.reservations) == {"ja"} and set(s.state.jobs) == {"ja"}
    assert set(s.queue) == {"qa"}
    assert "b1" not in s.last_seen
    assert set(s.region_views()) == {"a", "c"}  # the router's cached view was dropped too


def test_placements_of_regions_owned_elsewhere_are_not_restored_from_the_log() -> None:
    s = scheduler()
    s.rebuild({"jb": placed("jb", "b", "b1")}, owns={"a"}.__contains__)
    assert "jb" not in s.reservations and s.state.jobs == {}
    assert "jb" in s.final  # still never decided twice, whoever owns b


class FakeTP:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition


def test_ownership_is_the_partitions_of_routed_jobs_assigned() -> None:
    assigned = [FakeTP(JOBS_ROUTED, 1), FakeTP(JOBS_ROUTED, 2), FakeTP("other", 0)]
    own = Ownership(RegionPartitioner(4, ORDER), lambda: assigned)
    assert own.partitions() == {1, 2}
    assert [r for r in ORDER if own.owns(r)] == ["b", "c"]


@pytest.fixture
def table() -> Any:
    app = faust.App("ownership-test", broker="kafka://127.0.0.1:9", store="memory://")
    t = region_table(app, "reservations", 4, RegionPartitioner(4, ORDER))
    sent: list[tuple[int | None, str, Any]] = []

    class Sent:
        class message:  # the shape Faust's send future has
            partition = 0

    def send_changelog(partition: int | None, key: Any, value: Any, *a: Any, **k: Any) -> Any:
        sent.append((partition, key, value))
        return Sent

    t.send_changelog = send_changelog
    t.sent = sent
    return t


def test_entries_go_to_their_regions_changelog_partition_outside_any_event(table: Any) -> None:
    # no current event (a rebuild after a rebalance): Faust's default would raise or pick the
    # waking event's partition; ours follows the region
    table["j1"] = {"region": "c", "released": False}
    table["j2"] = {"region": "b"}
    del table["j1"]  # the tombstone goes where the entry was
    assert table.sent == [
        (2, "j1", {"region": "c", "released": False}),
        (1, "j2", {"region": "b"}),
        (2, "j1", None),
    ]
    table.forget_local(["j2"])  # dropped from memory, nothing written
    assert "j2" not in table and len(table.sent) == 3


def routed(job_id: str, region: str, attempt: int) -> dict[str, Any]:
    job = {"event_id": f"e-{job_id}", "ts": 1_000, "job_id": job_id, "gpu_count": 1,
           "gpu_milli": 1000, "kind": "TRAINING", "precision": "FP16"}  # fmt: skip
    return {"job": job, "region": region, "candidates": [], "attempt": attempt,
            "submitted_ts": 1_000, "refusals": {}, "queue_region": None}  # fmt: skip


def test_replays_after_a_takeover_do_not_start_a_second_path_for_a_job() -> None:
    # a dead worker had routed j1 and forwarded j2 from region a (attempt 1) to b (attempt 2)
    s = scheduler()
    s.rebuild({})
    s.note_routed({"j1": 1, "j2": 2, "done": 1})
    assert s.route(routed("j1", "a", 1)["job"], started_ns=0) == []  # not routed again
    assert s.place(routed("j2", "a", 1), started_ns=0) == []  # already past region a
    [decision] = s.place(routed("j2", "b", 2), started_ns=0)  # its live path goes on
    assert decision.record["outcome"] == "PLACED" and decision.record["region"] == "b"
    [fresh] = s.route(routed("j3", "a", 1)["job"], started_ns=0)  # new jobs route as ever
    assert fresh.record["job"]["job_id"] == "j3"
