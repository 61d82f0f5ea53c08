"""The stream engine: the same trace through the real embedded broker and a real Faust worker.

Virtual time advances in lockstep: inventory first (one partition, so the worker learns the
nodes in trace order, as the in-process engine does), then each event in order — a
JobSubmitted, or a JobEvent FINISHED on its region's partition — and the replay waits until
the worker has answered it before the next: a submission is answered by its first decision;
a finish by the worker's /state/ showing the release (held + queued jobs down by one), then by
as many PLACED decisions as its queue shrank. Other job events and timer ticks are not carried
by this engine yet (it raises), so a policy that re-plans runs in process only.
"""

from __future__ import annotations

import csv
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
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
    DECISIONS_PLACEMENT,
    JOBS_EVENTS,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
)
from schemas import SingleObjectCodec

__all__ = ["StreamDecider"]

ANSWER_TIMEOUT_S = 30.0


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
    def __init__(self, policy: str, trace: Trace, *, data_dir: Path | None = None) -> None:
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
                "policy": policy,
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
            [TopicPartition(DECISIONS_PLACEMENT, p, OFFSET_BEGINNING) for p in parts]
        )
        self.pending: list[dict[str, Any]] = []
        self.http = httpx.Client(timeout=5)
        self.url = f"http://{self.config.worker.web_host}:{self.config.worker.web_port}/state/"

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
        self._produce(JOBS_SUBMITTED, "JobSubmitted", record["job_id"], record, None)
        self.producer.flush(10)
        return self._read_until(lambda got: any(d["job_id"] == record["job_id"] for d in got))

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        if record["type"] != "FINISHED":
            raise InfraError(f"stream engine: FINISHED events only, not {record['type']}")
        job_id, region = record["job_id"], record["region"]
        before = self._state()
        held, queued = before["held_jobs"], before["queued_jobs"]
        event = {**record, "event_id": str(uuid.uuid4()), "node_ids": []}
        self._produce(JOBS_EVENTS, "JobEvent", job_id, event, self.partition_of(region))
        self.producer.flush(10)
        after: dict[str, Any] = {}

        def released() -> bool:
            after.update(self._state())
            return bool(after["held_jobs"] + after["queued_jobs"] == held + queued - 1)

        if not wait_until(released, ANSWER_TIMEOUT_S, 0.02):
            raise InfraError(f"worker did not release {job_id}:\n{self.worker.log_tail()}")
        placed = queued - after["queued_jobs"]
        return self._read_until(lambda got: sum(d["outcome"] == "PLACED" for d in got) >= placed)

    def tick(self, ts_ms: int) -> list[Decided]:
        raise InfraError("the stream engine does not carry timer ticks (replay with tick_s=None)")

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

    def _read_until(self, done: Any) -> list[Decided]:
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        got: list[dict[str, Any]] = []
        while not done(got):
            if time.monotonic() > deadline:
                raise InfraError(f"no answer from the worker:\n{self.worker.log_tail()}")
            for msg in self.consumer.consume(100, timeout=0.05):
                if not msg.error():
                    got.append(self.codec.decode(msg.value())[1])
        return [Decided(DECISIONS_PLACEMENT, d) for d in got]
