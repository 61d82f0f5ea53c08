"""The decision log as the source of truth for which jobs are already decided.

At start the worker reads `gpuflow.decisions.placement` from the beginning to its end and keeps
each job's last final decision (PLACED or REJECTED; the highest epoch: an evicted job is placed
again at epoch + 1), and `gpuflow.jobs.events` for which placement epochs ended. A crash between
"decision produced" and "table updated" (or the other way round) is then healed by
`Scheduler.rebuild`, so a replay after a crash neither decides a job twice nor loses one.
Migrations are read the same way (`gpuflow.decisions.migration`, and the executor's MIGRATED
reports on `gpuflow.jobs.events`), so a moved job comes back on the GPUs it moved to and a
move still in flight keeps its hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from infra.config import KafkaConfig
from infra.kafka import consumer
from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_ROUTED, TOPICS
from schemas import Codec, DecodeError, timestamp_ms

__all__ = [
    "overbooked",
    "read_ended_jobs",
    "read_final_decisions",
    "read_job_log",
    "read_migrations",
    "read_routed_attempts",
]

log = logging.getLogger(__name__)

_FINAL = ("PLACED", "REJECTED")
_EVENT_OF = {t.name: t.event for t in TOPICS}
_ENDED = ("FINISHED", "FAILED", "EVICTED")


def _read_topic(
    kafka: KafkaConfig, codec: Codec, topic: str, timeout_s: float
) -> Iterator[tuple[dict[str, Any], int]]:
    """Every decodable record of `topic`, from the beginning to end-of-partition."""
    c = consumer(
        kafka, group_id=f"gpuflow-ledger-{time.monotonic_ns()}", **{"enable.partition.eof": True}
    )
    started = time.monotonic()
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return
        parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions]
        # Only end-of-partition is trusted: the embedded broker's high watermark undercounts.
        marks = {p.partition: c.get_watermark_offsets(p, timeout=10) for p in parts}
        pending = {p for p, (low, high) in marks.items() if high > low}
        c.assign(parts)
        while pending:
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"{topic} not read within {timeout_s}s")
            for msg in c.consume(10_000, timeout=0.5):
                error, partition = msg.error(), int(msg.partition() or 0)
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(partition)
                    continue
                try:
                    name, record = codec.decode(msg.value(), topic=topic)
                except DecodeError:
                    continue  # its consumer dead-letters it; nothing to learn here
                if name == _EVENT_OF.get(topic, name):  # another event type: dead-lettered too
                    yield record, msg.timestamp()[1]
    finally:
        c.close()


def read_final_decisions(
    kafka: KafkaConfig, codec: Codec, *, topic: str = DECISIONS_PLACEMENT, timeout_s: float = 60.0
) -> dict[str, dict[str, Any]]:
    """job_id -> its final PlacementDecision of the highest epoch, read from the whole topic."""
    started = time.monotonic()
    found: dict[str, dict[str, Any]] = {}
    for r, _ in _read_topic(kafka, codec, topic, timeout_s):
        # a submission refused at admission (streams.admission) leaves its job id undecided
        if r.get("outcome") not in _FINAL or not r.get("admitted", True):
            continue
        seen = found.get(r["job_id"])
        if seen is None or int(r.get("epoch") or 0) >= int(seen.get("epoch") or 0):
            found[r["job_id"]] = r
    log.info("ledger read final=%d in_s=%.2f", len(found), time.monotonic() - started)
    return found


def read_ended_jobs(
    kafka: KafkaConfig, codec: Codec, *, topic: str = JOBS_EVENTS, timeout_s: float = 60.0
) -> dict[str, dict[int, tuple[str, int]]]:
    """job_id -> {epoch: (FINISHED | FAILED | EVICTED, when the last such report was written,
    ms)}: placements the executor reported over, whose GPUs are free again if that report was
    written after the placement (and, when EVICTED, whose job waits for its next epoch).

    The log, not the reservations table, is the authority: a table write lost in a crash
    must neither leak GPUs (a release lost) nor resurrect a finished job.
    """
    ended: dict[str, dict[int, tuple[str, int]]] = {}
    for r, written in _read_topic(kafka, codec, topic, timeout_s):
        if r.get("type") in _ENDED:
            ends = ended.setdefault(r["job_id"], {})
            epoch = int(r.get("epoch") or 0)
            if written >= ends.get(epoch, ("", -1))[1]:
                ends[epoch] = (r["type"], written)
    return ended


def overbooked(
    decisions: list[dict[str, Any]],
    events: list[dict[str, Any]],
    moves: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """GPUs whose concurrent reservations exceed one whole GPU, from the logs alone.

    A placement (job, epoch) holds its GPUs from its decision's ts until that epoch's first
    ending event (FINISHED, FAILED, EVICTED) stamped at or after it (the placer only reuses
    GPUs after it consumed that event, so later decisions are later in ts). An ending event
    stamped before the placement (a stale or hostile one) cannot be placed on this timeline
    and is skipped, which can only make the check stricter.

    `moves` (MigrationDecisions) change what a placement holds: a move's target GPUs are held
    from its decision; when the job's next MIGRATED report (at or after the move) confirms it,
    the GPUs it left are free from that report on and the target is the job's until it ends or
    moves again; a move never confirmed holds its target until its `hold_until_ts`.
    """
    ends: dict[tuple[str, int], list[int]] = {}
    migrated: dict[str, list[int]] = {}
    for e in events:
        if e.get("type") in _ENDED:
            ends.setdefault((e["job_id"], int(e.get("epoch") or 0)), []).append(int(e["ts"]))
        elif e.get("type") == "MIGRATED":
            migrated.setdefault(e["job_id"], []).append(int(e["ts"]))
    by_job: dict[str, list[Mapping[str, Any]]] = {}
    for m in moves:
        if m.get("to_assignments"):
            by_job.setdefault(m["job_id"], []).append(m)
    spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}

    def hold(assignments: Any, start: int, end: int) -> None:
        for a in assignments:
            for gpu in a["gpu_indices"]:
                spans.setdefault((a["node_id"], gpu), []).append((start, end, a["gpu_milli"]))

    for d in decisions:
        if d.get("outcome") != "PLACED":
            continue
        mine = ends.get((d["job_id"], int(d.get("epoch") or 0)), ())
        end = min((t for t in mine if t >= d["ts"]), default=2**62)
        start, current = int(d["ts"]), d["assignments"]
        reports = sorted(t for t in migrated.get(d["job_id"], ()) if d["ts"] <= t < end)
        for m in sorted(by_job.get(d["job_id"], ()), key=lambda m: timestamp_ms(m["ts"])):
            at = timestamp_ms(m["ts"])
            if not d["ts"] <= at < end:
                continue
            done = next((t for t in reports if t >= at), None)
            if done is None:  # never confirmed: the target was held until the hold ran out
                hold(m["to_assignments"], at, min(end, timestamp_ms(m.get("hold_until_ts")) or end))
                continue
            reports.remove(done)
            hold(current, start, done)  # what it left, freed by the confirmation
            start, current = at, m["to_assignments"]  # held from the decision on
        hold(current, start, end)
    bad = []
    for gpu, intervals in spans.items():
        points = sorted(
            [(s, m) for s, _, m in intervals] + [(e, -m) for _, e, m in intervals],
            key=lambda p: (p[0], p[1]),
        )
        held = 0
        for _, delta in points:
            held += delta
            if held > 1000:
                bad.append(f"{gpu[0]}[{gpu[1]}] holds {held} milli")
                break
    return bad


def read_routed_attempts(
    kafka: KafkaConfig, codec: Codec, *, topic: str = JOBS_ROUTED, timeout_s: float = 60.0
) -> dict[str, int]:
    """job_id -> the highest attempt of its RoutedJob records: how far each job has travelled.

    With several workers, the routed log is what tells a worker taking over a partition that
    a replayed job was already routed, or already forwarded past a region.
    """
    out: dict[str, int] = {}
    for r, _ in _read_topic(kafka, codec, topic, timeout_s):
        job_id, attempt = r["job"]["job_id"], int(r["attempt"])
        if attempt > out.get(job_id, 0):
            out[job_id] = attempt
    return out


def read_job_log(
    kafka: KafkaConfig, codec: Codec, *, topic: str = JOBS_EVENTS, timeout_s: float = 60.0
) -> tuple[dict[str, dict[int, tuple[str, int]]], dict[str, list[dict[str, Any]]]]:
    """One pass over the job-event log: the placements that ended (as `read_ended_jobs`), and
    each job's MIGRATED reports in log order."""
    ended: dict[str, dict[int, tuple[str, int]]] = {}
    migrated: dict[str, list[dict[str, Any]]] = {}
    for r, written in _read_topic(kafka, codec, topic, timeout_s):
        if r.get("type") in _ENDED:
            ends = ended.setdefault(r["job_id"], {})
            epoch = int(r.get("epoch") or 0)
            if written >= ends.get(epoch, ("", -1))[1]:
                ends[epoch] = (r["type"], written)
        elif r.get("type") == "MIGRATED":
            migrated.setdefault(r["job_id"], []).append(r)
    return ended, migrated


def read_migrations(
    kafka: KafkaConfig, codec: Codec, *, topic: str = DECISIONS_MIGRATION, timeout_s: float = 60.0
) -> dict[str, list[dict[str, Any]]]:
    """job_id -> its MigrationDecisions in log order (duplicates from redelivery dropped)."""
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for r, _ in _read_topic(kafka, codec, topic, timeout_s):
        if r["event_id"] not in seen:
            seen.add(r["event_id"])
            out.setdefault(r["job_id"], []).append(r)
    return out
