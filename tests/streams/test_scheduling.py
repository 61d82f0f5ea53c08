"""The worker's scheduling mechanism against plain dicts: route, place, spill, queue, release."""

from __future__ import annotations

import time
from typing import Any

import pytest

from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED, region_partition
from scorer import ClusterState, Placer
from scorer.catalog import Catalog, GpuModelSpec, default_catalog
from streams.base.outbox import Outgoing
from streams.scheduler.core import Scheduler

PARTS = 4


def node(node_id: str, region: str, model: str = "A100-80", gpus: int = 8) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "region": region,
        "gpu_model": model,
        "gpu_count": gpus,
        "gpu_memory_mib": 81920 if "80" in model or model == "H100" else 16384,
        "zone": "z1",
        "rack": "r1",
        "price_per_gpu_hour": 2.0,
    }


def job(job_id: str, **kw: Any) -> dict[str, Any]:
    return {
        "event_id": f"e-{job_id}",
        "ts": 1_000,
        "job_id": job_id,
        "gpu_count": 1,
        "gpu_milli": 1000,
        "kind": "TRAINING",
        "precision": "FP16",
        **kw,
    }


def make(*nodes: dict[str, Any]) -> Scheduler:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=PARTS)
    for n in nodes:
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    return s


def restarted(s: Scheduler, reservations: dict[str, Any]) -> Scheduler:
    """A new worker's scheduler over `s`'s nodes and the given reservations table."""
    state = ClusterState()
    return Scheduler(
        state,
        Placer(state),
        reservations=reservations,
        queue={},
        nodes=dict(s.nodes),
        partitions=PARTS,
    )


def now() -> int:
    return time.perf_counter_ns()


def decide(s: Scheduler, record: dict[str, Any]) -> list[Outgoing]:
    """Route a job and follow it through every placer hop, as the broker would."""
    out = s.route(record, started_ns=now())
    decisions = []
    while out:
        msg = out.pop(0)
        if msg.topic == JOBS_ROUTED:
            assert msg.partition == region_partition(msg.record["region"], PARTS)
            out.extend(s.place(dict(msg.record), started_ns=now()))
        else:
            decisions.append(msg)
    return decisions


def test_placed_job_reserves_and_is_final() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("j1", gpu_count=4))
    assert d.topic == DECISIONS_PLACEMENT and d.record["outcome"] == "PLACED"
    assert d.partition == region_partition("eu", PARTS)
    assert sum(len(a["gpu_indices"]) for a in d.record["assignments"]) == 4
    assert s.reservations["j1"]["released"] is False
    assert s.state.free_gpus("eu") == {"A100-80": 4}
    # a replayed submission or routed event decides nothing new
    assert decide(s, job("j1", gpu_count=4)) == []


def test_spills_over_to_next_region_when_first_is_full() -> None:
    s = make(node("n1", "eu", gpus=2), node("n2", "us", gpus=8))
    decide(s, job("big0", gpu_count=2, allowed_regions=["eu"]))
    [d] = decide(s, job("j2", gpu_count=2))
    assert d.record["outcome"] == "PLACED" and d.record["region"] == "us"


def test_queues_when_full_and_places_after_release() -> None:
    s = make(node("n1", "eu", gpus=8))
    decide(s, job("a", gpu_count=8))
    [queued] = decide(s, job("b", gpu_count=8))
    assert queued.record["outcome"] == "QUEUED" and "b" in s.queue
    assert decide(s, job("b", gpu_count=8)) == []  # replay while queued: nothing new
    out = s.on_job_event({"job_id": "a", "type": "FINISHED", "region": "eu"})
    [placed] = [m for m in out if m.topic == DECISIONS_PLACEMENT]
    assert placed.record["job_id"] == "b" and placed.record["outcome"] == "PLACED"
    assert "b" not in s.queue
    # releasing twice is harmless and frees nothing more
    assert s.on_job_event({"job_id": "a", "type": "FINISHED", "region": "eu"}) == []
    assert s.state.free_gpus("eu") == {}


