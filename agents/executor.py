"""Executor twin: carries out decisions the way a real executor would, and reports back.

It consumes `gpuflow.decisions.placement`, `.preemption`, `.migration` and `.advisory`:
  - PLACED: "runs" the job for its expected duration (scaled by `time_scale`, so a demo hour can
    pass in seconds), STARTED then FINISHED `JobEvent`s;
  - a PreemptionDecision: stops the victim; checkpoint-first, it writes a checkpoint first
    (`checkpoint_s`, never past the grace period) and keeps all its work, else it keeps the
    work up to its last checkpoint; reported EVICTED with the progress kept and the work lost;
  - a MigrationDecision without a target (NODE_UNHEALTHY: get off this node): checkpoint, stop,
    EVICTED (the scheduler places the job again); with a target (a better match): the work
    since the last checkpoint (`lost_work_s`) is lost unless it checkpoints first, the job
    resumes on the target GPUs after the restore (`restore_s`) at the target's pace (the ratio
    of `expected_throughput` to `from_throughput`), MIGRATED on the target region's partition
    with its progress; a move arriving after its `hold_until_ts` is not carried out (the
    scheduler has given the target GPUs back);
  - a NodeAdvisory CHECKPOINT: the listed jobs checkpoint now (CHECKPOINTED);
  - a PreemptionDecision with cause CANCEL (`gpuflow cancel`): the job stops at once, as a
    process does on SIGTERM, reported CANCELLED (exit code -15);
  - a job's `time_limit_s` (read from `gpuflow.jobs.submitted`, kept for jobs that set one):
    a placement whose expected run is longer ends at the limit, reported TIMEOUT (exit -15).
    One twin reads every submission; twins splitting the partitions in one group would each
    see only some (their jobs then run without a limit).
Every event echoes the epoch of the placement it is about, on the job's region partition.
Duplicate decisions (at-least-once delivery) are recognised by job id and epoch and ignored.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka import KafkaException

from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.kafka import consumer, producer
from infra.topics import (
    DEADLETTER,
    DECISIONS_ADVISORY,
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_EVENTS,
    JOBS_SUBMITTED,
)
from schemas import DecodeError, make_codec, timestamp_ms

__all__ = ["ExecutorStats", "ExecutorTwin", "RecentJobs"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)

TOPICS = (
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    DECISIONS_MIGRATION,
    DECISIONS_ADVISORY,
    JOBS_SUBMITTED,
)
_SIGTERM_EXIT = -15  # what a process stopped by SIGTERM reports


class RecentJobs(Generic[K]):
    """The last `capacity` keys seen (job ids, or job id + epoch), oldest forgotten first: a
    bounded duplicate filter."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._ids: dict[K, None] = {}

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, job_id: K) -> None:
        self._ids[job_id] = None
        if len(self._ids) > self.capacity:
            del self._ids[next(iter(self._ids))]


@dataclass
class ExecutorStats:
    started: int = 0
    finished: int = 0
    evicted: int = 0
    migrated: int = 0
    cancelled: int = 0
    timed_out: int = 0
    duplicates: int = 0
    running: set[str] = field(default_factory=set)


@dataclass
class _Run:
    """One placement being carried out."""

    job_id: str
    epoch: int
    region: str
    nodes: list[str]
    gpus: float
    started: float  # monotonic
    duration: float  # scaled seconds for the work left at the start
    base: float  # fraction of the whole job done before this placement
    saved: float  # fraction kept by the last checkpoint
    stopping: bool = False

    def progress(self, now: float) -> float:
        if self.duration <= 0:
            return 1.0
        done = min(1.0, max(0.0, now - self.started) / self.duration)
        return self.base + (1.0 - self.base) * done


