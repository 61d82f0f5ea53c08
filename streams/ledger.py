"""The decision log as the source of truth for which jobs are already decided.

At start the worker reads `gpuflow.decisions.placement` from the beginning to its end and keeps
each job's final decision (PLACED or REJECTED). A crash between "decision produced" and "table
updated" (or the other way round) is then healed by `Scheduler.rebuild`, so a replay after a
crash neither decides a job twice nor loses a decision. Migrations are read the same way
(`gpuflow.decisions.migration`, and the executor's MIGRATED reports on `gpuflow.jobs.events`),
so a moved job comes back on the GPUs it moved to and a move still in flight keeps its hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from infra.config import KafkaConfig
from infra.kafka import consumer
from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_EVENTS
from schemas import Codec, DecodeError

__all__ = ["read_ended_jobs", "read_final_decisions", "read_job_log", "read_migrations"]

log = logging.getLogger(__name__)

_FINAL = ("PLACED", "REJECTED")
_ENDED = ("FINISHED", "FAILED", "EVICTED")


def _read_topic(
    kafka: KafkaConfig, codec: Codec, topic: str, timeout_s: float
) -> Iterator[dict[str, Any]]:
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
                    yield codec.decode(msg.value(), topic=topic)[1]
                except DecodeError:
                    continue  # its consumer dead-letters it; nothing to learn here
    finally:
        c.close()


def read_final_decisions(
    kafka: KafkaConfig, codec: Codec, *, topic: str = DECISIONS_PLACEMENT, timeout_s: float = 60.0
) -> dict[str, dict[str, Any]]:
    """job_id -> its last final PlacementDecision record, read from the whole topic."""
    started = time.monotonic()
    found = {
        r["job_id"]: r
        for r in _read_topic(kafka, codec, topic, timeout_s)
        if r.get("outcome") in _FINAL
    }
    log.info("ledger read final=%d in_s=%.2f", len(found), time.monotonic() - started)
    return found


def read_ended_jobs(
    kafka: KafkaConfig, codec: Codec, *, topic: str = JOBS_EVENTS, timeout_s: float = 60.0
) -> set[str]:
    """Jobs the executor reported finished, failed or evicted: their GPUs are free again.

    The log, not the reservations table, is the authority: a table write lost in a crash
    must neither leak GPUs (a release lost) nor resurrect a finished job.
    """
    return {
        r["job_id"] for r in _read_topic(kafka, codec, topic, timeout_s) if r.get("type") in _ENDED
    }


def read_job_log(
    kafka: KafkaConfig, codec: Codec, *, topic: str = JOBS_EVENTS, timeout_s: float = 60.0
) -> tuple[set[str], dict[str, list[dict[str, Any]]]]:
    """One pass over the job-event log: the jobs that ended, and each job's MIGRATED reports
    (in log order)."""
    ended: set[str] = set()
    migrated: dict[str, list[dict[str, Any]]] = {}
    for r in _read_topic(kafka, codec, topic, timeout_s):
        if r.get("type") in _ENDED:
            ended.add(r["job_id"])
        elif r.get("type") == "MIGRATED":
            migrated.setdefault(r["job_id"], []).append(r)
    return ended, migrated


def read_migrations(
    kafka: KafkaConfig, codec: Codec, *, topic: str = DECISIONS_MIGRATION, timeout_s: float = 60.0
) -> dict[str, list[dict[str, Any]]]:
    """job_id -> its MigrationDecisions in log order (duplicates from redelivery dropped)."""
    out: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for r in _read_topic(kafka, codec, topic, timeout_s):
        if r["event_id"] not in seen:
            seen.add(r["event_id"])
            out.setdefault(r["job_id"], []).append(r)
    return out