def test_never_fits_is_rejected_with_reasons() -> None:
    s = make(node("n1", "eu", gpus=8), node("n2", "us", gpus=8))
    [d] = decide(s, job("huge", gpu_count=64))
    assert d.record["outcome"] == "REJECTED"
    assert d.record["reasons"]
    assert d.record["attempt"] == 2  # both regions were asked


def test_invalid_spec_is_rejected_not_crashed() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("bad", gpu_count=2, gpu_milli=500))
    assert d.record["outcome"] == "REJECTED"
    assert any("gpu_milli" in r for r in d.record["reasons"])


def test_unknown_region_is_rejected() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("x", allowed_regions=["mars"]))
    assert d.record["outcome"] == "REJECTED" and "mars" in d.record["reasons"][0]


def test_rebuild_reconciles_tables_with_the_decision_log() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("logged", gpu_count=2))
    [_] = decide(s, job("unlogged", gpu_count=2))
    # crash: the table kept both, but only "logged" made it into the decision log,
    # and a third decision reached the log while its table write was lost.
    lost_table = dict(
        d.record,
        job_id="lost-table",
        assignments=[{"node_id": "n1", "gpu_indices": [6, 7], "gpu_milli": 1000}],
    )
    fresh = restarted(s, dict(s.reservations))
    fresh.rebuild({"logged": d.record, "lost-table": lost_table})
    assert set(fresh.reservations) == {"logged", "lost-table"}
    assert fresh.final == {"logged", "lost-table"}
    assert fresh.state.free_gpus("eu") == {"A100-80": 4}  # 2 + 2 held, "unlogged" dropped
    # the dropped job is back in its queue from the record its entry kept (a placement made
    # by a retry pass has no input event that would replay it); a replayed submission decides
    # nothing new, and the next retry decides it again, exactly once
    assert "unlogged" in fresh.queue
    assert decide(fresh, job("unlogged", gpu_count=2)) == []
    [again] = fresh.retry_queue("eu")
    assert again.record["outcome"] == "PLACED" and again.record["job_id"] == "unlogged"
    assert fresh.retry_queue("eu") == []


def test_a_placement_whose_decision_retention_took_unread_is_kept_not_requeued() -> None:
    s = make(node("n1", "eu"))
    decide(s, job("old", gpu_count=2))
    time.sleep(0.005)
    decide(s, job("new", gpu_count=2))
    placed = {j: int(s.reservations[j]["placed_ts"]) for j in ("old", "new")}
    assert placed["old"] < placed["new"]
    # neither decision is in the log the restarted worker reads: retention took the log start
    # past its saved position, and its ledger says decisions before "new" may be missing
    fresh = restarted(s, dict(s.reservations))
    fresh.rebuild({}, trimmed_ms=placed["new"])
    assert "old" in fresh.final and "old" not in fresh.queue  # it may be running: keep it
    assert fresh.state.jobs.keys() == {"old"}
    assert "new" in fresh.queue and "new" not in fresh.reservations  # never announced
    assert fresh.state.free_gpus("eu") == {"A100-80": 6}  # old's 2 held, nothing twice


def test_released_reservations_stay_released_after_rebuild() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("done", gpu_count=8))
    s.on_job_event({"job_id": "done", "type": "FINISHED", "region": "eu"})
    fresh = restarted(s, dict(s.reservations))
    fresh.rebuild({"done": d.record})
    assert fresh.state.free_gpus("eu") == {"A100-80": 8}


@pytest.mark.parametrize("kind", ["STARTED", "PHASE", "CHECKPOINTED"])
def test_non_terminal_events_hold_gpus(kind: str) -> None:
    s = make(node("n1", "eu"))
    decide(s, job("j", gpu_count=8))
    assert s.on_job_event({"job_id": "j", "type": kind, "region": "eu"}) == []
    assert s.state.free_gpus("eu") == {}


def test_rebuild_twice_on_live_state_keeps_decisions_not_yet_in_the_log() -> None:
    s = make(node("n1", "eu"))
    [d] = decide(s, job("logged", gpu_count=2))
    decide(s, job("fresh", gpu_count=2))  # decided, but the log read below predates it
    s.rebuild({"logged": d.record})
    s.rebuild({"logged": d.record})  # a second rebalance: must not double-count or forget
    assert s.final == {"logged", "fresh"}
    assert set(s.reservations) == {"logged", "fresh"}
    assert s.state.free_gpus("eu") == {"A100-80": 4}
    assert decide(s, job("fresh", gpu_count=2)) == []


