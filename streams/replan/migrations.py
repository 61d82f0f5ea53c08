"""A migration's records: the MigrationDecision and its moves-table entry, the reservation
entry once MIGRATED confirms the move, the re-planner's view of a reservation entry, and
the reconciliation of moves with the logs after a restart (`streams.replan.replanner` commits).
Every change goes through the book's methods (`begin_move`, `migrate`, `end_move`,
`restore_hold`), as the live path does."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from scorer.replan import MoveProposal, ReplanConfig, RunningJob, hold_key
from streams.base.outbox import new_event_id
from streams.replan.parts import MoveBook, move_hold
from streams.scheduler.convert import assignment_records, job_spec, parse_assignments

__all__ = [
    "confirmed",
    "job_of",
    "migration_record",
    "move_entry",
    "moved_entry",
    "reconcile",
    "running_job",
]


def job_of(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JobSubmitted record a reservation entry keeps (with the RoutedJob it was placed
    from, `routed.job`; entries of older versions kept it as `job`)."""
    return entry.get("job") or (entry.get("routed") or {}).get("job")


def running_job(job_id: str, entry: Mapping[str, Any]) -> RunningJob | None:
    """The re-planner's view of a reservation entry (None: released or from before re-planning
    recorded the job)."""
    record = job_of(entry)
    if entry.get("released") or not record or entry.get("started_ms") is None:
        return None
    return RunningJob(
        job=job_spec(record),
        region=entry["region"],
        gpu_model=entry.get("gpu_model") or "",
        assignments=parse_assignments(entry["assignments"]),
        speed=float(entry.get("speed") or 0.0),
        started_ms=int(entry["started_ms"]),
        done_s=float(entry.get("done_s") or 0.0),
        restore_s=float(entry.get("restore_s") or 0.0),
        moves=int(entry.get("moves") or 0),
        last_move_ms=entry.get("last_move_ms"),
    )


def migration_record(p: MoveProposal, now_ms: int, *, hold_s: float) -> dict[str, Any]:
    """The MigrationDecision for a committed proposal; its target is held until `hold_s`."""
    run, target = p.run, p.target
    deadline = now_ms + int(hold_s * 1000)
    record = {
        "event_id": new_event_id(run.job_id, "move", str(run.moves + 1)),
        "ts": now_ms,
        "job_id": run.job_id,
        "from_region": run.region,
        "from_assignments": assignment_records(run.assignments),
        "to_region": target.region or run.region,
        "to_assignments": assignment_records(target.assignments),
        "reason": p.reason,
        "expected_gain": round(p.expected_gain, 3),
        "from_gpu_model": run.gpu_model,
        "to_gpu_model": target.gpu_model or "",
        "from_throughput": round(run.speed, 6),
        "expected_throughput": float(target.expected_throughput or 0.0),
        "restore_s": p.cost.restore_s,
        "lost_work_s": round(p.cost.lost_s, 3),
        "checkpoint_first": False,
        "hold_until_ts": deadline,
        "for_job_id": p.for_job,
        "reasons": list(p.explain),
    }
    return record


def move_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The moves-table entry of a decision: pending until MIGRATED or its deadline."""
    return {
        "region": record["from_region"],  # the changelog partition of the entry
        "decision": record,
        "hold": hold_key(str(record["job_id"])),
        "deadline_ms": int(record["hold_until_ts"]),
        "status": "pending",
    }


def moved_entry(
    entry: Mapping[str, Any],
    decision: Mapping[str, Any],
    event: Mapping[str, Any],
    config: ReplanConfig,
    ts: int,
) -> dict[str, Any]:
    """A job's reservation entry once its move is confirmed (MIGRATED at `ts`): the new GPUs,
    the work done so far (the executor's count when it gives one), the restore ahead."""
    run = running_job(decision["job_id"], entry)
    duration = (job_of(entry) or {}).get("expected_duration_s")
    progress = float(event.get("progress") or 0.0)
    if progress > 0 and duration:
        done = progress * float(duration)  # the executor's own count wins
    elif run is not None:
        interval = config.interval_s(run.job)
        done = run.work_done(ts) - run.lost_on_stop(ts, interval)
    else:
        done = float(entry.get("done_s") or 0.0)
    return {
        **entry,
        "region": decision["to_region"],
        "assignments": decision["to_assignments"],
        "gpu_model": decision.get("to_gpu_model") or entry.get("gpu_model"),
        "speed": float(decision.get("expected_throughput") or entry.get("speed") or 0.0),
        "started_ms": ts,
        "done_s": done,
        "restore_s": config.restore_s,
        "moves": int(entry.get("moves") or 0) + 1,
        "last_move_ms": int(decision["ts"]),
    }


def reconcile(
    r: MoveBook,
    decisions: Mapping[str, Sequence[Mapping[str, Any]]],
    migrated: Mapping[str, Sequence[Mapping[str, Any]]],
    ended: Collection[str],
) -> None:
    """Moves against the logs after a restart (`Replanner.rebuild`): a confirmed move the
    reservation missed is applied (as a live MIGRATED applies it), a logged unconfirmed one
    still in time is held again, the holds of ended jobs are dropped."""
    book, now = r.parts.book, r.parts.clock.now()
    for job_id, logged in decisions.items():
        if job_id in ended or job_id not in book.reservations:
            book.end_move(job_id)
            continue
        last = logged[-1]
        done = confirmed(last, migrated.get(job_id, ()))
        entry = book.reservations[job_id]
        if done is not None and entry.get("assignments") != last["to_assignments"]:
            book.begin_move(job_id, {**move_entry(last), "deadline_ms": 0})
            r.on_migrated(done)  # frees the old GPUs and takes the target (`Book.migrate`)
        elif done is None and job_id not in book.moves and last["hold_until_ts"] > now:
            book.begin_move(job_id, move_entry(last))  # as the live decision wrote it
    for job_id, move in list(book.moves.items()):
        if job_id in ended:
            book.end_move(job_id)
        elif move.get("status") == "pending":
            target = parse_assignments(move["decision"]["to_assignments"])
            book.restore_hold(move_hold(job_id), target)


def confirmed(
    decision: Mapping[str, Any], events: Sequence[Mapping[str, Any]]
) -> Mapping[str, Any] | None:
    """The MIGRATED event that confirms `decision` (lands on its target nodes, after it)."""
    nodes = sorted(a["node_id"] for a in decision["to_assignments"])
    for event in reversed(events):
        if sorted(event.get("node_ids") or ()) == nodes and event["ts"] >= decision["ts"]:
            return event
    return None
