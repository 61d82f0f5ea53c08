"""Rebuilding a scheduler's arrays and tables after a restart or rebalance, from the decision
log (what was announced) and the job-event log (what ended), epoch by epoch.

Rules, per reservation-table entry at epoch e:
  - never announced (no PLACED for (job, e) in the log nor in live state): dropped, and its
    job goes back into the queue from the record the entry keeps (nothing is lost); unless it
    was placed before `trimmed_ms`, when retention may have taken its decision unread: then the
    table is trusted (the job may be running; requeueing it would promise its GPUs twice);
  - announced and the job-event log says epoch e ended (by an end written at or after the
    placement, as the live path judges it): released (whatever the table says), and when it
    ended EVICTED (or FAILED and `scheduler.job_end` requeues it) the job is requeued at e + 1
    unless it already waits; a cancelled or finally failed job is never requeued;
  - announced and running: its GPUs are held again and it is booked for tenancy.
A logged placement of an owned region missing from the table (or newer than the table's
entry) is restored; released entries are kept as markers for the horizon (`scheduler.horizon`). A
queue entry at an epoch that is already decided is dropped; one at a later epoch (a requeued
victim) makes its job undecided again. Preemptors' holds are restored by `Preemptions`.
Idempotent: after a rebalance it runs again on live state, which also knows decisions not yet
logged.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from streams.bandwidth.processor import flows_from_records
from streams.scheduler.book import forget_regions
from streams.scheduler.convert import parse_assignments
from streams.scheduler.job_end import end_rule, split_kind
from streams.scheduler.placements import released_marker
from streams.scheduler.tenancy import Running

if TYPE_CHECKING:
    from streams.scheduler.protocols import Recovers

__all__ = ["epoch_ends", "forget_unowned", "rebuild_state", "rebuild_tables"]

log = logging.getLogger(__name__)


def rebuild_state(
    s: Recovers,
    logged: Mapping[str, Mapping[str, Any]],
    ended: Mapping[str, Mapping[int, Any]] | Mapping[str, int] | Collection[str],
    owns: Callable[[str], bool],
    moves: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    migrated: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    *,
    trimmed_ms: int = 0,
) -> None:
    """`Scheduler.rebuild`: forget the regions no longer owned, rebuild the tables, then the
    preemptors' holds, the moves in flight and the flows of the reservations still held."""
    forget_unowned(s, owns)
    rebuild_tables(s, logged, epoch_ends(ended), owns, trimmed_ms)
    s.preemption.restore()
    s.cancels.restore()
    if s.replanner is not None:
        s.replanner.rebuild(moves or {}, migrated or {}, set(ended))  # keys: the ended
    if s.network is not None:  # placed flows, from the reservations still held
        s.network.clear()
        for job_id, entry in s.reservations.items():
            records = entry.get("flows")
            if not entry.get("released") and records:
                s.network.note_placed(job_id, flows_from_records(records))


def rebuild_tables(
    s: Recovers,
    logged: Mapping[str, Mapping[str, Any]],
    ended: Mapping[str, Mapping[int, Any]],
    owns: Callable[[str], bool] = lambda region: True,
    trimmed_ms: int = 0,
) -> None:
    """`ended`: job_id -> {epoch: (kind, written ms)} (`streams.ledger`), or {epoch: kind}
    where write times are unknown; `owns(region)`: whether this worker holds the region;
    `trimmed_ms`: decisions written before it may be missing from `logged`."""
    s.book.clear_arrays()
    for record in s.nodes.values():
        s.restore_node(record)
    now = s.clock()
    for job_id, decision in logged.items():
        _decided(s, job_id, int(decision.get("epoch") or 0), int(decision.get("ts") or now))
    s.tenancy.running.clear()
    s.tenancy.claims.clear()
    for job_id, entry in list(s.reservations.items()):
        _entry(s, job_id, entry, ended.get(job_id, {}), trimmed_ms)
    for job_id, decision in logged.items():
        if owns(str(decision.get("region") or "")):
            _logged(s, job_id, decision, ended.get(job_id, {}))
    _queue(s)