def test_rebuild_trusts_the_job_event_log_over_a_stale_table() -> None:
    s = make(node("n1", "eu"))
    [a] = decide(s, job("a", gpu_count=8))
    # crash: "a" finished (its FINISHED is in the log) but the table's release was lost,
    # and "b" took the same GPUs afterwards
    s.state.release("a")
    [b] = decide(s, job("b", gpu_count=8))
    table = dict(s.reservations)
    table["a"] = {**table["a"], "released": False}
    fresh = restarted(s, table)
    fresh.rebuild({"a": a.record, "b": b.record}, ended={"a"})
    assert fresh.state.reservation("a") is None
    assert fresh.state.reservation("b") is not None
    assert fresh.reservations["a"]["released"] is True
    assert fresh.state.free_gpus("eu") == {}


def test_a_region_without_a_view_yet_gets_the_job_its_owner_decides() -> None:
    """Worker-side view of "us" not in yet (its owner has not published a summary): a job
    pinned to "us" goes to "us"'s partition instead of being rejected; the owner of a region
    with no nodes at all refuses it there."""
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=PARTS,
                  region_order=("eu", "us"))  # fmt: skip
    s.nodes["e1"] = node("e1", "eu")
    s.rebuild({})
    [routed] = s.route(job("pinned", allowed_regions=["us"]), started_ns=0)
    assert routed.topic == JOBS_ROUTED and routed.record["region"] == "us"
    assert routed.partition == region_partition("us", PARTS, ("eu", "us"))
    [hop] = s.route(job("nowhere", allowed_regions=["mars"]), started_ns=0)
    assert hop.topic == JOBS_ROUTED and hop.record["region"] == "mars"
    [refused] = s.place(hop.record, started_ns=0)  # this worker owns mars's partition here
    assert refused.topic == DECISIONS_PLACEMENT and refused.record["outcome"] == "REJECTED"
    assert any("mars" in r for r in refused.record["reasons"])


def test_the_router_knows_the_models_of_the_placers_catalogue() -> None:
    # a model only a catalogue file adds: routing with the built-in catalogue saw no region
    # with it, scored every region 0 and sent the job to "eu" first, to be refused there
    base = default_catalog()
    catalog = Catalog([*base, GpuModelSpec("X9", fp16_tflops=900.0,
                       memory_gb=192.0, price_per_gpu_hour=4.0)])  # fmt: skip
    state = ClusterState(catalog)
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=PARTS)
    for n in (node("n1", "eu"), {**node("n2", "us", model="X9"), "gpu_memory_mib": 196608}):
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    [routed] = s.route(job("j1", allowed_gpu_models=["X9"]), started_ns=0)
    assert routed.topic == JOBS_ROUTED and routed.record["region"] == "us"
    [d] = s.place(dict(routed.record), started_ns=0)
    assert d.record["outcome"] == "PLACED" and d.record["gpu_model"] == "X9"


def test_a_batch_of_releases_defers_the_queue_pass_to_one_per_region() -> None:
    s = make(node("n1", "eu", gpus=8))
    decide(s, job("a", gpu_count=4))
    decide(s, job("b", gpu_count=4))
    [queued] = decide(s, job("c", gpu_count=8))
    assert queued.record["outcome"] == "QUEUED"
    released: list[str] = []
    for done in ("a", "b"):
        end = {"job_id": done, "type": "FINISHED", "region": "eu"}
        # no pass yet: the freed GPUs wait for the batch's one pass
        assert s.on_job_event(end, released=released) == []
    assert released == ["eu", "eu"] and "c" in s.queue
    assert s.state.free_gpus("eu") == {"A100-80": 8}
    [placed] = s.after_release(list(dict.fromkeys(released)))
    assert placed.record["job_id"] == "c" and placed.record["outcome"] == "PLACED"
    # a replayed end in a later batch releases nothing and asks for no pass
    again: list[str] = []
    assert s.on_job_event({"job_id": "a", "type": "FINISHED", "region": "eu"}, released=again) == []
    assert again == []
