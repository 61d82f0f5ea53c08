"""The stream engine: the same trace through the real embedded broker and a real Faust worker.

Virtual time advances in lockstep on the worker's event clock (`worker.clock = "event"`: its
time is the events' timestamps, and its timer runs only when asked): inventory first (one
partition, so the worker learns the nodes in trace order, as the in-process engine does), then
each event in order, and the replay waits until the worker has answered before the next:
- a JobSubmitted, once the worker's /state/ counts it handled by the router (and the placer the
  hops it sent on), by the decisions it sent meanwhile (its placement, a preemption it caused);
- a JobEvent (FINISHED, MIGRATED, EVICTED ...) on its region's partition, once the worker's
  /state/ counts it handled, by the decisions it sent meanwhile (its `sent` counters per topic);
- a timer tick is a POST /tick/ {"ts"}, answered with what the pass sent per topic.
Decisions come back placements first, then migrations, then preemptions, each in partition
order; the twin carries them all out (a preemption evicts its victim, as in-process).
"""

from __future__ import annotations

import csv
import json
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from agents.replay.trace import Trace
from gpuflow.replay.engine import Decided
from gpuflow.stack import Stack, WorkerProcess, wait_until
from infra.config import load_config
from infra.errors import InfraError
from infra.kafka import consumer, producer
from infra.topics import (
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    REPLAN_TICKS,
)
from schemas import SingleObjectCodec
from scorer import default_catalog

__all__ = ["StreamDecider"]

ANSWER_TIMEOUT_S = 30.0
# in the order answers are given: a preemption is carried out after the placements beside it
DECISION_TOPICS = (DECISIONS_PLACEMENT, DECISIONS_MIGRATION, DECISIONS_PREEMPTION)


def _write_table(trace: Trace, path: Path) -> str:
    """The trace's measured table in Gavel's format, for the worker's `throughput_csv`."""
    if trace.throughput is None:
        return ""
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["job_type", "gpu_type", "scale_factor", "consolidated", "steps_per_sec"])
        for (jt, model, scale, together), rate in trace.throughput.measured.items():
            out.writerow([jt, model, scale, int(together), repr(rate)])
    return str(path)