def _end(ends: Mapping[int, Any], epoch: int, placed_ts: Any) -> str | None:
    """How epoch `epoch` ended, if an end of it was written at or after its placement."""
    value = ends.get(epoch)
    if value is None or isinstance(value, str):
        return value
    kind, written = value
    return str(kind) if int(written) >= int(placed_ts or 0) else None


def _decided(s: Recovers, job_id: str, epoch: int, written_ms: int) -> None:
    """`job_id` was decided at `epoch`, `written_ms` ago as the scheduler's clock goes."""
    s.book.decide(job_id, epoch=epoch, age_s=max(0, s.clock() - written_ms) / 1000)


def _entry(
    s: Recovers,
    job_id: str,
    entry: Mapping[str, Any],
    ended: Mapping[int, Any],
    trimmed_ms: int = 0,
) -> None:
    epoch, placed = int(entry.get("epoch") or 0), int(entry.get("placed_ts") or 0)
    if not s.book.announced(job_id, epoch) and placed < trimmed_ms:
        log.warning("placement older than the decision log's start, kept as the table has it "
                    "job_id=%s epoch=%d", job_id, epoch)  # fmt: skip
        _decided(s, job_id, epoch, placed)
    if not s.book.announced(job_id, epoch):
        s.book.drop_entry(job_id)
        routed = entry.get("routed")
        if routed and job_id not in s.queue:
            s.book.wait(job_id, {**routed, "queued_ts": routed.get("queued_ts") or s.clock()})
            log.info("placement never announced, requeued job_id=%s epoch=%d", job_id, epoch)
        return
    end = _end(ended, epoch, entry.get("placed_ts"))
    if end is not None or entry.get("released"):
        kind, cause = split_kind(end or "")
        routed = entry.get("routed")
        rule = end_rule(kind, cause, routed, cancelled=bool(entry.get("cancelled")))
        marker = (
            None
            if entry.get("released")
            else released_marker(entry, "" if rule.requeue else rule.state)
        )
        s.book.note_released(job_id, entry["region"], marker)
        waits = s.epochs.get(job_id) != epoch or job_id in s.queue  # requeued already
        if end and rule.requeue and routed and not waits:
            _requeue(s, job_id, entry, routed, counted=rule.counted)
        return
    _hold_again(s, job_id, entry["assignments"])
    s.tenancy.running[job_id] = _running(s, job_id, entry)


def _hold_again(s: Recovers, job_id: str, assignments: Any) -> None:
    try:
        parts = parse_assignments(assignments)
    except KeyError as exc:
        log.warning("cannot restore reservation job_id=%s: %s", job_id, exc)
        return
    s.book.restore_placement(job_id, parts)


def _requeue(
    s: Recovers,
    job_id: str,
    entry: Mapping[str, Any],
    routed: Mapping[str, Any],
    *,
    counted: bool = False,
) -> None:
    epoch = int(entry.get("epoch") or 0)
    waiting = {
        **routed,
        "epoch": epoch + 1,
        "queued_ts": s.clock(),
        "region": entry["region"],
        "candidates": [],
        "queue_region": entry["region"],
        "evictions": int(routed.get("evictions") or 0) + 1,
        "failures": int(routed.get("failures") or 0) + int(counted),
    }
    s.book.wait(job_id, waiting)
    s.book.reopen(job_id, epoch + 1)
    log.info("evicted (or failed) job requeued at rebuild job_id=%s epoch=%d", job_id, epoch + 1)


