"""Waiting jobs' decisions: into the queue with a QUEUED decision that says why, and the
tenancy fields every PlacementDecision carries (epoch, priority class, since when it waits)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_PLACEMENT
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.scheduler.convert import decision_record
from streams.scheduler.tenancy import CAPACITY

if TYPE_CHECKING:
    from streams.scheduler.protocols import Booked

__all__ = ["CAPACITY_TEXT", "annotate", "enqueue", "final_id", "queued_decision"]

CAPACITY_TEXT = "no free capacity now; waiting in the region queue"


def final_id(job_id: str, tag: str, epoch: int) -> str:
    """Deterministic decision ids: `job:tag` for the first epoch (as before), `job:tag:N` after."""
    return new_event_id(job_id, tag) if epoch == 0 else new_event_id(job_id, tag, str(epoch))


def annotate(record: dict[str, Any], routed: Mapping[str, Any], cls: str) -> None:
    record["epoch"] = int(routed.get("epoch") or 0)
    record["priority_class"] = cls
    record["queued_ts"] = int(routed.get("queued_ts") or routed["submitted_ts"])


def enqueue(s: Booked, routed: Mapping[str, Any], code: str, reason: str) -> Outgoing:
    """Put a job in its region's queue; the QUEUED decision saying why it waits."""
    spec = s.spec_of(routed)
    prio = s.tenancy.priority(spec)
    entry = {
        **{k: v for k, v in routed.items() if not k.startswith("_")},
        "queued_ts": int(routed.get("queued_ts") or s.clock()),
        "prio": prio.value if not isinstance(prio, str) else spec.priority,
    }
    s.book.wait(spec.job_id, entry)
    s.tenancy.wait(spec.job_id, code, reason)
    return queued_decision(s, entry, code, reason)


def queued_decision(
    s: Booked, entry: Mapping[str, Any], code: str, reason: str, *, tag: str = "queued"
) -> Outgoing:
    job, region = entry["job"], entry["region"]
    record = decision_record(
        job,
        "QUEUED",
        event_id=final_id(job["job_id"], tag, int(entry.get("epoch") or 0)),
        ts=s.clock(),
        submitted_ts=int(entry["submitted_ts"]),
        attempt=int(entry.get("attempt", 1)),
        worker_us=int(entry.get("worker_us", 0)),
        region=region,
        reasons=[reason or CAPACITY_TEXT],
        refusals=entry.get("refusals") or {},
    )
    prio = s.tenancy.priority(s.spec_of(entry))
    annotate(record, entry, prio.class_name if not isinstance(prio, str) else "")
    record["wait_reason"] = code or CAPACITY
    return outgoing(
        DECISIONS_PLACEMENT, job["job_id"], record, region=region, partition_of=s.partition_of
    )
