"""Executor twin: carries out decisions the way a real executor would report them.

It consumes `gpuflow.decisions.placement`, "runs" each PLACED job for its expected duration
(scaled by `time_scale`, so a demo hour can pass in seconds), and publishes STARTED and then
FINISHED `JobEvent`s on the job's region partition, which frees the GPUs in the placer.
It also consumes `gpuflow.decisions.migration`: a running job is stopped (the work since its
last checkpoint, the decision's `lost_work_s`, is lost unless it checkpoints first), moved and
resumed on the target GPUs after the restore (`restore_s`), at the target's speed (the ratio
of `expected_throughput` to `from_throughput`); MIGRATED is reported on the target region's
partition with the job's progress. A move arriving after its `hold_until_ts` is not carried
out (the scheduler has given the target GPUs back). Duplicate decisions (at-least-once
delivery) are recognised by event id and ignored.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException

from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.kafka import consumer, producer
from infra.topics import DEADLETTER, DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_EVENTS
from schemas import DecodeError, make_codec

__all__ = ["ExecutorStats", "ExecutorTwin", "RecentJobs"]

log = logging.getLogger(__name__)


class RecentJobs:
    """The last `capacity` job ids seen, oldest forgotten first: a bounded duplicate filter."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ids: dict[str, None] = {}

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, job_id: str) -> None:
        self._ids[job_id] = None
        if len(self._ids) > self.capacity:
            del self._ids[next(iter(self._ids))]


@dataclass
class ExecutorStats:
    started: int = 0
    finished: int = 0
    migrated: int = 0
    duplicates: int = 0
    running: set[str] = field(default_factory=set)


@dataclass
class _Run:
    """A job the twin runs: its share of work done before this segment, when the segment
    began (after any restore) and how long the rest takes at this segment's pace."""

    region: str
    nodes: list[str]
    done: float  # fraction of the work done before this segment
    began: float  # monotonic time the segment's compute began
    full_s: float  # wall seconds the whole job takes at this segment's pace
    epoch: int = 0

    def progress(self, now: float) -> float:
        return min(1.0, self.done + max(0.0, now - self.began) / self.full_s)


