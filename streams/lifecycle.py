"""Job lifecycle: the executor's reports end placements, epoch by epoch.

A placement (job, epoch) ends with its epoch's FINISHED, FAILED, EVICTED, TIMEOUT or CANCELLED:
its GPUs are freed, an evicted job (or a failed one the rules of `streams.job_end` requeue)
waits again at epoch + 1 with the progress it reported, the preemptor waiting on
it (if any) is told, and the region's queue is tried. Reports of an older epoch are ignored, so
a late EVICTED can never free a newer placement's GPUs; replayed reports change nothing. An
end written to the log before its placement was decided (a finish before a start, a stale or
hostile event) frees nothing either. Released entries stay as markers for the horizon
(`streams.horizon`), then are deleted on their region's own event.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streams.base.outbox import Outgoing
from streams.horizon import forget_epochs
from streams.job_end import ENDS, EndRule, end_rule
from streams.tenancy import CAPACITY

if TYPE_CHECKING:
    from streams.scheduling import Scheduler

__all__ = [
    "end_placement",
    "force_evict",
    "job_of",
    "on_job_event",
    "released_marker",
    "requeue",
    "rule_for",
]

log = logging.getLogger(__name__)


def on_job_event(
    s: Scheduler,
    event: Mapping[str, Any],
    *,
    produced_ms: int | None = None,
    released: list[str] | None = None,
) -> list[Outgoing]:
    """Release GPUs when a placement ends (its epoch's end event); an evicted job is
    requeued with its progress; then the region's queue is tried, or, with `released`
    given, the region is added to it for the caller's one pass after a batch of events.
    `produced_ms`: when the event was written to the log (its Kafka timestamp), if known."""
    kind, job_id = event["type"], event["job_id"]
    if kind == "CHECKPOINTED":
        s.tenancy.checkpointed(job_id, int(event.get("ts") or s.clock()))
        return []
    if kind not in ENDS:
        return []
    entry = s.reservations.get(job_id)
    if entry is None:
        s.state.release(job_id)  # idempotent
        return []
    if int(entry.get("epoch") or 0) != int(event.get("epoch") or 0):
        return []  # an older placement's report (e.g. a late EVICTED after the grace period)
    if produced_ms is not None and produced_ms < int(entry.get("placed_ts") or 0):
        log.warning("end of job written before its placement ignored job_id=%s", job_id)
        return []
    rule = rule_for(entry, event)
    if entry.get("released"):  # replayed: the release is done, a requeue may not be
        out = requeue(s, job_id, entry, event, counted=rule.counted) if rule.requeue else []
        return out + s.preemption.on_gone(job_id)
    out = end_placement(s, job_id, entry, event if rule.requeue else None, rule)
    # on the region's own event, so the deletes land in its changelog partition
    forget_epochs(s, s.released.forget(entry["region"], s.reservations))
    if released is not None:
        released.append(entry["region"])
        return out
    return out + s.after_release([entry["region"]])


def rule_for(entry: Mapping[str, Any], event: Mapping[str, Any]) -> EndRule:
    """The requeue rule (`streams.job_end`) for the end `event` of the placement `entry`."""
    kind, cause = str(event["type"]), str(event.get("cause") or "NONE")
    return end_rule(kind, cause, entry.get("routed"), cancelled=bool(entry.get("cancelled")))


def end_placement(
    s: Scheduler,
    job_id: str,
    entry: Mapping[str, Any],
    evicted: Mapping[str, Any] | None,
    rule: EndRule | None = None,
) -> list[Outgoing]:
    """A held placement is over: free its GPUs, requeue it if evicted (or failed and the
    rule says so), tell its preemptor."""
    s.state.release(job_id)
    if s.network is not None:
        s.network.note_released(job_id)
    if s.replanner is not None:  # a move of it in flight ends too (its hold is released)
        s.replanner.forget(job_id)
    s.tenancy.forget(job_id)
    counted = rule is not None and rule.counted
    out = requeue(s, job_id, entry, evicted, counted=counted) if evicted is not None else []
    ended = rule.state if rule is not None else ""
    s.reservations[job_id] = released_marker(entry, ended)
    s.released.add(entry["region"], [job_id])
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
    s: Scheduler,
    job_id: str,
    entry: Mapping[str, Any],
    event: Mapping[str, Any],
    *,
    counted: bool = False,
) -> list[Outgoing]:
    """An evicted (or failed, `streams.job_end`) placement's job waits again at the next
    epoch, with its progress; `counted`: the failure uses one of its retries."""
    epoch = int(entry.get("epoch") or 0)
    routed = entry.get("routed")
    if s.epochs.get(job_id, 0) != epoch or job_id in s.queue:
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
    s.final.discard(job_id)
    s.epochs[job_id] = epoch + 1
    kind = str(event.get("type") or "EVICTED").lower()
    detail = event.get("detail") or kind
    reason = f"{kind} at epoch {epoch} ({detail}) with {progress:.0%} done; waiting again"
    log.info("requeued job_id=%s epoch=%d progress=%.3f", job_id, epoch + 1, progress)
    return [s.enqueue(waiting, CAPACITY, reason)]


def force_evict(s: Scheduler, job_id: str, epoch: int) -> list[Outgoing]:
    """The grace period is over: count the victim's GPUs as free and requeue it."""
    entry = s.reservations.get(job_id)
    if entry is None or int(entry.get("epoch") or 0) != epoch or entry.get("released"):
        return s.preemption.on_gone(job_id)
    if entry.get("cancelled"):  # cancelled meanwhile: over, never requeued
        return end_placement(s, job_id, entry, None, EndRule(False, state="CANCELLED"))
    detail = {"detail": "grace period over; not reported evicted"}
    return end_placement(s, job_id, entry, detail)
