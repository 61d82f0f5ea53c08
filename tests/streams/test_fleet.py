"""Fleet state from node events: telemetry deltas, stale nodes, region summaries."""

from __future__ import annotations

import time
from typing import Any

import pytest

from infra.topics import DECISIONS_MIGRATION, REGION_STATE
from scorer import Assignment, ClusterState, Placer
from streams.runtime.fleet import FleetTracker
from streams.scheduler.core import Scheduler


def tracker(*nodes: dict[str, Any]) -> FleetTracker:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    fleet = FleetTracker(s, stale_after_s=5.0)
    for n in nodes:
        fleet.on_inventory(n)
    return fleet


def inv(node_id: str, region: str = "eu", gpus: int = 4) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "region": region,
        "gpu_model": "A100-80",
        "gpu_count": gpus,
        "gpu_memory_mib": 81920,
    }


def gpu(index: int, healthy: bool = True, perf: float = 1.0, util: float = 50.0) -> dict:
    return {"index": index, "healthy": healthy, "perf_factor": perf, "util_pct": util}


def tel(node_id: str, gpus: list[dict], full: bool = True, region: str = "eu") -> dict[str, Any]:
    return {
        "node_id": node_id,
        "region": region,
        "full_snapshot": full,
        "node_healthy": True,
        "gpus": gpus,
    }


def test_delta_report_patches_only_the_gpus_it_names() -> None:
    f = tracker(inv("n1"))
    f.on_telemetry(tel("n1", [gpu(i) for i in range(4)]))
    assert f.s.state.free_gpus("eu") == {"A100-80": 4}
    f.on_telemetry(tel("n1", [gpu(2, healthy=False)], full=False))
    assert f.s.state.free_gpus("eu") == {"A100-80": 3}  # GPUs 0, 1, 3 kept their health
    f.on_telemetry(tel("n1", [], full=False))  # heartbeat: no change
    assert f.s.state.free_gpus("eu") == {"A100-80": 3}


def test_telemetry_before_inventory_is_ignored() -> None:
    f = tracker()
    assert f.on_telemetry(tel("ghost", [gpu(0)])) == []
    assert "ghost" not in f.s.last_seen


def test_stale_node_stops_taking_work_and_its_jobs_are_reported() -> None:
    f = tracker(inv("n1"), inv("n2"))
    f.s.state.reserve("job-a", [Assignment("n1", (0, 1))])
    f.s.reservations["job-a"] = {"region": "eu", "assignments": [], "released": False}
    f.s.last_seen["n1"] = time.monotonic() - 10  # silent for longer than stale_after_s
    out = f.mark_stale()
    assert f.stale == {"n1"}
    assert f.s.state.free_gpus("eu") == {"A100-80": 4}  # only n2 counts
    [report] = out
    assert report.topic == DECISIONS_MIGRATION and report.record["job_id"] == "job-a"
    assert report.record["reason"] == "NODE_UNHEALTHY"
    assert f.mark_stale() == []  # reported once
    f.on_telemetry(tel("n1", [gpu(i) for i in range(4)]))  # it speaks again
    assert f.stale == set()
    assert f.s.state.free_gpus("eu") == {"A100-80": 6}


@pytest.mark.parametrize(("behind", "stale"), [(True, set()), (False, {"n1", "n2"})])
def test_a_worker_behind_on_telemetry_judges_no_node_silent(behind: bool, stale: set[str]) -> None:
    # both nodes last reported 20 s ago (stale_after_s 5) and the worker read nothing since.
    # behind (records left to read): the stream's time stands at 20 s ago, where the nodes
    # spoke, so neither is silent in it. Caught up: the stream's time runs on to now, 20 s
    # past both reports: the whole fleet went quiet, both are stale
    f = tracker(inv("n1"), inv("n2"))
    ts = int(time.time() * 1000) - 20_000
    for node_id in ("n1", "n2"):
        f.on_telemetry({**tel(node_id, [gpu(i) for i in range(4)]), "ts": ts})
        f.s.last_seen[node_id] = time.monotonic() - 20
    f._front.at = time.monotonic() - 20
    f.mark_stale(behind=behind)
    assert f.stale == stale


