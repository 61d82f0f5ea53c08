"""Cancel requests on the scheduler (issue 31): queued jobs leave the queue for good, running
ones get a CANCEL preemption and end CANCELLED (reported, or written by the worker after the
grace period), quota comes back, and only the owner or an admin key may cancel."""

from __future__ import annotations

from typing import Any

from infra.topics import DECISIONS_PREEMPTION, JOBS_EVENTS
from schemas.registry import default_schemas
from schemas.signing import KeyRing, Signer, TenantKey, Verifier
from streams.web.queue_view import queue_snapshot

POLICY = {
    "tenants": {"A": {"quotas": [{"nominal": 8}]}, "B": {"quotas": [{"nominal": 8}]}},
    "preemption": {"grace_period_s": 30},
}
KEYS = [TenantKey("A", "ka", "sa"), TenantKey("B", "kb", "sb"), TenantKey("ops", "kops", "so")]
SCHEMA = default_schemas().get("CancelRequest")


def request(job_id: str, tenant: str = "A", **kw: Any) -> dict[str, Any]:
    return {"event_id": f"c-{job_id}-{tenant}", "ts": 0, "job_id": job_id, "tenant": tenant,
            "reason": "", "requested_by": "alice", "key_id": "", "signature": "", **kw}  # fmt: skip


def cancel(w: Any, job_id: str, **kw: Any) -> Any:
    done = w.s.cancels.on_request(request(job_id, **kw))
    w.follow(list(done.messages))
    return done


def used(w: Any, tenant: str) -> float:
    """GPUs the tenant uses in eu, as the quota view (`/queue/`, `gpuflow queue`) shows them."""
    view = queue_snapshot(w.s)["regions"]["eu"]["tenants"]
    return sum(c["used"] for t in view if t["tenant"] == tenant for c in t["cells"])


def test_a_queued_job_leaves_the_queue_and_is_never_placed(world: Any, overlaps: Any) -> None:
    w = world(policy=POLICY)
    w.submit("r", gpu_count=8, tenant="A")
    w.submit("q", gpu_count=8, tenant="A")
    assert "q" in w.s.queue
    done = cancel(w, "q")
    assert done.note == "queued: cancelled" and "q" not in w.s.queue
    [last] = [d for d in w.decisions() if d["job_id"] == "q"][-1:]
    assert last["outcome"] == "REJECTED" and last["reasons"] == ["cancelled by alice"]
    assert w.s.reservations["q"]["ended"] == "CANCELLED"
    w.report("r", "FINISHED")  # the GPUs q waited for come free: nothing takes them
    assert w.placed("q") == [] and w.s.state.free_gpus("eu") == {"A100-80": 8}
    r = w.restarted()
    assert r.submit("q", gpu_count=8, tenant="A") == []  # replayed: decided (cancelled)
    r.tick(1)
    assert r.placed("q") == [] and overlaps(r) == []


def test_a_running_job_is_stopped_and_its_gpus_and_quota_come_back(world: Any) -> None:
    w = world(policy=POLICY)
    w.submit("r", gpu_count=8, tenant="A")
    w.submit("b", gpu_count=8, tenant="B")  # waits for r's GPUs
    assert used(w, "A") == 8
    done = cancel(w, "r", reason="wrong data")
    [stop] = [m.record for m in done.messages if m.topic == DECISIONS_PREEMPTION]
    assert (stop["cause"], stop["victim_epoch"], stop["grace_period_s"]) == ("CANCEL", 0, 30)
    assert stop["reason"] == "cancelled by alice: wrong data"
    assert w.s.state.reservation("r") is not None  # held until the executor says it stopped
    w.report("r", "CANCELLED", exit_code=-15)
    assert used(w, "A") == 0 and w.placed("b") != []
    assert "r" not in w.s.queue and w.s.reservations["r"]["ended"] == "CANCELLED"


