"""What becomes of a placement attempt: committed (reserved, booked, PLACED), forwarded to the
next candidate region, queued (after looking for victims), held for a green window, or
REJECTED with every reason. Each returns the messages to send; `Scheduler.place` chooses.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED
from scorer import JobSpec, PlacementResult, ReservationError
from scorer.network import job_flows
from streams.bandwidth import flow_records
from streams.convert import decision_record, job_spec
from streams.outbox import Outgoing, new_event_id, outgoing
from streams.speed_order import done_s
from streams.tenancy import CAPACITY
from streams.waiting import annotate, final_id

if TYPE_CHECKING:
    from streams.scheduling import Scheduler

__all__ = ["commit", "final_decision", "forecast_gate", "refused", "routed_message", "us_since"]

log = logging.getLogger(__name__)
TRIED_ONCE = "no free capacity now; tried once (try_once), so refused"


def commit(
    s: Scheduler,
    routed: Mapping[str, Any],
    result: PlacementResult,
    started_ns: int,
    *,
    note: str = "",
) -> Outgoing | None:
    job = routed["job"]
    job_id = job["job_id"]
    try:
        s.state.reserve(job_id, result.assignments)
    except ReservationError as exc:  # the scorer proposed something no longer free
        log.error("reservation refused job_id=%s: %s", job_id, exc)
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
    s.placer.observe(spec)  # the placement is committed: plugins that learn count it now
    restore_s = restore_s_of(s, routed)
    run = s.tenancy.record(
        spec, record["region"], result.gpu_model, now_ms=now,
        expected_s=result.expected_duration_s, epoch=epoch, restore_s=restore_s,
    )  # fmt: skip
    annotate(record, routed, run.class_name)
    s.reservations[job_id] = {
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
    s.queue.pop(job_id, None)
    s.queue_why.pop(job_id, None)
    s.final.add(job_id)
    s.epochs[job_id] = epoch
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


def restore_s_of(s: Scheduler, routed: Mapping[str, Any]) -> float:
    """A job that kept work from an earlier epoch resumes from its checkpoint: it reloads
    it first (`ReplanConfig.restore_s`, what the executor charges), then computes."""
    resumes = done_s(routed) > 0 or float(routed.get("progress") or 0.0) > 0
    return s.replan.restore_s if resumes else 0.0


def placed_flows(s: Scheduler, spec: JobSpec, result: PlacementResult) -> list[dict[str, Any]]:
    """A placed job's cross-region flows, noted in the network view (for the placer's
    link estimates and the bandwidth processor) and returned for the reservation table."""
    if s.network is None:
        return []
    flows = job_flows(spec, s.state, result.assignments, s.network.settings)
    s.network.note_placed(spec.job_id, flows)
    return flow_records(flows)


def refused(
    s: Scheduler,
    routed: Mapping[str, Any],
    result: PlacementResult,
    started_ns: int,
    code: str,
    reason: str,
) -> list[Outgoing]:
    job, region = routed["job"], routed["region"]
    refusals = merge_counts(routed.get("refusals") or {}, result.refusals)
    queue_region = routed.get("queue_region") or (None if result.never_fits else region)
    worker_us = int(routed.get("worker_us", 0)) + us_since(started_ns)
    candidates = list(routed.get("candidates") or ())
    if routed.get("_retry"):
        s.tenancy.wait(job["job_id"], code, reason)
        return []  # still no room; stays queued
    if candidates or (queue_region and queue_region != region):
        nxt = candidates[0] if candidates else queue_region
        forwarded = {
            **routed,
            "event_id": new_event_id(),
            "ts": s.clock(),
            "region": nxt,
            "candidates": candidates[1:],
            "attempt": int(routed["attempt"]) + 1,
            "refusals": refusals,
            "queue_region": queue_region,
            "worker_us": worker_us,
        }
        return [routed_message(s, forwarded)]
    if queue_region == region and s.try_once:  # tried once: no room now is refused for good
        decided = final_decision(
            s, job, "REJECTED", region, int(routed["submitted_ts"]), int(routed["attempt"]),
            started_ns, reasons=list(result.reasons) or [reason or TRIED_ONCE],
            refusals=refusals, worker_us=worker_us, wait_reason=code or CAPACITY,
        )  # fmt: skip
        return [decided]
    if queue_region == region:
        waiting = {**routed, "refusals": refusals, "worker_us": worker_us}
        preempting = s.preemption.try_preempt(waiting, region)
        if preempting:
            return preempting
        return [s.enqueue(waiting, code, reason)]
    submitted_ts, attempt = int(routed["submitted_ts"]), int(routed["attempt"])
    reasons = rejection_reasons(s, job, result)
    return [
        final_decision(
            s,
            job,
            "REJECTED",
            region,
            submitted_ts,
            attempt,
            started_ns,
            reasons=reasons,
            refusals=refusals,
            worker_us=worker_us,
        )
    ]


def rejection_reasons(s: Scheduler, job: Mapping[str, Any], last: PlacementResult) -> list[str]:
    """Why a job is rejected, over every region this worker holds: the last region tried
    may lack the job's GPU model altogether ("H200 is not an allowed GPU model") while the
    decisive reason is elsewhere ("needs 139 GiB per GPU, H100 has 79.6 GiB")."""
    everywhere = s.placer.place(job_spec(job), None)
    reasons = list(everywhere.reasons) if not everywhere.placed else []
    return reasons or list(last.reasons) or ["no node in any allowed region can ever host this job"]


def final_decision(
    s: Scheduler,
    job: Mapping[str, Any],
    outcome: str,
    region: str | None,
    submitted_ts: int,
    attempt: int,
    started_ns: int,
    *,
    reasons: list[str],
    refusals: Mapping[str, int] | None = None,
    worker_us: int | None = None,
    wait_reason: str = "",
) -> Outgoing:
    """A final decision; `wait_reason` on a REJECTED one tried once says it found no room now
    (CAPACITY, QUOTA) rather than that it could never fit (empty)."""
    job_id = job["job_id"]
    s.final.add(job_id)
    record = decision_record(
        job,
        outcome,
        event_id=final_id(job_id, "final", s.epochs.get(job_id, 0)),
        ts=s.clock(),
        submitted_ts=submitted_ts,
        attempt=attempt,
        worker_us=us_since(started_ns) if worker_us is None else worker_us,
        region=region,
        reasons=reasons,
        refusals=refusals,
    )
    record["epoch"] = s.epochs.get(job_id, 0)
    if wait_reason:
        record["wait_reason"] = wait_reason
    return outgoing(DECISIONS_PLACEMENT, job_id, record, region=region, partition_of=s.partition_of)


def routed_message(s: Scheduler, routed: dict[str, Any]) -> Outgoing:
    return outgoing(
        JOBS_ROUTED,
        routed["job"]["job_id"],
        routed,
        region=routed["region"],
        partition_of=s.partition_of,
    )


def forecast_gate(
    s: Scheduler, routed: Mapping[str, Any], spec: JobSpec, started_ns: int
) -> list[Outgoing] | None:
    """Hold a deferrable job for its green window; keep low-priority work out of headroom."""
    assert s.forecasts is not None
    region = routed["region"]
    held = None if routed.get("_retry") else s.forecasts.hold(spec, region)
    if held is not None:
        return [hold(s, routed, held.start_ms, held.reason, started_ns)]
    free = sum(s.state.free_gpus(region).values())
    refusal = s.forecasts.headroom_refusal(spec, region, free)
    if refusal is None:
        return None
    kept_out = PlacementResult(False, refusals={"headroom": 1}, reasons=(refusal,))
    return refused(s, routed, kept_out, started_ns, CAPACITY, refusal)


def hold(
    s: Scheduler, routed: Mapping[str, Any], until_ms: int, reason: str, started_ns: int
) -> Outgoing:
    """Queue a deferrable job in its region until `until_ms` (retry_queue releases it)."""
    job, region = routed["job"], routed["region"]
    s.queue[job["job_id"]] = {**routed, "queued_ts": s.clock(), "hold_until": until_ms}
    record = decision_record(
        job,
        "QUEUED",
        event_id=new_event_id(job["job_id"], "held"),
        ts=s.clock(),
        submitted_ts=int(routed["submitted_ts"]),
        attempt=int(routed["attempt"]),
        worker_us=int(routed.get("worker_us", 0)) + us_since(started_ns),
        region=region,
        reasons=[reason],
    )
    log.info("job held job_id=%s region=%s until_ms=%d", job["job_id"], region, until_ms)
    return outgoing(
        DECISIONS_PLACEMENT,
        job["job_id"],
        record,
        region=region,
        partition_of=s.partition_of,
    )


def merge_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + int(value)
    return out


def us_since(started_ns: int) -> int:
    return (time.perf_counter_ns() - started_ns) // 1000