def test_a_silent_node_is_found_while_the_others_report() -> None:
    # n2 reports now; n1 last spoke 20 s ago in the stream's time: stale even while the
    # worker has records left to read
    f = tracker(inv("n1"), inv("n2"))
    now = int(time.time() * 1000)
    f.on_telemetry({**tel("n1", [gpu(i) for i in range(4)]), "ts": now - 20_000})
    f.s.last_seen["n1"] = time.monotonic() - 20
    f.on_telemetry({**tel("n2", [gpu(i) for i in range(4)]), "ts": now})
    f.mark_stale(behind=True)
    assert f.stale == {"n1"}


def test_summary_per_region_closes_the_window() -> None:
    f = tracker(inv("n1", "eu"), inv("n2", "us", gpus=8))
    f.on_telemetry(tel("n1", [gpu(i, util=40.0) for i in range(4)]))
    f.on_telemetry(tel("n1", [gpu(i, util=60.0) for i in range(4)]))
    out = {m.record["region"]: m for m in f.summaries()}
    assert set(out) == {"eu", "us"} and all(m.topic == REGION_STATE for m in out.values())
    eu = out["eu"].record
    assert eu["util_mean"] == 50.0  # (40 + 60) / 2 samples
    assert eu["free_gpus_by_model"] == {"A100-80": 4} and eu["nodes"] == 1
    assert out["us"].record["total_gpus_by_model"] == {"A100-80": 8}
    assert f.summaries()[0].record["util_mean"] == 0.0  # a new, empty window


def test_telemetry_sweeps_a_queue_no_release_woke() -> None:
    f = tracker(inv("n1"))
    f.s.state.reserve("hog", [Assignment("n1", (0, 1, 2, 3))])
    routed = {
        "job": {"job_id": "waiting", "ts": 1, "gpu_count": 2, "kind": "BATCH"},
        "region": "eu",
        "submitted_ts": 1,
        "attempt": 1,
        "queued_ts": 1,
    }
    f.s.queue["waiting"] = routed
    f.retry_every_s = 0.0
    assert f.on_telemetry(tel("n1", [gpu(i) for i in range(4)])) == []  # still full
    f.s.state.release("hog")  # freed without a lifecycle event (e.g. restored after a restart)
    [placed] = f.on_telemetry(tel("n1", [gpu(i) for i in range(4)]))
    assert placed.record["job_id"] == "waiting" and placed.record["outcome"] == "PLACED"
    assert "waiting" not in f.s.queue


@pytest.mark.parametrize(
    ("inventory_age_s", "stale"),
    [
        # n1 announced itself 20 s before n2's report (stale_after_s 5): silent in the stream
        (20, {"n1"}),
        # n1 announced itself 1 s before: its telemetry is still to be read
        (1, set()),
    ],
)
def test_an_inventory_counts_as_hearing_from_a_node(inventory_age_s: int, stale: set[str]) -> None:
    f = tracker()
    now = int(time.time() * 1000)
    f.on_inventory({**inv("n1"), "ts": now - inventory_age_s * 1000})
    f.on_inventory({**inv("n2"), "ts": now})
    f.on_telemetry({**tel("n2", [gpu(i) for i in range(4)]), "ts": now})
    f.s.last_seen["n1"] = time.monotonic() - 20
    f.mark_stale(behind=True)
    assert f.stale == stale


def test_a_re_announcement_that_changes_nothing_writes_nothing() -> None:
    writes: list[str] = []

    class Table(dict):  # the Faust table: each assignment is a changelog record
        def __setitem__(self, key: str, value: Any) -> None:
            writes.append(key)
            super().__setitem__(key, value)

    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes=Table(), partitions=4)
    f = FleetTracker(s, stale_after_s=5.0)
    f.on_inventory(inv("n1") | {"ts": 1000, "event_id": "inv:n1:1000"})
    f.on_inventory(inv("n1") | {"ts": 2000, "event_id": "inv:n1:2000"})  # re-announced
    f.on_inventory(inv("n1") | {"ts": 3000, "event_id": "inv:n1:3000"})
    assert writes == ["n1"] and f.ignored["inventory_unchanged"] == 2
    assert f._heard["n1"] == 3000  # still heard from: it does not go stale

    f.on_inventory(inv("n1") | {"ts": 2500})  # older than the newest, though the table says 1000
    assert f.ignored["inventory_out_of_order"] == 1 and writes == ["n1"]

    f.on_inventory(inv("n1", gpus=8) | {"ts": 4000})  # a real change is written
    assert writes == ["n1", "n1"] and s.nodes["n1"]["ts"] == 4000
    assert f.s.state.free_gpus("eu") == {"A100-80": 8}