def test_an_eviction_reported_instead_still_ends_a_cancelled_job(world: Any) -> None:
    w = world(policy=POLICY)
    w.submit("r", gpu_count=8, tenant="A")
    cancel(w, "r")
    w.report("r", "EVICTED", progress=0.5)  # an executor that stopped it for another reason
    assert "r" not in w.s.queue and [int(d["epoch"]) for d in w.placed("r")] == [0]


def test_no_report_within_the_grace_period_the_worker_reports_it(world: Any) -> None:
    w = world(policy=POLICY)
    w.submit("r", gpu_count=8, tenant="A")
    cancel(w, "r")
    assert [m for m in w.tick(10) if m.topic == JOBS_EVENTS] == []
    r = w.restarted()  # the deadline survives a restart (it is on the reservation entry)
    [report] = [m.record for m in r.tick(25) if m.topic == JOBS_EVENTS]
    assert (report["type"], report["epoch"]) == ("CANCELLED", 0)
    assert report["event_id"] == "r:CANCELLED:0"  # the executor's id: one end either way
    r.events.append(dict(report))
    r.follow(r.s.on_job_event(report))  # read back by the lifecycle, as any end
    assert r.s.state.free_gpus("eu") == {"A100-80": 8} and used(r, "A") == 0


def test_cancelling_a_finished_or_unknown_job_changes_nothing(world: Any) -> None:
    w = world(policy=POLICY)
    w.submit("r", gpu_count=1, tenant="A")
    w.report("r", "FINISHED")
    assert cancel(w, "r").note == "already over" and cancel(w, "r").held  # not forwarded
    ghost = cancel(w, "ghost")
    assert ghost.note == "not held by this worker" and not ghost.held  # another may hold it
    assert [d["outcome"] for d in w.decisions()] == ["PLACED"]


def _signed(key: TenantKey, job_id: str, now: int) -> dict[str, Any]:
    record = request(job_id, tenant=key.tenant, event_id=f"c-{job_id}-{key.key_id}")
    return Signer(key).sign(record, now_ms=now, schema=SCHEMA)


def test_only_the_owner_or_an_admin_key_may_cancel(world: Any) -> None:
    w = world(policy=POLICY)
    w.s.cancels.verifier = Verifier(KeyRing(KEYS, admins=["kops"]), clock_ms=lambda: w.now)
    w.submit("r", gpu_count=8, tenant="A")
    w.submit("s", gpu_count=8, tenant="A")  # queued

    def ask(record: dict[str, Any]) -> Any:
        key = str(record["job_id"]).encode()
        return w.s.cancels.on_request(record, kafka_key=key, position=record["event_id"],
                                      schema=SCHEMA)  # fmt: skip

    other = ask(_signed(KEYS[1], "r", w.now))
    assert other.refused == "tenant 'B' may not cancel a job of tenant 'A'"
    assert other.messages == () and w.s.reservations["r"].get("cancelled") is None
    assert ask(request("r", tenant="A")).refused == (
        "unsigned submission: tenant keys are configured"
    )
    forged = {**_signed(KEYS[1], "r", w.now), "tenant": "A"}
    assert ask(forged).refused == "key 'kb' does not belong to tenant 'A'"
    assert ask(_signed(KEYS[0], "r", w.now)).note == "running: stopping"
    assert ask(_signed(KEYS[2], "s", w.now)).note == "queued: cancelled"  # admin: any tenant


def test_a_request_for_a_job_never_seen_is_forwarded_once_to_partitions_owned_elsewhere() -> None:
    from streams.scheduler.cancel_agent import FORWARDED, forward_to, forwarded_from

    assert forward_to(4, read_from=1, owned={0, 1}) == [2, 3]
    assert forward_to(2, read_from=0, owned={0, 1}) == []  # one worker: nowhere to go
    assert forwarded_from([(FORWARDED, b"1:42")]) == (1, 42) == forwarded_from({FORWARDED: b"1:42"})
    assert forwarded_from([(FORWARDED.encode(), b"3:7")]) == (3, 7)  # type: ignore[list-item]
    assert forwarded_from(None) is None and forwarded_from([("other", b"x")]) is None
