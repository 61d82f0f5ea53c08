"""Jobs as a user reads them (`/jobs/`, `gpuflow jobs` like squeue, the head of `gpuflow
status`): state, region, GPUs, since when, why waiting.

No state of its own: the view is read off the scheduler's two region tables, which already
have one owner, bounded memory and recovery from the changelogs and the ledger (a worker's
rebuild, `streams.recovery`): the queue (PENDING; CANCELLING is a running job whose cancel
was asked), the reservations (RUNNING) and the released markers the horizon keeps
(`streams.horizon`: FINISHED, FAILED, TIMEOUT, CANCELLED for `worker.horizon_s` after the
end). Older history is ClickHouse's (`job_epochs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from streams.scheduler.tenancy import CAPACITY, PREEMPTING

if TYPE_CHECKING:
    from streams.scheduler.core import Scheduler

__all__ = ["STATES", "job_view", "jobs_view"]

STATES = ("PENDING", "RUNNING", "CANCELLING", "FINISHED", "FAILED", "TIMEOUT", "CANCELLED")
MILLI = 1000


def jobs_view(
    s: Scheduler, *, tenant: str = "", state: str = "", limit: int = 1000
) -> dict[str, Any]:
    """JSON-ready: the jobs this worker holds (waiting, running, ended within the horizon),
    filtered by tenant and state, newest first within a state, at most `limit`."""
    wanted = {x.strip().upper() for x in state.split(",") if x.strip()}
    rows = [
        row
        for row in _rows(s)
        if (not tenant or row["tenant"] == tenant) and (not wanted or row["state"] in wanted)
    ]
    rows.sort(key=lambda r: (STATES.index(r["state"]), -int(r["since"] or 0), r["job_id"]))
    return {"ts": s.clock(), "jobs": rows[:limit], "more": max(0, len(rows) - limit)}


def job_view(s: Scheduler, job_id: str) -> dict[str, Any] | None:
    """One job's row, or None when this worker holds nothing of it."""
    waiting = s.queue.get(job_id)
    if waiting is not None:
        return _waiting(s, waiting)
    entry = s.reservations.get(job_id)
    return _placed(job_id, entry) if entry is not None else None


def _rows(s: Scheduler) -> Iterator[dict[str, Any]]:
    for routed in s.queue.values():
        yield _waiting(s, routed)
    for job_id, entry in s.reservations.items():
        if job_id in s.queue:
            continue  # requeued: its marker is the epoch before
        row = _placed(job_id, entry)
        if row is not None:
            yield row


def _tenant(routed: Mapping[str, Any]) -> str:
    return str(routed.get("verified_tenant") or routed["job"].get("tenant") or "default")


def _gpus(job: Mapping[str, Any]) -> float:
    return int(job.get("gpu_count") or 1) * int(job.get("gpu_milli") or MILLI) / MILLI


def _waiting(s: Scheduler, routed: Mapping[str, Any]) -> dict[str, Any]:
    job = routed["job"]
    code, reason = s.tenancy.waits.get(job["job_id"], (CAPACITY, "waiting for the next retry"))
    if routed.get("preempting"):
        code, reason = PREEMPTING, "waiting for its victims to stop"
    return {
        "job_id": job["job_id"], "tenant": _tenant(routed), "state": "PENDING",
        "region": routed.get("region") or "", "gpus": _gpus(job), "nodes": [],
        "since": int(routed.get("queued_ts") or routed.get("submitted_ts") or 0),
        "epoch": int(routed.get("epoch") or 0), "reason_code": code, "reason": reason,
        "retries_used": int(routed.get("failures") or 0),
        "retries": int(job.get("retries") or 0), "evictions": int(routed.get("evictions") or 0),
    }  # fmt: skip


def _placed(job_id: str, entry: Mapping[str, Any]) -> dict[str, Any] | None:
    routed = entry.get("routed") or {}
    if entry.get("released"):
        state = str(entry.get("ended") or "")
        if state not in STATES:
            return None  # evicted and requeued elsewhere, or a marker of an older worker
        since = int(entry.get("ended_ts") or entry.get("placed_ts") or 0)
        reason = ""
    else:
        state = "CANCELLING" if entry.get("cancelled") else "RUNNING"
        since = int(entry.get("placed_ts") or 0)
        reason = "cancel requested; waiting for the executor" if entry.get("cancelled") else ""
    job = routed.get("job") or {}
    assignments = entry.get("assignments") or ()
    return {
        "job_id": job_id,
        "tenant": _tenant(routed) if job else str(entry.get("tenant") or ""),
        "state": state, "region": entry.get("region") or "",
        "gpus": _gpus(job) if job else float(entry.get("gpus") or 0),
        "nodes": sorted({str(a["node_id"]) for a in assignments}),
        "since": since, "epoch": int(entry.get("epoch") or 0), "reason_code": "",
        "reason": reason, "retries_used": int(routed.get("failures") or 0),
        "retries": int(job.get("retries") or 0), "evictions": int(routed.get("evictions") or 0),
    }  # fmt: skip