class ExecutorTwin:
    """Runs placed jobs on a (scaled) clock and reports their lifecycle."""

    def __init__(
        self,
        config: Config,
        *,
        time_scale: float = 1.0,
        default_duration_s: float = 30.0,
        on_decision: Callable[[dict[str, Any]], None] | None = None,
        group_id: str | None = None,
    ) -> None:
        self.config = config
        self.partition_of = config.kafka.partitioner()
        self.time_scale = time_scale
        self.default_duration_s = default_duration_s
        self.on_decision = on_decision
        self.group_id = group_id or f"{config.worker.app_id}-executor"
        self.codec = make_codec(config.kafka.schema_registry_url or None)
        self.stats = ExecutorStats()
        self._seen = RecentJobs(100_000)  # duplicates arrive within seconds, not hours
        self._moves_seen = RecentJobs(100_000)  # migration event ids, the same way
        self._runs: dict[str, _Run] = {}
        self._due: list[tuple[float, str, int]] = []  # (when, job_id, epoch)
        self._producer: Any = None

    def run(self, stop: threading.Event) -> None:
        """Consume decisions and emit job events until `stop` is set."""
        c = consumer(self.config.kafka, self.group_id)
        self._producer = producer(self.config.kafka)
        c.subscribe([DECISIONS_PLACEMENT, DECISIONS_MIGRATION])
        consumed = False
        try:
            while not stop.is_set():
                p = self._producer  # replaced if librdkafka gives it up (see _emit)
                for msg in c.consume(500, timeout=0.1):
                    if msg.error():
                        continue
                    self._on_message(p, msg)
                    consumed = True
                self._finish_due(p)
                p.poll(0)
                if consumed:
                    c.commit(asynchronous=True)
                    consumed = False
        except KafkaException as exc:
            log.error("executor stopped: %s", exc)
        finally:
            self._producer.flush(5)
            c.close()

    def _on_message(self, p: Any, msg: Any) -> None:
        topic = str(msg.topic())
        try:
            _, decision = self.codec.decode(msg.value(), topic=topic)
        except DecodeError as exc:
            self._dead_letter(p, msg, exc)
            return
        if topic == DECISIONS_MIGRATION:
            self._migrate(p, decision)
            return
        if self.on_decision is not None:
            self.on_decision(decision)
        if decision["outcome"] != "PLACED":
            return
        job_id = decision["job_id"]
        if job_id in self._seen:
            self.stats.duplicates += 1
            return
        self._seen.add(job_id)
        nodes = [a["node_id"] for a in decision["assignments"]]
        self._emit(p, job_id, decision["region"], "STARTED", nodes)
        self.stats.started += 1
        self.stats.running.add(job_id)
        duration = decision.get("expected_duration_s") or self.default_duration_s
        run = _Run(
            decision["region"], nodes, 0.0, time.monotonic(), float(duration) * self.time_scale
        )
        self._runs[job_id] = run
        self._schedule(job_id, run)

    def _schedule(self, job_id: str, run: _Run) -> None:
        run.epoch += 1
        due = run.began + (1.0 - run.done) * run.full_s
        heapq.heappush(self._due, (due, job_id, run.epoch))

    def _migrate(self, p: Any, move: dict[str, Any]) -> None:
        """Stop, move and resume a running job as the MigrationDecision says."""
        job_id, run = move["job_id"], self._runs.get(move["job_id"])
        if move["event_id"] in self._moves_seen:
            self.stats.duplicates += 1
            return
        self._moves_seen.add(move["event_id"])
        now = time.monotonic()
        hold_until = _epoch_ms(move.get("hold_until_ts"))
        if run is None or (hold_until and time.time() * 1000 > hold_until):
            log.warning(
                "migration not carried out job_id=%s (not running, or its hold expired)", job_id
            )
            return
        pace = (move.get("from_throughput") or 0.0) / (move.get("expected_throughput") or 1.0)
        lost = 0.0 if move.get("checkpoint_first") else float(move.get("lost_work_s") or 0.0)
        done = max(0.0, run.progress(now) - lost * self.time_scale / run.full_s)
        full_s = run.full_s * (pace if pace > 0 else 1.0)
        restore = float(move.get("restore_s") or 0.0) * self.time_scale
        nodes = [a["node_id"] for a in move["to_assignments"]]
        moved = _Run(move["to_region"], nodes, done, now + restore, full_s, run.epoch)
        self._runs[job_id] = moved
        self._schedule(job_id, moved)
        self._emit(p, job_id, move["to_region"], "MIGRATED", nodes, progress=done)
        self.stats.migrated += 1

    def _dead_letter(self, p: Any, msg: Any, error: Exception) -> None:
        log.warning("executor dead-lettered offset=%s: %s", msg.offset(), error)
        record = dead_letter_record(
            topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
            key=msg.key(), value=msg.value(), error=error, consumer="executor",
        )  # fmt: skip
        p.produce(DEADLETTER, key=msg.key(), value=self.codec.encode("DeadLetter", record))

    def _finish_due(self, p: Any) -> None:
        now = time.monotonic()
        while self._due and self._due[0][0] <= now:
            _, job_id, epoch = heapq.heappop(self._due)
            run = self._runs.get(job_id)
            if run is None or run.epoch != epoch:
                continue  # moved since: its finish was rescheduled
            del self._runs[job_id]
            self._emit(p, job_id, run.region, "FINISHED", run.nodes, progress=1.0)
            self.stats.finished += 1
            self.stats.running.discard(job_id)

    def _emit(
        self, p: Any, job_id: str, region: str, kind: str, nodes: list[str], progress: float = 0.0
    ) -> None:
        record = {
            "event_id": f"{job_id}:{kind}:{time.monotonic_ns()}"
            if kind == "MIGRATED"
            else f"{job_id}:{kind}",
            "ts": int(time.time() * 1000),
            "job_id": job_id,
            "region": region,
            "type": kind,
            "node_ids": nodes,
            "progress": progress,
        }
        value = self.codec.encode("JobEvent", record, topic=JOBS_EVENTS)
        partition = self.partition_of(region)
        try:
            p.produce(JOBS_EVENTS, key=job_id.encode(), value=value, partition=partition)
        except KafkaException as exc:
            if not exc.args[0].fatal():
                raise
            log.error("executor producer failed for good (%s); starting a new one", exc)
            self._producer = producer(self.config.kafka)
            self._producer.produce(
                JOBS_EVENTS, key=job_id.encode(), value=value, partition=partition
            )


def _epoch_ms(value: Any) -> int:
    """Avro timestamp-millis may arrive decoded as a datetime."""
    if value is None:
        return 0
    return int(value.timestamp() * 1000) if hasattr(value, "timestamp") else int(value)
