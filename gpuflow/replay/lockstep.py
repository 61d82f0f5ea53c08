"""The stream engines' line to the embedded broker and one real worker on the event clock.

Both stream engines (jobs: `gpuflow.replay.stream`, services: `gpuflow.replay.service_worker`)
send the worker an input, wait until its `/state/` counts the input handled (the agent's
`handled` count, or `job_events`), and then read back exactly the decisions it `sent` meanwhile,
per topic in partition order. This class owns the broker, the worker and that exchange.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from gpuflow.stack import Stack, WorkerProcess, wait_until
from infra.config import load_config
from infra.errors import InfraError
from infra.kafka import consumer, producer
from infra.topics import NODE_INVENTORY
from schemas import SingleObjectCodec

__all__ = ["ANSWER_TIMEOUT_S", "Decisions", "LockstepWorker", "count", "delta"]

ANSWER_TIMEOUT_S = 30.0
Decisions = dict[str, list[dict[str, Any]]]  # topic -> records, in the order sent
# settings every lockstep worker runs with: no view cache, no stale nodes, any free port
_WORKER = {"view_ttl_s": 0.0, "stale_after_s": 1e9, "web_port": 0, "clock": "event"}


class LockstepWorker:
    """A broker and a worker (`worker(root)`: its settings, given the data directory) whose
    decisions on `read_topics` are read back; `close` stops both."""

    def __init__(
        self,
        worker: Callable[[Path], Mapping[str, Any]],
        read_topics: Sequence[str],
        *,
        name: str,
        group_id: str,
        data_dir: Path | None = None,
    ) -> None:
        self._tmp = None if data_dir else tempfile.TemporaryDirectory(prefix=f"gpuflow-{name}-")
        root = Path(data_dir or self._tmp.name)  # type: ignore[union-attr]
        cfg = load_config(
            env={},
            data_dir=str(root),
            store={"enabled": False},
            worker={**_WORKER, **worker(root)},
        )
        self.stack = Stack(cfg).start(worker=False)
        self.config = self.stack.config
        self.worker = WorkerProcess(self.config, name=name)
        self.codec = SingleObjectCodec()
        self.partition_of = self.config.kafka.partitioner()
        self.producer = producer(self.config.kafka)
        self.consumer = consumer(self.config.kafka, group_id=group_id)
        parts = range(self.config.kafka.partitions)
        self.consumer.assign(
            [TopicPartition(t, p, OFFSET_BEGINNING) for t in read_topics for p in parts]
        )
        self.unread: Decisions = {t: [] for t in read_topics}
        self.http = httpx.Client(timeout=ANSWER_TIMEOUT_S)
        self.base_url = f"http://{self.config.worker.web_host}:{self.config.worker.web_port}"

    def start_worker(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        """The inventory first (one partition: the worker learns the nodes in order), then the
        worker, until it is ready and counts every node's GPUs."""
        for record in nodes:
            self.produce(NODE_INVENTORY, "NodeInventory", record["node_id"], record, 0)
        self.producer.flush(10)
        self.worker.start()
        if not wait_until(lambda: self.state().get("ready") is True, 60, 0.1):
            raise InfraError(f"replay worker not ready:\n{self.worker.log_tail()}")
        total = sum(int(n["gpu_count"]) for n in nodes)
        if not wait_until(lambda: self._known_gpus() >= total, 60, 0.1):
            raise InfraError(f"replay worker did not learn the nodes:\n{self.worker.log_tail()}")

    def close(self) -> None:
        self.http.close()
        self.consumer.close()
        self.worker.stop()
        self.stack.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    # ---- the exchange ---------------------------------------------------------------------
    def produce(
        self, topic: str, event: str, key: str, record: Mapping[str, Any], partition: int | None
    ) -> None:
        value = self.codec.encode(event, dict(record))
        if partition is None:
            self.producer.produce(topic, key=key.encode(), value=value)
        else:
            self.producer.produce(topic, key=key.encode(), value=value, partition=partition)

    def state(self) -> dict[str, Any]:
        try:
            return dict(self.http.get(f"{self.base_url}/state/").json())
        except (httpx.HTTPError, ValueError):
            return {}

    def handled(
        self, before: Mapping[str, Any], waits: Mapping[str, int], what: str
    ) -> dict[str, Any]:
        """The worker's state once each counter (`count`) moved by its number since `before`."""
        after: dict[str, Any] = {}

        def done() -> bool:
            after.clear()
            after.update(self.state())
            return all(count(after, c) - count(before, c) >= n for c, n in waits.items())

        if not wait_until(done, ANSWER_TIMEOUT_S, 0.01):
            raise InfraError(f"worker did not handle the {what}:\n{self.worker.log_tail()}")
        return after

    def read(self, counts: Mapping[str, int]) -> Decisions:
        """Exactly `counts[topic]` more decisions of each topic, in the order sent."""
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

    def _known_gpus(self) -> int:
        regions = self.state().get("regions") or {}
        return sum(sum(r.get("total_gpus", {}).values()) for r in regions.values())


def count(state: Mapping[str, Any], counter: str) -> int:
    """A lockstep counter of /state/: `job_events` or `ticks`, or an agent's handled count."""
    if counter in ("job_events", "ticks"):
        return int(state.get(counter, 0))
    return int((state.get("handled") or {}).get(counter, 0))


def delta(
    before: Mapping[str, Any], after: Mapping[str, Any], topics: Sequence[str]
) -> dict[str, int]:
    """What the worker sent on each of `topics` between two of its states."""
    b, a = before.get("sent") or {}, after.get("sent") or {}
    return {t: int(a.get(t, 0)) - int(b.get(t, 0)) for t in topics}