class StreamDecider:
    def __init__(
        self, policy: str, trace: Trace, *, data_dir: Path | None = None, try_once: bool = False
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="gpuflow-replay-")
        root = Path(data_dir or self._tmp.name)  # type: ignore[union-attr]
        cfg = load_config(
            env={},
            data_dir=str(root),
            store={"enabled": False},
            worker={
                "view_ttl_s": 0.0,
                "stale_after_s": 1e9,
                "web_port": 0,
                "throughput_csv": _write_table(trace, root / "throughputs.csv"),
                "catalog_file": _write_catalog(trace, root / "catalog.json"),
                "policy": policy,
                "clock": "event",
                "try_once": try_once,
            },
        )
        self.stack = Stack(cfg).start(worker=False)
        self.config = self.stack.config
        self.worker = WorkerProcess(self.config, name="replay-worker")
        self.codec = SingleObjectCodec()
        self.partitions = self.config.kafka.partitions
        self.partition_of = self.config.kafka.partitioner()
        self.producer = producer(self.config.kafka)
        self.consumer = consumer(self.config.kafka, group_id=f"replay-{uuid.uuid4().hex[:8]}")
        parts = range(self.partitions)
        self.consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in DECISION_TOPICS for p in parts]
        )
        self.unread: dict[str, list[dict[str, Any]]] = {t: [] for t in DECISION_TOPICS}
        self.http = httpx.Client(timeout=ANSWER_TIMEOUT_S)
        base = f"http://{self.config.worker.web_host}:{self.config.worker.web_port}"
        self.url = f"{base}/state/"
        self.regions = sorted({n.region for n in trace.nodes})

    # ---- Decider -------------------------------------------------------------------------
    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        for record in nodes:
            self._produce(NODE_INVENTORY, "NodeInventory", record["node_id"], record, 0)
        self.producer.flush(10)
        self.worker.start()
        if not wait_until(lambda: self._state().get("ready") is True, 60, 0.1):
            raise InfraError(f"replay worker not ready:\n{self.worker.log_tail()}")
        total = sum(int(n["gpu_count"]) for n in nodes)
        if not wait_until(lambda: self._known_gpus() >= total, 60, 0.1):
            raise InfraError(f"replay worker did not learn the nodes:\n{self.worker.log_tail()}")

    def submit(self, record: Mapping[str, Any]) -> list[Decided]:
        """Answered once the router handled it (and the placer the hops it sent on) by every
        decision sent meanwhile: its placement and what that caused (a preemption)."""
        before = self._state()
        self._produce(JOBS_SUBMITTED, "JobSubmitted", record["job_id"], record, None)
        self.producer.flush(10)
        what = f"submission of {record['job_id']}"
        after = self._handled(before, "router", 1, what)
        hops = _delta(before.get("sent", {}), after.get("sent", {}), (JOBS_ROUTED,))[JOBS_ROUTED]
        if hops:
            after = self._handled(before, "placer", hops, what)
        return self._read_counts(_delta(before.get("sent", {}), after.get("sent", {})))

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        job_id, region = record["job_id"], record["region"]
        before = self._state()
        self._produce(JOBS_EVENTS, "JobEvent", job_id, dict(record), self.partition_of(region))
        self.producer.flush(10)
        return self._answer(before, "job_events", 1, f"{record['type']} of {job_id}")

    def tick(self, ts_ms: int) -> list[Decided]:
        before = self._state()
        for region in self.regions:
            record = {"event_id": f"replay-tick-{region}-{ts_ms}", "ts": ts_ms, "region": region}
            self._produce(REPLAN_TICKS, "ReplanTick", region, record, self.partition_of(region))
        self.producer.flush(10)
        return self._answer(before, "ticks", len(self.regions), f"tick at {ts_ms}")

    def _answer(self, before: Mapping[str, Any], counter: str, n: int, what: str) -> list[Decided]:
        """Wait until the worker's `counter` moved by `n`, then read what it sent meanwhile."""
        after = self._wait(lambda s: int(s.get(counter, 0)) - int(before.get(counter, 0)), n, what)
        return self._read_counts(_delta(before.get("sent", {}), after.get("sent", {})))

    def _handled(self, before: Mapping[str, Any], agent: str, n: int, what: str) -> dict[str, Any]:
        """The worker's state once its `agent` handled `n` more events than in `before`."""
        done = int((before.get("handled") or {}).get(agent, 0))
        return self._wait(lambda s: int((s.get("handled") or {}).get(agent, 0)) - done, n, what)

    def _wait(self, moved: Callable[[Mapping[str, Any]], int], n: int, what: str) -> dict[str, Any]:
        after: dict[str, Any] = {}

        def handled() -> bool:
            after.clear()
            after.update(self._state())
            return moved(after) >= n

        if not wait_until(handled, ANSWER_TIMEOUT_S, 0.02):
            raise InfraError(f"worker did not handle the {what}:\n{self.worker.log_tail()}")
        return after

    def close(self) -> None:
        self.http.close()
        self.consumer.close()
        self.worker.stop()
        self.stack.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    # ---- helpers ---------------------------------------------------------------------------
    def _produce(
        self, topic: str, event: str, key: str, record: Mapping[str, Any], partition: int | None
    ) -> None:
        value = self.codec.encode(event, dict(record))
        if partition is None:
            self.producer.produce(topic, key=key.encode(), value=value)
        else:
            self.producer.produce(topic, key=key.encode(), value=value, partition=partition)

    def _state(self) -> dict[str, Any]:
        try:
            return dict(self.http.get(self.url).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def _known_gpus(self) -> int:
        regions = self._state().get("regions") or {}
        return sum(sum(r.get("total_gpus", {}).values()) for r in regions.values())

    def _read_counts(self, counts: Mapping[str, int]) -> list[Decided]:
        """Exactly `counts[topic]` decisions of each decision topic (placements first)."""
        want = {t: int(counts.get(t, 0)) for t in DECISION_TOPICS}
        self._read_until(lambda: all(len(self.unread[t]) >= n for t, n in want.items()))
        out: list[Decided] = []
        for topic in DECISION_TOPICS:
            taken, self.unread[topic] = (
                self.unread[topic][: want[topic]],
                self.unread[topic][want[topic] :],
            )
            out.extend(Decided(topic, d) for d in taken)
        return out

    def _read_until(self, done: Callable[[], bool]) -> None:
        """Consume decisions into `unread` until `done()`."""
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while not done():
            if time.monotonic() > deadline:
                raise InfraError(f"no answer from the worker:\n{self.worker.log_tail()}")
            for msg in self.consumer.consume(100, timeout=0.05):
                if not msg.error():
                    self.unread[str(msg.topic())].append(self.codec.decode(msg.value())[1])


def _delta(
    before: Mapping[str, int], after: Mapping[str, int], topics: Sequence[str] = DECISION_TOPICS
) -> dict[str, int]:
    return {t: int(after.get(t, 0)) - int(before.get(t, 0)) for t in topics}


def _write_catalog(trace: Trace, path: Path) -> str:
    """The trace's models the built-in catalogue lacks (opaque or from --catalog), as a
    catalogue file for the worker's `catalog_file`; empty when there are none."""
    base = default_catalog()
    extra = {
        spec.name: {k: v for k, v in asdict(spec).items() if k != "name"}
        for spec in trace.catalog
        if base.get(spec.name) != spec
    }
    if not extra:
        return ""
    path.write_text(json.dumps({"models": extra}))
    return str(path)
