"""The service replay's line to the embedded broker and a real worker on the event clock.

What it sends, the worker handles before the replay goes on (lockstep, as the job replay's
stream engine): load reports until /state/ counts them handled, a look (POST /tick/) answered
with what the autoscaler sent, the replica and training submissions until the router (and the
placer, for the hops it sent on) handled them, cancels until the cancel agent did, and the
executor's reports until the lifecycle did. Then exactly the decisions sent meanwhile are read
back, per topic in partition order: placements, then preemptions, then scaling decisions.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from gpuflow.stack import Stack, WorkerProcess, wait_until
from infra.config import load_config
from infra.errors import InfraError
from infra.kafka import consumer, producer
from infra.topics import (
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_CANCEL,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    SERVICES_LOAD,
    SERVICES_SCALING,
    SERVICES_SPECS,
)
from schemas import SingleObjectCodec

__all__ = ["READ_TOPICS", "ServiceWorker"]

ANSWER_TIMEOUT_S = 30.0
READ_TOPICS = (DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, SERVICES_SCALING)
Decisions = dict[str, list[dict[str, Any]]]  # topic -> records, in the order sent


class ServiceWorker:
    """The broker and worker of one stream replay; `close` stops both."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix="gpuflow-svc-")
        root = Path(data_dir or self._tmp.name)  # type: ignore[union-attr]
        cfg = load_config(
            env={},
            data_dir=str(root),
            store={"enabled": False},
            worker={
                "view_ttl_s": 0.0,
                "stale_after_s": 1e9,
                "web_port": 0,
                "clock": "event",
                "autoscale_s": 0,  # the looks come as POST /tick/
            },
        )
        self.stack = Stack(cfg).start(worker=False)
        self.config = self.stack.config
        self.worker = WorkerProcess(self.config, name="service-replay-worker")
        self.codec = SingleObjectCodec()
        self.partition_of = self.config.kafka.partitioner()
        self.producer = producer(self.config.kafka)
        self.consumer = consumer(self.config.kafka, group_id="service-replay")
        parts = range(self.config.kafka.partitions)
        self.consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in READ_TOPICS for p in parts]
        )
        self.unread: Decisions = {t: [] for t in READ_TOPICS}
        self.http = httpx.Client(timeout=ANSWER_TIMEOUT_S)
        base = f"http://{self.config.worker.web_host}:{self.config.worker.web_port}"
        self.state_url, self.tick_url = f"{base}/state/", f"{base}/tick/"

    def start(self, nodes: Sequence[Mapping[str, Any]], specs: Sequence[Mapping[str, Any]]) -> None:
        """Inventory and service declarations first, then the worker, until it knows them."""
        for record in nodes:
            self._produce(NODE_INVENTORY, "NodeInventory", record["node_id"], record, 0)
        for record in specs:
            self._produce(SERVICES_SPECS, "ServiceSpec", record["name"], record, None)
        self.producer.flush(10)
        self.worker.start()
        if not wait_until(lambda: self.state().get("ready") is True, 60, 0.1):
            raise InfraError(f"replay worker not ready:\n{self.worker.log_tail()}")
        total = sum(int(n["gpu_count"]) for n in nodes)
        if not wait_until(lambda: self._known_gpus() >= total, 60, 0.1):
            raise InfraError(f"replay worker did not learn the nodes:\n{self.worker.log_tail()}")

    def loads(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Load reports, once the worker's autoscaler has heard them."""
        before = self.state()
        for record in records:
            self._produce(SERVICES_LOAD, "ServiceLoad", record["service"], record, None)
        self.producer.flush(10)
        self._handled(before, {"services.load": len(records)}, "load reports")

    def look(self, now_ms: int) -> Decisions:
        """One look of the autoscaler at `now_ms`, carried through to its decisions."""
        before = self.state()
        answer = self.http.post(self.tick_url, json={"ts": now_ms})
        if answer.status_code != 200:
            raise InfraError(f"worker refused the look at {now_ms}: {answer.text}")
        sent = answer.json().get("sent") or {}
        waits = {
            "router": int(sent.get(JOBS_SUBMITTED, 0)),
            "cancel": int(sent.get(JOBS_CANCEL, 0)),
        }
        return self._settle(before, waits, f"look at {now_ms}")

    def submit(self, records: Sequence[Mapping[str, Any]]) -> Decisions:
        before = self.state()
        for record in records:
            self._produce(JOBS_SUBMITTED, "JobSubmitted", record["job_id"], record, None)
        self.producer.flush(10)
        return self._settle(before, {"router": len(records)}, "submissions")

    def report(self, records: Sequence[Mapping[str, Any]]) -> Decisions:
        """JobEvents from the executor (EVICTED, CANCELLED, FINISHED)."""
        before = self.state()
        for record in records:
            part = self.partition_of(record["region"])
            self._produce(JOBS_EVENTS, "JobEvent", record["job_id"], record, part)
        self.producer.flush(10)
        return self._settle(before, {"job_events": len(records)}, "job events")

    def close(self) -> None:
        self.http.close()
        self.consumer.close()
        self.worker.stop()
        self.stack.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    # ---- lockstep -------------------------------------------------------------------------
    def _settle(self, before: Mapping[str, Any], waits: Mapping[str, int], what: str) -> Decisions:
        after = self._handled(before, waits, what)
        hops = _delta(before, after, (JOBS_ROUTED,))[JOBS_ROUTED]
        if hops:
            after = self._handled(before, {"placer": hops}, what)
        return self._read(_delta(before, after, READ_TOPICS))

    def _handled(
        self, before: Mapping[str, Any], waits: Mapping[str, int], what: str
    ) -> dict[str, Any]:
        """The worker's state once each counter moved by its count since `before`."""
        after: dict[str, Any] = {}

        def done() -> bool:
            after.clear()
            after.update(self.state())
            return all(_count(after, c) - _count(before, c) >= n for c, n in waits.items())

        if not wait_until(done, ANSWER_TIMEOUT_S, 0.01):
            raise InfraError(f"worker did not handle the {what}:\n{self.worker.log_tail()}")
        return after

    def _read(self, counts: Mapping[str, int]) -> Decisions:
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while any(len(self.unread[t]) < n for t, n in counts.items()):
            if time.monotonic() > deadline:
                raise InfraError(f"no answer from the worker:\n{self.worker.log_tail()}")
            for msg in self.consumer.consume(100, timeout=0.05):
                if not msg.error():
                    self.unread[str(msg.topic())].append(self.codec.decode(msg.value())[1])
        out: Decisions = {}
        for topic, n in counts.items():
            out[topic], self.unread[topic] = self.unread[topic][:n], self.unread[topic][n:]
        return out

    # ---- helpers ---------------------------------------------------------------------------
    def _produce(
        self, topic: str, event: str, key: str, record: Mapping[str, Any], partition: int | None
    ) -> None:
        value = self.codec.encode(event, dict(record))
        if partition is None:
            self.producer.produce(topic, key=key.encode(), value=value)
        else:
            self.producer.produce(topic, key=key.encode(), value=value, partition=partition)

    def state(self) -> dict[str, Any]:
        try:
            return dict(self.http.get(self.state_url).json())
        except (httpx.HTTPError, ValueError):
            return {}

    def _known_gpus(self) -> int:
        regions = self.state().get("regions") or {}
        return sum(sum(r.get("total_gpus", {}).values()) for r in regions.values())


def _count(state: Mapping[str, Any], counter: str) -> int:
    """A lockstep counter of /state/: `job_events`, or an agent's handled count."""
    if counter == "job_events":
        return int(state.get("job_events", 0))
    return int((state.get("handled") or {}).get(counter, 0))


def _delta(
    before: Mapping[str, Any], after: Mapping[str, Any], topics: Sequence[str]
) -> dict[str, int]:
    b, a = before.get("sent") or {}, after.get("sent") or {}
    return {t: int(a.get(t, 0)) - int(b.get(t, 0)) for t in topics}