def _logged(
    s: Recovers, job_id: str, decision: Mapping[str, Any], ended: Mapping[int, Any]
) -> None:
    if decision["outcome"] != "PLACED":
        return
    epoch = int(decision.get("epoch") or 0)
    entry = s.reservations.get(job_id)
    if entry is not None and int(entry.get("epoch") or 0) >= epoch:
        return
    end = _end(ended, epoch, decision.get("ts"))
    kind, cause = split_kind(end or "")
    rule = end_rule(kind, cause, None)
    entry = {
        "region": decision["region"],
        "assignments": decision["assignments"],
        "gpu_model": decision.get("gpu_model"),
        "released": end is not None,
        "epoch": epoch,
        "placed_ts": decision.get("ts"),
    } | ({"ended": rule.state} if end is not None and not rule.requeue else {})
    if end is None:
        s.book.write_entry(job_id, entry)
        _hold_again(s, job_id, decision["assignments"])
        s.tenancy.running[job_id] = _from_decision(s, job_id, decision)
        return
    s.book.note_released(job_id, decision["region"], entry)
    if kind == "EVICTED" and job_id not in s.queue:
        log.error("evicted job has no record to requeue job_id=%s epoch=%d", job_id, epoch)


def _queue(s: Recovers) -> None:
    for job_id, entry in list(s.queue.items()):
        epoch = int(entry.get("epoch") or 0)
        if job_id in s.final and s.epochs.get(job_id, 0) >= epoch:
            s.book.unwait(job_id)  # decided at this epoch already
        else:
            s.book.reopen(job_id, max(s.book.epoch(job_id), epoch))


def _running(s: Recovers, job_id: str, entry: Mapping[str, Any]) -> Running:
    booked = entry.get("tenancy")
    if booked:
        return Running.from_entry(booked)
    return _from_decision(s, job_id, {**entry, "ts": s.clock()})


def _from_decision(s: Recovers, job_id: str, decision: Mapping[str, Any]) -> Running:
    """What the log tells about a placement whose table entry was lost: enough to count its
    quota; it is never chosen as a victim (its preemptibility is unknown)."""
    milli = sum(
        len(a["gpu_indices"]) * int(a.get("gpu_milli", 1000)) for a in decision["assignments"]
    )
    ts = int(decision.get("ts") or s.clock())
    duration = decision.get("expected_duration_s")
    return Running(
        job_id=job_id,
        tenant=str(decision.get("tenant") or "default"),
        region=str(decision["region"]),
        gpu_class=s.tenancy.gpu_class(decision.get("gpu_model")),
        priority=int(decision.get("priority") or 0),
        class_name=str(decision.get("priority_class") or ""),
        preemptible=False,
        protected=False,
        milli=milli,
        gpus=int(decision.get("gpu_count") or 1),
        cpu_milli=0,
        memory_mib=0,
        started_ms=ts,
        expected_end_ms=ts + float(duration) * 1000 if duration else math.inf,
        checkpoint_ms=ts,
        checkpoint_interval_s=0,
        epoch=int(decision.get("epoch") or 0),
    )


def forget_unowned(s: Recovers, owns: Callable[[str], bool]) -> list[str]:
    """Drop nodes, reservations and queued jobs of regions this worker no longer owns,
    from memory only (the owner recovers them from the changelog); the nodes dropped."""
    forget_regions(s.nodes, owns)
    s.book.forget_unowned(owns)
    dropped = [n.node_id for n in s.state.nodes if not owns(n.region)]
    for node_id in dropped:
        s.state.remove_node(node_id)
        s.last_seen.pop(node_id, None)
    if dropped:
        log.info("forgot regions no longer owned nodes=%d", len(dropped))
    s.view_cache = (0.0, {})
    return dropped


def epoch_ends(
    ended: Mapping[str, Mapping[int, Any]] | Mapping[str, int] | Collection[str],
) -> dict[str, dict[int, Any]]:
    """`ended` in the ledger's shape, job_id -> {epoch: (kind, written ms) or kind}: a plain
    collection means epoch 0 finished; job_id -> written ms, that epoch 0 ended then."""
    if not isinstance(ended, Mapping):
        return {job_id: {0: "FINISHED"} for job_id in ended}
    return {
        job_id: dict(ends) if isinstance(ends, Mapping) else {0: ("FINISHED", int(ends))}
        for job_id, ends in ended.items()
    }
