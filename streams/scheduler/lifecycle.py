"""Job lifecycle: the executor's reports end placements, epoch by epoch.

A placement (job, epoch) ends with its epoch's FINISHED, FAILED, EVICTED, TIMEOUT or CANCELLED:
its GPUs are freed, an evicted job (or a failed one the rules of `scheduler.job_end` requeue)
waits again at epoch + 1 with the progress it reported, the preemptor waiting on
it (if any) is told, and the region's queue is tried. Reports of an older epoch are ignored, so
a late EVICTED can never free a newer placement's GPUs; replayed reports change nothing. An
end written to the log before its placement was decided (a finish before a start, a stale or
hostile event) frees nothing either. Released entries stay as markers for the horizon
(`streams.scheduler.horizon`), then are deleted on their region's own event.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streams.base.outbox import Outgoing
from streams.scheduler.job_end import ENDS, EndRule, end_rule
from streams.scheduler.placements import end_placement, requeue

if TYPE_CHECKING:
    from streams.scheduler.protocols import Ends

__all__ = ["force_evict", "on_job_event", "rule_for"]

log = logging.getLogger(__name__)


def on_job_event(
    s: Ends,
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
        s.book.release(job_id)  # idempotent: frees whatever its key still holds
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
    s.book.forget_released(entry["region"])  # on the region's own event
    if released is not None:
        released.append(entry["region"])
        return out
    return out + s.after_release([entry["region"]])


def rule_for(entry: Mapping[str, Any], event: Mapping[str, Any]) -> EndRule:
    """The requeue rule (`scheduler.job_end`) for the end `event` of the placement `entry`."""
    kind, cause = str(event["type"]), str(event.get("cause") or "NONE")
    return end_rule(kind, cause, entry.get("routed"), cancelled=bool(entry.get("cancelled")))


def force_evict(s: Ends, job_id: str, epoch: int) -> list[Outgoing]:
    """The grace period is over: count the victim's GPUs as free and requeue it."""
    entry = s.reservations.get(job_id)
    if entry is None or int(entry.get("epoch") or 0) != epoch or entry.get("released"):
        return s.preemption.on_gone(job_id)
    if entry.get("cancelled"):  # cancelled meanwhile: over, never requeued
        return end_placement(s, job_id, entry, None, EndRule(False, state="CANCELLED"))
    detail = {"detail": "grace period over; not reported evicted"}
    return end_placement(s, job_id, entry, detail)
