"""`NodeExecutor`: carries out the decisions for its own node(s) with real processes.

It reads, with no consumer group and from `lookback_s` ago on every start, gpuflow.jobs.submitted
for the jobs' specs (what to run: the first submission of a job id, as the router takes it) and
gpuflow.decisions.placement / .preemption / .migration: every node's placements (so it knows
when a job it runs was placed again elsewhere: its process is stopped), and the preemptions and
moves of its own jobs. State that must outlive the process is in the `Journal`; on start it
re-attaches to the processes it started and reports the ones that ended meanwhile. See
docs/agents.md, "The node executor".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TopicPartition

from agents.execution.driver import RawProcessDriver
from agents.execution.envvars import job_env, visible_devices_env
from agents.execution.journal import Journal
from agents.execution.logs import LogLimits, LogShipper
from agents.execution.placed import build_task
from agents.execution.task import PROGRESS_FILE, Event, State, TaskRunner, Timing
from infra.config import Config
from infra.kafka import consumer, producer
from infra.topics import (
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_EVENTS,
    JOBS_LOGS,
    JOBS_SUBMITTED,
)
from schemas import DecodeError, make_codec

__all__ = ["ExecutorSettings", "ExecutorStats", "NodeExecutor"]

log = logging.getLogger(__name__)
TOPICS = (JOBS_SUBMITTED, DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, DECISIONS_MIGRATION)
_CAP = 50_000  # job specs and latest epochs remembered


@dataclass(frozen=True)
class ExecutorSettings:
    node_ids: tuple[str, ...]
    state_dir: Path
    checkpoint_root: Path  # GPUFLOW_CHECKPOINT_DIR = root/job: shared by all executors
    vendor: str = "nvidia"
    lookback_s: float = 600.0  # decisions and specs re-read on start
    max_decision_age_s: float = 300.0  # an older placement never journalled is not started
    spec_wait_s: float = 10.0  # a placement waits this long for its job's spec
    tick_s: float = 0.05
    timing: Timing = field(default_factory=Timing)
    logs: LogLimits = field(default_factory=LogLimits)


@dataclass
class ExecutorStats:
    started: int = 0
    ended: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    reattached: int = 0


class NodeExecutor:
    def __init__(self, config: Config, settings: ExecutorSettings) -> None:
        self.config, self.settings = config, settings
        self.codec = make_codec(config.kafka.schema_registry_url or None)
        self.partition_of = config.kafka.partitioner()
        self.journal = Journal(settings.state_dir)
        self.driver = RawProcessDriver()
        self.stats = ExecutorStats()
        self.runners: dict[tuple[str, int], TaskRunner] = {}
        self.shippers: dict[tuple[str, int], LogShipper] = {}
        self.specs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.latest: OrderedDict[str, int] = OrderedDict()  # job -> latest placed epoch
        self.pending: dict[tuple[str, int], tuple[float, dict[str, Any]]] = {}
        self._p: Any = None

    # ---- the loop -------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> ExecutorStats:
        self._p = producer(self.config.kafka)
        c = consumer(self.config.kafka, f"{self.config.worker.app_id}-exec-{os.getpid()}")
        try:
            self._assign(c)
            self._recover()
            log.info("executor started nodes=%s", ",".join(self.settings.node_ids))
            while not stop.is_set():
                for msg in _receive(c, self.settings.tick_s):
                    if not msg.error():
                        self._on_message(msg)
                self.step()
            self._p.flush(10)
        finally:
            c.close()
        return self.stats

    def _assign(self, c: Any) -> None:
        since = int((time.time() - self.settings.lookback_s) * 1000)
        wanted = []
        for topic in TOPICS:
            meta = c.list_topics(topic, timeout=10).topics[topic]
            wanted += [TopicPartition(topic, p, since) for p in meta.partitions]
        found = c.offsets_for_times(wanted, timeout=10)
        c.assign(
            [
                TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END)
                for tp in found
            ]
        )

    def step(self) -> None:
        """Start what waits, advance every task, ship logs, report."""
        now = time.time()
        for key, (seen, decision) in list(self.pending.items()):
            spec = self.specs.get(key[0])
            if spec is not None or now - seen > self.settings.spec_wait_s:
                del self.pending[key]
                self._start(decision, spec)
        for key, runner in list(self.runners.items()):
            shipper = self.shippers[key]
            for event in runner.tick(now):
                if event is runner.ending:
                    shipper.ship(final=True)
                    self._report(runner, event, mark="END")
                    del self.runners[key], self.shippers[key]
                else:
                    self._report(runner, event)
            if key in self.shippers:
                shipper.ship()
        self._p.poll(0)

    # ---- decisions ------------------------------------------------------------------------
    def _on_message(self, msg: Any) -> None:
        try:
            name, record = self.codec.decode(msg.value(), topic=msg.topic())
        except DecodeError as exc:
            log.warning("executor skipped an undecodable record on %s: %s", msg.topic(), exc)
            return
        if name == "JobSubmitted" and record["job_id"] not in self.specs:
            _remember(self.specs, record["job_id"], record)  # the first, as the router takes
        elif name == "PlacementDecision" and record["outcome"] == "PLACED":
            self._on_placement(record)
        elif name == "PreemptionDecision":
            self._on_preemption(record)
        elif name == "MigrationDecision":
            self._on_migration(record)

    def _on_placement(self, d: dict[str, Any]) -> None:
        job_id, epoch = d["job_id"], int(d.get("epoch") or 0)
        _remember(self.latest, job_id, max(epoch, self.latest.get(job_id, -1)))
        for (job, old), runner in self.runners.items():
            if job == job_id and old < epoch:
                where = ",".join(a["node_id"] for a in d["assignments"])
                runner.request_stop(
                    "EVICTED",
                    grace_s=0,
                    checkpoint=False,
                    detail=f"superseded by epoch {epoch} on {where}",
                )
        if not self._mine(d["assignments"]) or self.journal.claimed(job_id, epoch):
            return
        age = time.time() - int(d["ts"]) / 1000
        if age > self.settings.max_decision_age_s:
            log.info("executor skips an old placement job_id=%s epoch=%d", job_id, epoch)
            return
        self.pending.setdefault((job_id, epoch), (time.time(), d))

    def _on_preemption(self, d: dict[str, Any]) -> None:
        key = (d["job_id"], int(d.get("victim_epoch") or 0))
        runner = self.runners.get(key)
        if runner is None:
            return
        if d.get("cause") == "CANCEL":
            runner.request_stop(
                "CANCELLED",
                grace_s=float(d.get("grace_period_s") or 0.0),
                checkpoint=False,
                detail=d.get("reason") or "cancelled",
            )
            return
        grace = (
            float(runner.task.get("checkpoint_grace_s") or 0)
            or float(d.get("grace_period_s") or 0)
            or self.settings.timing.default_grace_s
        )
        runner.request_stop(
            "EVICTED",
            grace_s=grace,
            checkpoint=bool(d.get("checkpoint_first")),
            detail=f"preempted for {d.get('for_job_id')} ({d.get('cause')})",
        )

    def _on_migration(self, d: dict[str, Any]) -> None:
        for (job, _), runner in self.runners.items():
            if job == d["job_id"]:
                grace = (
                    float(runner.task.get("checkpoint_grace_s") or 0)
                    or self.settings.timing.default_grace_s
                )
                runner.request_stop(
                    "EVICTED", grace_s=grace, checkpoint=True, detail=f"moving ({d.get('reason')})"
                )

    def _mine(self, assignments: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [a for a in assignments if a["node_id"] in self.settings.node_ids]

    # ---- starting -------------------------------------------------------------------------
    def _start(self, d: dict[str, Any], spec: dict[str, Any] | None) -> None:
        job_id, epoch = d["job_id"], int(d.get("epoch") or 0)
        if self.latest.get(job_id, epoch) > epoch or self.journal.claimed(job_id, epoch):
            return  # placed again meanwhile, or already ours
        task = self._task(d, spec)
        runner = TaskRunner(
            self.journal.claim(job_id, epoch, task), task, self.driver, self.settings.timing
        )
        key = (job_id, epoch)
        self.runners[key] = runner
        self.shippers[key] = LogShipper(
            runner.d, task["node_id"], self._send_log, self.settings.logs
        )
        held = self._held(task["node_id"], exclude=key)
        clash = sorted(runner.gpus & held)
        if clash:
            owners = self._owners(task["node_id"], set(clash), exclude=key)
            event = runner.end(
                {
                    "type": "FAILED",
                    "cause": "REFUSED",
                    "detail": f"GPUs {clash} on {task['node_id']} are still held by {owners}",
                }
            )
            self.stats.refused += 1
        elif spec is None:
            event = runner.end(
                {
                    "type": "FAILED",
                    "cause": "LAUNCH_ERROR",
                    "detail": "the job's spec was not seen on gpuflow.jobs.submitted",
                }
            )
        else:
            event = runner.start(self._env(task))
            if event["type"] == "STARTED":
                self.stats.started += 1
        if runner.state is State.ENDED:  # refused or not launched: over at once
            self.shippers.pop(key).ship(final=True)
            del self.runners[key]
        self._report(runner, event, mark="END" if runner.state is State.ENDED else "STARTED")

    def _task(self, d: dict[str, Any], spec: dict[str, Any] | None) -> dict[str, Any]:
        [mine, *_] = self._mine(d["assignments"])
        return build_task(d, mine, spec, self.settings.checkpoint_root)

    def _env(self, task: dict[str, Any]) -> dict[str, str]:
        devices = visible_devices_env(self.settings.vendor, task["gpu_indices"], task["gpu_milli"])
        base = {k: v for k, v in os.environ.items() if not k.startswith("GPUFLOW_")}
        return job_env(
            base,
            task["env"],
            devices=devices,
            job_id=task["job_id"],
            epoch=task["epoch"],
            checkpoint_dir=task["checkpoint_dir"],
            progress_file=str(Path(task["checkpoint_dir"]) / PROGRESS_FILE),
            resume=task["resume"],
        )

    def _held(self, node_id: str, exclude: tuple[str, int]) -> set[int]:
        return {
            g
            for key, r in self.runners.items()
            if key != exclude and r.state is not State.ENDED and r.task["node_id"] == node_id
            for g in r.gpus
        }

    def _owners(self, node_id: str, gpus: set[int], exclude: tuple[str, int]) -> str:
        return ", ".join(
            f"{j} epoch {e}"
            for (j, e), r in self.runners.items()
            if (j, e) != exclude
            and r.task["node_id"] == node_id
            and r.state is not State.ENDED
            and r.gpus & gpus
        )

    # ---- restart --------------------------------------------------------------------------
    def _recover(self) -> None:
        """Re-attach to the journal's live epochs; the ones that ended are reported by step()."""
        self.journal.prune()
        for d in self.journal.epochs():
            if d.ended:
                continue
            task = d.get("task")
            runner = TaskRunner(d, task, self.driver, self.settings.timing)
            key = (d.job_id, d.epoch)
            self.runners[key] = runner
            self.shippers[key] = LogShipper(d, task["node_id"], self._send_log, self.settings.logs)
            alive = runner.attach()
            self.stats.reattached += alive
            if "STARTED" not in d.reported() and d.get("pid"):
                self._report(
                    runner, {"type": "STARTED", "pid": d.get("pid")["pid"]}, mark="STARTED"
                )
            log.info("executor found job_id=%s epoch=%d alive=%s", d.job_id, d.epoch, alive)

    # ---- reporting ------------------------------------------------------------------------
    def _report(self, runner: TaskRunner, event: Event, mark: str | None = None) -> None:
        """Produce the event; `mark` it as reported in the journal once the broker has it (a
        crash before that reports it again on restart, with the same event id)."""
        t = runner.task
        kind = event["type"]
        if kind not in ("STARTED", "CHECKPOINTED"):
            self.stats.ended[kind] = self.stats.ended.get(kind, 0) + 1
        if not t["lead"]:  # a gang's other nodes run their share; the first node reports
            if mark:
                runner.d.mark_reported(mark)
            return
        ts = int(time.time() * 1000)
        record = {
            "progress": runner.progress,
            **event,
            "event_id": f"{t['job_id']}:{kind}:{t['epoch']}"
            + (f":{ts}" if kind == "CHECKPOINTED" else ""),
            "ts": ts,
            "job_id": t["job_id"],
            "region": t["region"],
            "node_ids": t["node_ids"],
            "epoch": t["epoch"],
        }
        value = self.codec.encode("JobEvent", record, topic=JOBS_EVENTS)
        self._p.produce(
            JOBS_EVENTS,
            key=t["job_id"].encode(),
            value=value,
            partition=self.partition_of(t["region"]),
            on_delivery=None if mark is None else _marker(runner, mark),
        )
        log.info(
            "executor %s job_id=%s epoch=%d %s",
            kind,
            t["job_id"],
            t["epoch"],
            event.get("detail", ""),
        )

    def _send_log(self, record: dict[str, Any]) -> None:
        value = self.codec.encode("JobLog", record, topic=JOBS_LOGS)
        self._p.produce(JOBS_LOGS, key=record["job_id"].encode(), value=value)


def _receive(c: Any, wait_s: float, most: int = 500) -> list[Any]:
    """The records that have arrived, waiting up to `wait_s` only while none has: librdkafka's
    `consume(n, timeout)` returns early only once it has `n` records, so it held every
    placement for the rest of its timeout (25 ms on average at a 50 ms tick)."""
    records = c.consume(most, timeout=0)
    if records:
        return list(records)
    first = c.poll(wait_s)
    if first is None:
        return []
    return [first, *c.consume(most - 1, timeout=0)]


def _marker(runner: TaskRunner, mark: str) -> Any:
    def delivered(err: Any, _msg: Any) -> None:
        if err is None:
            runner.d.mark_reported(mark)
        else:
            log.warning("executor event not delivered job_id=%s: %s", runner.task["job_id"], err)

    return delivered


def _remember(cache: OrderedDict[str, Any], key: str, value: Any) -> None:
    cache[key] = value
    cache.move_to_end(key)
    if len(cache) > _CAP:
        cache.popitem(last=False)