class ExecutorTwin:
    """Runs placed jobs on a (scaled) clock, honours evictions, and reports their lifecycle."""

    def __init__(
        self,
        config: Config,
        *,
        time_scale: float = 1.0,
        default_duration_s: float = 30.0,
        checkpoint_s: float = 1.0,
        on_decision: Callable[[dict[str, Any]], None] | None = None,
        group_id: str | None = None,
    ) -> None:
        self.config = config
        self.partition_of = config.kafka.partitioner()
        self.time_scale = time_scale
        self.default_duration_s = default_duration_s
        self.checkpoint_s = checkpoint_s  # writing a checkpoint on demand, real seconds
        self.on_decision = on_decision
        self.group_id = group_id or f"{config.worker.app_id}-executor"
        self.codec = make_codec(config.kafka.schema_registry_url or None)
        self.stats = ExecutorStats()
        self._seen: RecentJobs[tuple[str, int]] = RecentJobs(100_000)  # (job, epoch)
        self._runs: dict[str, _Run] = {}
        self._moves_seen: RecentJobs[str] = RecentJobs(100_000)  # migration event ids
        self._progress: dict[str, float] = {}  # kept by the last eviction
        self._limits: dict[str, float] = {}  # job -> its time limit, s (only jobs with one)
        self._due: list[tuple[float, int, str, int, str]] = []  # (when, seq, job, epoch, what)
        self._seq = 0
        self._producer: Any = None

    def run(self, stop: threading.Event) -> None:
        """Consume decisions and emit job events until `stop` is set."""
        c = consumer(self.config.kafka, self.group_id)
        self._producer = producer(self.config.kafka)
        c.subscribe(list(TOPICS))
        consumed = False
        try:
            while not stop.is_set():
                p = self._producer  # replaced if librdkafka gives it up (see _emit)
                for msg in c.consume(500, timeout=0.1):
                    if msg.error():
                        continue
                    self._on_message(p, msg)
                    consumed = True
                self._do_due(p)
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
        try:
            name, record = self.codec.decode(msg.value(), topic=msg.topic())
        except DecodeError as exc:
            if msg.topic() != JOBS_SUBMITTED:  # the worker dead-letters bad submissions
                self._dead_letter(p, msg, exc)
            return
        handler = self._HANDLERS.get(name)
        if handler is not None:
            handler(self, p, record)

    def _on_placement(self, p: Any, decision: dict[str, Any]) -> None:
        if self.on_decision is not None:
            self.on_decision(decision)
        if decision["outcome"] != "PLACED":
            return
        job_id, epoch = decision["job_id"], int(decision.get("epoch") or 0)
        if (job_id, epoch) in self._seen:
            self.stats.duplicates += 1
            return
        self._seen.add((job_id, epoch))
        nodes = [a["node_id"] for a in decision["assignments"]]
        gpus = sum(
            len(a["gpu_indices"]) * a.get("gpu_milli", 1000) / 1000 for a in decision["assignments"]
        )
        duration = float(decision.get("expected_duration_s") or self.default_duration_s)
        base = self._progress.get(job_id, 0.0)
        run = _Run(job_id, epoch, decision["region"], nodes, gpus, time.monotonic(),
                   duration * self.time_scale, base, base)  # fmt: skip
        self._runs[job_id] = run
        self._emit(p, run, "STARTED")
        self.stats.started += 1
        self.stats.running.add(job_id)
        limit = self._limits.get(job_id, 0.0) * self.time_scale
        if limit and run.duration > limit:
            self._later(run.started + limit, job_id, epoch, "TIMEOUT")
        self._later(run.started + run.duration, job_id, epoch, "FINISHED")

    def _on_submitted(self, p: Any, job: dict[str, Any]) -> None:
        limit = float(job.get("time_limit_s") or 0)
        if limit > 0:
            self._limits[str(job["job_id"])] = limit
            if len(self._limits) > 100_000:  # bounded: the oldest limits go first
                del self._limits[next(iter(self._limits))]

    def _on_preemption(self, p: Any, d: dict[str, Any]) -> None:
        run = self._runs.get(d["job_id"])
        if run is None or run.epoch != int(d.get("victim_epoch") or 0):
            return
        if d.get("cause") == "CANCEL":  # stopping for a preemption or not: it ends now
            self._end(p, run, "CANCELLED", detail=d.get("reason") or "cancelled")
            return
        if run.stopping:
            return
        if not d.get("checkpoint_first"):
            self._stop(p, run, keep=run.saved, detail=f"preempted for {d['for_job_id']}")
            return
        grace = float(d.get("grace_period_s") or 0.0) or float("inf")
        run.saved = run.progress(time.monotonic())  # the checkpoint captures this state
        run.stopping = True
        delay = min(self.checkpoint_s, grace)
        self._later(time.monotonic() + delay, run.job_id, run.epoch, "EVICTED")

    def _on_migration(self, p: Any, d: dict[str, Any]) -> None:
        run = self._runs.get(d["job_id"])
        if run is None or run.stopping:
            return
        if d.get("to_assignments"):
            self._move(p, run, d)
            return
        run.saved = run.progress(time.monotonic())
        run.stopping = True
        self._later(time.monotonic() + self.checkpoint_s, run.job_id, run.epoch, "EVICTED")

    def _move(self, p: Any, run: _Run, move: dict[str, Any]) -> None:
        """Stop, move and resume a running job as a MigrationDecision with a target says."""
        if move["event_id"] in self._moves_seen:
            self.stats.duplicates += 1
            return
        self._moves_seen.add(move["event_id"])
        hold_until = timestamp_ms(move.get("hold_until_ts"))
        if hold_until and time.time() * 1000 > hold_until:
            log.warning("migration not carried out job_id=%s (its hold expired)", run.job_id)
            return
        now = time.monotonic()
        full_s = run.duration / max(1e-9, 1.0 - run.base)  # the whole job at the old pace
        pace = (move.get("from_throughput") or 0.0) / (move.get("expected_throughput") or 1.0)
        lost = 0.0 if move.get("checkpoint_first") else float(move.get("lost_work_s") or 0.0)
        done = max(0.0, run.progress(now) - lost * self.time_scale / full_s)
        full_s *= pace if pace > 0 else 1.0
        restore = float(move.get("restore_s") or 0.0) * self.time_scale
        moved = _Run(run.job_id, run.epoch, move.get("to_region") or run.region,
                     [a["node_id"] for a in move["to_assignments"]], run.gpus, now + restore,
                     (1.0 - done) * full_s, done, done)  # fmt: skip
        self._runs[run.job_id] = moved
        self._emit(p, moved, "MIGRATED", progress=done)
        self.stats.migrated += 1
        self._later(moved.started + moved.duration, run.job_id, run.epoch, "FINISHED")

    def _on_advisory(self, p: Any, d: dict[str, Any]) -> None:
        if d.get("action") != "CHECKPOINT":
            return
        for job_id in d.get("job_ids") or ():
            run = self._runs.get(job_id)
            if run is not None and not run.stopping:
                run.saved = run.progress(time.monotonic())
                self._emit(p, run, "CHECKPOINTED", progress=run.saved)

    _HANDLERS: dict[str, Callable[[ExecutorTwin, Any, dict[str, Any]], None]] = {
        "PlacementDecision": _on_placement,
        "PreemptionDecision": _on_preemption,
        "MigrationDecision": _on_migration,
        "NodeAdvisory": _on_advisory,
        "JobSubmitted": _on_submitted,
    }

    def _later(self, when: float, job_id: str, epoch: int, what: str) -> None:
        self._seq += 1
        heapq.heappush(self._due, (when, self._seq, job_id, epoch, what))

    def _do_due(self, p: Any) -> None:
        now = time.monotonic()
        while self._due and self._due[0][0] <= now:
            _, _, job_id, epoch, what = heapq.heappop(self._due)
            run = self._runs.get(job_id)
            if run is None or run.epoch != epoch:
                continue  # stopped or placed again since
            if what == "FINISHED":
                if not run.stopping and now >= run.started + run.duration - 1e-6:
                    self._finish(p, run)  # (a moved job's earlier finish is not its finish)
            elif what == "TIMEOUT":
                if not run.stopping:
                    self._end(p, run, "TIMEOUT", detail="time limit reached")
            else:
                self._stop(p, run, keep=run.saved, detail="checkpointed, then stopped")

    def _finish(self, p: Any, run: _Run) -> None:
        del self._runs[run.job_id]
        self._progress.pop(run.job_id, None)
        self._limits.pop(run.job_id, None)
        self._emit(p, run, "FINISHED", progress=1.0, exit_code=0)
        self.stats.finished += 1
        self.stats.running.discard(run.job_id)

    def _end(self, p: Any, run: _Run, kind: str, *, detail: str) -> None:
        """CANCELLED or TIMEOUT: the process is gone (SIGTERM); the job is over."""
        progress = run.progress(time.monotonic())
        del self._runs[run.job_id]
        self._progress.pop(run.job_id, None)
        self._limits.pop(run.job_id, None)
        self._emit(p, run, kind, progress=progress, detail=detail, exit_code=_SIGTERM_EXIT)
        if kind == "CANCELLED":
            self.stats.cancelled += 1
        else:
            self.stats.timed_out += 1
        self.stats.running.discard(run.job_id)

    def _stop(self, p: Any, run: _Run, *, keep: float, detail: str) -> None:
        now = time.monotonic()
        lost_fraction = max(0.0, run.progress(now) - keep) if not run.stopping else 0.0
        lost_gpu_s = (
            lost_fraction / max(1e-9, 1 - run.base) * run.duration / self.time_scale * run.gpus
        )
        del self._runs[run.job_id]
        self._progress[run.job_id] = keep
        self._emit(p, run, "EVICTED", progress=keep, detail=detail, lost_gpu_s=lost_gpu_s)
        self.stats.evicted += 1
        self.stats.running.discard(run.job_id)

    def _dead_letter(self, p: Any, msg: Any, error: Exception) -> None:
        log.warning("executor dead-lettered offset=%s: %s", msg.offset(), error)
        record = dead_letter_record(
            topic=msg.topic(), partition=msg.partition(), offset=msg.offset(),
            key=msg.key(), value=msg.value(), error=error, consumer="executor",
        )  # fmt: skip
        p.produce(DEADLETTER, key=msg.key(), value=self.codec.encode("DeadLetter", record))

    def _emit(self, p: Any, run: _Run, kind: str, **extra: Any) -> None:
        ts = int(time.time() * 1000)
        repeatable = kind in ("CHECKPOINTED", "MIGRATED")  # may happen more than once an epoch
        record = {
            "event_id": f"{run.job_id}:{kind}:{run.epoch}" + (f":{ts}" if repeatable else ""),
            "ts": ts,
            "job_id": run.job_id,
            "region": run.region,
            "type": kind,
            "node_ids": list(run.nodes),
            "progress": float(extra.pop("progress", 0.0)),
            "epoch": run.epoch,
            **extra,
        }
        value = self.codec.encode("JobEvent", record, topic=JOBS_EVENTS)
        partition = self.partition_of(run.region)
        key = run.job_id.encode()
        try:
            p.produce(JOBS_EVENTS, key=key, value=value, partition=partition)
        except KafkaException as exc:
            if not exc.args[0].fatal():
                raise
            log.error("executor producer failed for good (%s); starting a new one", exc)
            self._producer = producer(self.config.kafka)
            self._producer.produce(JOBS_EVENTS, key=key, value=value, partition=partition)
