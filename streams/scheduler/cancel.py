"""Cancel requests (`gpuflow cancel`, scancel): who may cancel, and what a cancel does.

A CancelRequest on `gpuflow.jobs.cancel` (key: the job id) is checked first: with tenant keys
configured it must be signed (`schemas.signing`, over the CancelRequest's own Avro body), and
the key's tenant must own the job, unless the key is an admin key (`auth.admin_keys`). A
refused request changes nothing and is dead-lettered with its reason.

An admitted request for a
  - queued job: the job leaves the queue and gets a REJECTED decision "cancelled by ...", a
    final decision in the log, so neither a replayed submission nor a rebuilt worker places it;
  - running job: its reservation entry is marked `cancelled` (so whatever its placement reports
    next ends it for good, `scheduler.job_end`) and the executor gets a PreemptionDecision with
    cause CANCEL and the policy's grace period. The executor reports CANCELLED; if none does by
    the deadline, the worker writes that CANCELLED report itself, as the executor would have,
    and the lifecycle frees the GPUs and the quota as for any end;
  - finished or unknown job: nothing (logged).

The deadlines are on the reservation entries (a changelog table), so a restarted worker finds
them again (`restore`). With several workers, the worker that reads a request holds the job only
if it owns the job's region; one that does not (`held` False) forwards it to the others
(`streams.scheduler.cancel_agent`): see docs/jobs.md.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_PREEMPTION, JOBS_EVENTS
from schemas.registry import EventSchema
from schemas.signing import Verifier
from scorer.holds import preemptor_hold
from streams.base.outbox import Outgoing, new_event_id, now_ms, outgoing
from streams.scheduler.outcomes import final_decision
from streams.scheduler.placements import job_of

if TYPE_CHECKING:
    from streams.scheduler.protocols import Cancelling

__all__ = ["CancelOutcome", "Cancels"]

log = logging.getLogger(__name__)

CANCEL_DETAIL = "no executor report within the grace period; stopped by the worker"


@dataclass(frozen=True)
class CancelOutcome:
    """What one request did: the messages to send, and the reason when it was refused."""

    messages: tuple[Outgoing, ...] = ()
    refused: str | None = None
    note: str = ""
    held: bool = True  # False: this worker has never seen the job (another may hold it)


class Cancels:
    """The cancel requests of one worker's scheduler, and the deadlines of running ones."""

    def __init__(self, scheduler: Cancelling, verifier: Verifier | None = None) -> None:
        self.s = scheduler
        self.verifier = verifier
        self.pending: dict[str, tuple[int, int]] = {}  # job -> (epoch, deadline ms)

    @property
    def grace_s(self) -> float:
        return float(self.s.tenancy.policy.preemption.grace_period_s)

    # ---- checking -----------------------------------------------------------------------
    def check(
        self,
        request: Mapping[str, Any],
        *,
        kafka_key: bytes | None = None,
        position: Any = None,
        schema: EventSchema | None = None,
    ) -> str | None:
        """Why `request` is refused (None: admitted). Unsigned requests pass while no key is
        configured; then anyone who reaches the broker may cancel, as anyone may submit."""
        if self.verifier is None:
            return None
        verdict = self.verifier.check(
            request, kafka_key=kafka_key, position=position, schema=schema
        )
        if not verdict.admitted:
            return verdict.reason
        owner = self._owner(str(request["job_id"]))
        if owner is not None and owner != verdict.tenant and not verdict.admin:
            return f"tenant {verdict.tenant!r} may not cancel a job of tenant {owner!r}"
        return None

    def _owner(self, job_id: str) -> str | None:
        """The job's tenant as verified at submission (its claimed one when signing was off)."""
        waiting = self.s.queue.get(job_id)
        routed = waiting or (self.s.reservations.get(job_id) or {}).get("routed")
        if routed:
            return str(routed.get("verified_tenant") or routed["job"].get("tenant") or "default")
        run = self.s.tenancy.running.get(job_id)
        return run.tenant if run is not None else None

    # ---- acting -------------------------------------------------------------------------
    def on_request(self, request: Mapping[str, Any], **check: Any) -> CancelOutcome:
        """Check and carry out one CancelRequest."""
        job_id = str(request["job_id"])
        refused = self.check(request, **check)
        if refused is not None:
            log.warning("cancel refused job_id=%s reason=%s", job_id, refused)
            return CancelOutcome(refused=refused)
        who = str(request.get("requested_by") or request.get("tenant") or "someone")
        why = f"cancelled by {who}" + (f": {request['reason']}" if request.get("reason") else "")
        if job_id in self.s.queue:
            return CancelOutcome(tuple(self._dequeue(job_id, why)), note="queued: cancelled")
        entry = self.s.reservations.get(job_id)
        if entry is not None and not entry.get("released"):
            return CancelOutcome(tuple(self._stop(job_id, entry, why)), note="running: stopping")
        note = "already over" if entry is not None else "not held by this worker"
        log.info("cancel of a job not waiting or running job_id=%s (%s)", job_id, note)
        return CancelOutcome(note=note, held=entry is not None)

    def _dequeue(self, job_id: str, why: str) -> list[Outgoing]:
        s = self.s
        routed = s.book.unwait(job_id)
        s.tenancy.done_waiting(job_id)
        s.tenancy.claims.pop(job_id, None)
        s.book.release_hold(preemptor_hold(job_id))  # a preemptor's hold, if any
        for victim, preemptor in list(s.preemption.targeted.items()):
            if preemptor == job_id:
                s.preemption.targeted.pop(victim, None)
        # a marker for the horizon, as a released placement leaves: `gpuflow jobs` shows it
        region, epoch = str(routed["region"]), int(routed.get("epoch") or 0)
        marker = {
            "region": region, "epoch": epoch, "placed_ts": s.clock(), "released": True,
            "ended": "CANCELLED", "ended_ts": now_ms(), "cancelled": True,
        } | job_of({"routed": routed})  # fmt: skip
        s.book.note_released(job_id, region, marker)
        log.info("queued job cancelled job_id=%s", job_id)
        return [
            final_decision(
                s, routed["job"], "REJECTED", routed["region"], int(routed["submitted_ts"]),
                int(routed.get("attempt") or 1), 0, reasons=[why], worker_us=0,
            )
        ]  # fmt: skip

    def _stop(self, job_id: str, entry: Mapping[str, Any], why: str) -> list[Outgoing]:
        epoch, region = int(entry.get("epoch") or 0), str(entry["region"])
        if entry.get("cancelled"):
            return []  # asked again: the first request's deadline stands
        now = self.s.clock()
        deadline = now + int(self.grace_s * 1000)
        self.s.book.write_entry(job_id, {**entry, "cancelled": True, "cancel_deadline": deadline})
        self.pending[job_id] = (epoch, deadline)
        run = self.s.tenancy.running.get(job_id)
        record = {
            "event_id": new_event_id(job_id, "cancel", str(epoch)),
            "ts": now, "job_id": job_id, "for_job_id": "", "region": region,
            "victim_assignments": entry.get("assignments") or [],
            "checkpoint_first": False, "victim_priority": run.priority if run else 0,
            "reason": why, "victim_epoch": epoch,
            "victim_tenant": run.tenant if run else "", "for_tenant": "", "for_priority": 0,
            "cause": "CANCEL", "grace_period_s": self.grace_s, "deadline_ts": deadline,
            "expected_lost_gpu_s": 0.0,
        }  # fmt: skip
        log.info("running job cancelled job_id=%s epoch=%d grace_s=%g", job_id, epoch, self.grace_s)
        return [self._out(DECISIONS_PREEMPTION, job_id, record, region)]

    def expire(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]:
        """Deadlines passed with no report: the worker reports CANCELLED as the executor would
        (same event id), and the lifecycle ends the placement when it reads it back."""
        out = []
        for job_id, (epoch, deadline) in list(self.pending.items()):
            entry = self.s.reservations.get(job_id)
            if entry is None or entry.get("released") or int(entry.get("epoch") or 0) != epoch:
                del self.pending[job_id]
                continue
            if now_ms < deadline or (regions is not None and entry["region"] not in regions):
                continue
            del self.pending[job_id]
            log.warning("cancel grace period over job_id=%s epoch=%d", job_id, epoch)
            out.append(self._report(job_id, entry, epoch, now_ms))
        return out

    def _report(self, job_id: str, entry: Mapping[str, Any], epoch: int, now: int) -> Outgoing:
        nodes = sorted({str(a["node_id"]) for a in entry.get("assignments") or ()})
        record = {
            "event_id": f"{job_id}:CANCELLED:{epoch}", "ts": now, "job_id": job_id,
            "region": entry["region"], "type": "CANCELLED", "node_ids": nodes, "progress": 0.0,
            "detail": CANCEL_DETAIL, "epoch": epoch, "exit_code": None, "cause": "NONE",
        }  # fmt: skip
        return self._out(JOBS_EVENTS, job_id, record, str(entry["region"]))

    def restore(self) -> None:
        """After a rebuild: the deadlines of cancels still waiting for their executor."""
        self.pending = {
            job_id: (int(e.get("epoch") or 0), int(e.get("cancel_deadline") or 0))
            for job_id, e in self.s.reservations.items()
            if e.get("cancelled") and not e.get("released")
        }

    def _out(self, topic: str, key: str, record: Mapping[str, Any], region: str) -> Outgoing:
        return outgoing(topic, key, record, region=region, partition_of=self.s.partition_of)
