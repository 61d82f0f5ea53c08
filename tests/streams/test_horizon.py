"""Worker memory bounded by live jobs plus a horizon: decided jobs and released reservations."""

from __future__ import annotations

from typing import Any

from scorer import ClusterState, Placer
from streams.scheduler.core import Scheduler
from streams.scheduler.horizon import DecidedJobs, ReleasedLog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_decided_jobs_forget_after_the_horizon_unless_kept() -> None:
    clock = Clock()
    jobs = DecidedJobs(60.0, clock)
    jobs.add("old")  # decided at t=1000
    jobs.add("logged", age_s=50.0)  # read back from the log: decided at t=950
    clock.now = 1030.0
    jobs.add("new")  # t=1030
    assert jobs == {"old", "logged", "new"}
    clock.now = 1061.0  # cutoff 1001: "old" (1000) and "logged" (950) are past it
    assert jobs.prune(keep=lambda j: j == "old") == 1  # "old" still holds GPUs
    assert jobs == {"old", "new"}
    clock.now = 1091.0  # cutoff 1031: "new" (1030) goes too; "old" is looked at again
    assert jobs.prune(keep=lambda j: False) == 1  # a horizon after it was last kept
    assert jobs == {"old"}
    clock.now = 1122.0
    assert jobs.prune(keep=lambda j: False) == 1
    assert len(jobs) == 0


def test_a_job_added_again_or_discarded_is_judged_by_its_latest_entry() -> None:
    clock = Clock()
    jobs = DecidedJobs(60.0, clock)
    jobs.add("again")
    jobs.add("gone")
    clock.now = 1050.0
    jobs.add("again")  # decided again (a new epoch): remembered from t=1050
    jobs.discard("gone")
    clock.now = 1061.0  # both first entries come due: one was replaced, one discarded
    assert jobs.expire(keep=lambda j: False) == []
    assert jobs == {"again"}
    jobs.add("late", age_s=100.0)  # read back from the log: decided at t=961, queued last,
    clock.now = 1100.0  # so it waits behind "again" (due 1110): forgotten late, never lost
    assert jobs.expire(keep=lambda j: False) == []
    clock.now = 1111.0
    assert jobs.expire(keep=lambda j: False) == ["again", "late"]
    assert len(jobs) == 0


def test_a_tick_forgets_the_epochs_of_the_jobs_it_forgets() -> None:
    clock = Clock()
    s = _scheduler(60.0, clock)
    _decide(s, _job("short"))
    s.on_job_event({"job_id": "short", "type": "FINISHED", "region": "eu"})
    assert "short" in s.epochs
    clock.now += 61.0
    s.on_tick(0)  # decision forgotten; the released marker still names it
    assert "short" not in s.final and "short" in s.epochs
    _decide(s, _job("next"))
    s.on_job_event({"job_id": "next", "type": "FINISHED", "region": "eu"})  # deletes the marker
    assert "short" not in s.reservations and "short" not in s.epochs


def test_released_log_hands_out_each_expired_job_once_per_region() -> None:
    clock = Clock()
    log = ReleasedLog(10.0, clock)
    log.add("eu", ["a", "b"])  # t=1000
    clock.now = 1005.0
    log.add("eu", ["c"])
    log.add("us", ["d"])
    clock.now = 1011.0  # cutoff 1001: a and b (1000) expire, c and d (1005) do not
    assert log.expired("eu") == ["a", "b"]
    assert log.expired("eu") == []
    assert log.expired("us") == []
    assert len(log) == 2


def _scheduler(horizon_s: float, clock: Clock) -> Scheduler:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    s.book.final = DecidedJobs(horizon_s, clock)
    s.book.released = ReleasedLog(horizon_s, clock)
    s.nodes["n1"] = {
        "node_id": "n1", "region": "eu", "gpu_model": "A100-80", "gpu_count": 8,
        "gpu_memory_mib": 81920, "zone": "z1", "rack": "r1", "price_per_gpu_hour": 2.0,
    }  # fmt: skip
    s.rebuild({})
    return s


def _job(job_id: str) -> dict[str, Any]:
    return {"event_id": f"e-{job_id}", "ts": 1, "job_id": job_id, "gpu_count": 4,
            "gpu_milli": 1000, "kind": "TRAINING", "precision": "FP16"}  # fmt: skip


def _decide(s: Scheduler, record: dict[str, Any]) -> list[Any]:
    out = s.route(record, started_ns=0)
    return [m for r in out for m in s.place(dict(r.record), started_ns=0)]


def test_worker_state_is_live_jobs_plus_the_horizon() -> None:
    clock = Clock()
    s = _scheduler(600.0, clock)
    assert [d.record["outcome"] for d in _decide(s, _job("done"))] == ["PLACED"]
    assert [d.record["outcome"] for d in _decide(s, _job("running"))] == ["PLACED"]
    s.on_job_event({"job_id": "done", "type": "FINISHED", "region": "eu"})
    assert s.reservations["done"]["released"] is True
    clock.now += 601.0  # both decisions are past the horizon; "running" still holds 4 GPUs
    s.on_tick(0)
    assert s.final == {"running"}
    # the next release in the region deletes markers older than the horizon, its own stays
    s.on_job_event({"job_id": "running", "type": "FINISHED", "region": "eu"})
    assert set(s.reservations) == {"running"}
    assert s.reservations["running"]["released"] is True
    # until the next sweep forgets it, a duplicate submission is still refused
    assert _decide(s, _job("running")) == []
