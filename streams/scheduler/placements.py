"""A placement's life in the book: committed (reserved, booked, PLACED), then released (its
GPUs freed, a marker left for the horizon) and, when evicted, requeued at the next epoch.

`commit` and `end_placement` are each other's inverse and live here together: what one writes
the other undoes, both through the book (`streams.scheduler.book`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_PLACEMENT
from scorer import JobSpec, PlacementResult
from scorer.network import job_flows
from streams.bandwidth.processor import flow_records
from streams.base.outbox import Outgoing, outgoing
from streams.scheduler.convert import decision_record
from streams.scheduler.job_end import EndRule
from streams.scheduler.speed_order import done_s
from streams.scheduler.tenancy import CAPACITY
from streams.scheduler.waiting import annotate, final_id

if TYPE_CHECKING:
    from streams.scheduler.protocols import Commits

__all__ = [
    "MARKER_FIELDS",
    "commit",
    "end_placement",
    "job_of",
    "observe_committed",
    "released_marker",
    "requeue",
]

log = logging.getLogger(__name__)


def commit(
    s: Commits,
    routed: Mapping[str, Any],
    result: PlacementResult,
    started_ns: int,
    *,
    note: str = "",
) -> Outgoing | None:
    """Reserve, book and announce a placement; None when the GPUs were taken meanwhile."""
    job = routed["job"]
    job_id = job["job_id"]
    statement = s.book.statement()
    if not statement.reserve(job_id, result.assignments):
        statement.discard()
        return None
    epoch, now = s.epoch_of(routed), s.clock()
    record = decision_record(
        job,
        "PLACED",
        event_id=final_id(job_id, "final", epoch),
        ts=now,
        submitted_ts=int(routed["submitted_ts"]),
        attempt=int(routed["attempt"]),
        worker_us=int(routed.get("worker_us", 0)) + us_since(started_ns),
        result=result,
        reasons=[note] if note else None,
    )
    spec = s.spec_of(routed)
    restore_s = restore_s_of(s, routed)
    run = s.tenancy.record(
        spec, record["region"], result.gpu_model, now_ms=now,
        expected_s=result.expected_duration_s, epoch=epoch, restore_s=restore_s,
    )  # fmt: skip
    annotate(record, routed, run.class_name)
    entry = {
        "region": record["region"],
        "assignments": record["assignments"],
        "gpu_model": record["gpu_model"],
        "released": False,
        "epoch": epoch,
        "routed": {k: v for k, v in routed.items() if not k.startswith("_")},
        "tenancy": run.to_entry(),
        "flows": placed_flows(s, spec, result),
        "placed_ts": record["ts"],
        "started_ms": int(record["ts"]),
        "speed": float(record.get("expected_throughput") or 0.0),
        "done_s": done_s(routed),
        "restore_s": restore_s,  # the re-planner counts progress from the end of it
    }
    statement.place(job_id, entry, epoch)
    statement.commit()
    observe_committed(s, spec)
    s.queue_why.pop(job_id, None)
    s.tenancy.done_waiting(job_id)
    if s.replanner is not None:
        s.replanner.started(job_id, record["region"])
        s.replanner.drop_room(job_id)
    return outgoing(
        DECISIONS_PLACEMENT,
        job_id,
        record,
        region=record["region"],
        partition_of=s.partition_of,
    )


def observe_committed(s: Commits, spec: JobSpec) -> None:
    """The one place a committed placement is shown to the placer: the plugins that learn
    (the job mix of fragmentation and FGD, the demand pinned to models) count it here, never
    while they score, so a dry run changes nothing (issue 34 part 4)."""
    s.placer.observe(spec)


def restore_s_of(s: Commits, routed: Mapping[str, Any]) -> float:
    """A job that kept work from an earlier epoch resumes from its checkpoint: it reloads
    it first (`ReplanConfig.restore_s`, what the executor charges), then computes."""
    resumes = done_s(routed) > 0 or float(routed.get("progress") or 0.0) > 0
    return s.replan.restore_s if resumes else 0.0


def placed_flows(s: Commits, spec: JobSpec, result: PlacementResult) -> list[dict[str, Any]]:
    """A placed job's cross-region flows, noted in the network view (for the placer's
    link estimates and the bandwidth processor) and returned for the reservation table."""
    if s.network is None:
        return []
    flows = job_flows(spec, s.state, result.assignments, s.network.settings)
    s.network.note_placed(spec.job_id, flows)
    return flow_records(flows)


def end_placement(
    s: Commits,
    job_id: str,
    entry: Mapping[str, Any],
    evicted: Mapping[str, Any] | None,
    rule: EndRule | None = None,
) -> list[Outgoing]:
    """A held placement is over: free its GPUs, requeue it if evicted (or failed and the
    rule says so), tell its preemptor."""
    ended = rule.state if rule is not None else ""
    s.book.release(job_id, released_marker(entry, ended))
    if s.network is not None:
        s.network.note_released(job_id)
    if s.replanner is not None:  # a move of it in flight ends too (its hold is released)
        s.replanner.forget(job_id)
    s.tenancy.forget(job_id)
    counted = rule is not None and rule.counted
    out = requeue(s, job_id, entry, evicted, counted=counted) if evicted is not None else []
    return out + s.preemption.on_gone(job_id)


# what a replayed end or a rebuild reads; `ended`, `tenant`, `gpus`: the job views'
MARKER_FIELDS = ("region", "epoch", "placed_ts", "ended", "ended_ts", "cancelled")


def released_marker(entry: Mapping[str, Any], ended: str = "") -> dict[str, Any]:
    """What stays of a released reservation for the horizon: enough to know a replayed end or
    a stale changelog entry of that placement is over (a few hundred bytes less per job a
    minute ago: 100 jobs/s for a 10-minute horizon is 60,000 of them)."""
    marker = {k: entry[k] for k in MARKER_FIELDS if k in entry} | {"released": True}
    if ended:  # the job is over (FINISHED, FAILED, TIMEOUT, CANCELLED): `gpuflow jobs` says so
        marker |= {"ended": ended, "ended_ts": int(time.time() * 1000)} | job_of(entry)
    return marker


def job_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    """Whose job a marker was, and its GPUs (what `streams.job_views` shows of ended jobs)."""
    routed = entry.get("routed") or {}
    job = routed.get("job") or {}
    if not job:
        return {k: entry[k] for k in ("tenant", "gpus") if k in entry}
    gpus = int(job.get("gpu_count") or 1) * int(job.get("gpu_milli") or 1000) / 1000
    tenant = routed.get("verified_tenant") or job.get("tenant") or "default"
    return {"tenant": str(tenant), "gpus": gpus}


def requeue(
    s: Commits,
    job_id: str,
    entry: Mapping[str, Any],
    event: Mapping[str, Any],
    *,
    counted: bool = False,
) -> list[Outgoing]:
    """An evicted (or failed, `streams.scheduler.job_end`) placement's job waits again at the next
    epoch, with its progress; `counted`: the failure uses one of its retries."""
    epoch = int(entry.get("epoch") or 0)
    routed = entry.get("routed")
    if s.book.epoch(job_id) != epoch or job_id in s.queue:
        return []  # requeued already
    if not routed:
        log.error("evicted job cannot be requeued (no record kept) job_id=%s", job_id)
        return []
    progress = float(event.get("progress") or routed.get("progress") or 0.0)
    waiting = {
        **routed,
        "epoch": epoch + 1,
        "queued_ts": s.clock(),
        "progress": progress,
        "region": entry["region"],
        "candidates": [],
        "queue_region": entry["region"],
        "refusals": {},
        "evictions": int(routed.get("evictions") or 0) + 1,
        "failures": int(routed.get("failures") or 0) + int(counted),
    }
    s.book.reopen(job_id, epoch + 1)
    kind = str(event.get("type") or "EVICTED").lower()
    detail = event.get("detail") or kind
    reason = f"{kind} at epoch {epoch} ({detail}) with {progress:.0%} done; waiting again"
    log.info("requeued job_id=%s epoch=%d progress=%.3f", job_id, epoch + 1, progress)
    return [s.enqueue(waiting, CAPACITY, reason)]


def us_since(started_ns: int) -> int:
    return (time.perf_counter_ns() - started_ns) // 1000
