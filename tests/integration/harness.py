"""Test harness: a running worker on the real broker, a simulated fleet, topic readers, checks."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin
from gpuflow.stack import WorkerProcess
from infra.broker import free_port
from infra.config import Config
from infra.kafka import consumer, end_offsets, producer
from infra.topics import DECISIONS_MIGRATION, JOBS_SUBMITTED
from schemas import SingleObjectCodec
from streams.scheduler.overbooking import overbooked

CODEC = SingleObjectCodec()

__all__ = ["CODEC", "Running", "TopicReader", "check_once_and_not_overbooked", "duplicated",
           "final_decisions", "overbooked", "run_stack", "running", "start_running",
           "submit_jobs", "wait_for"]  # fmt: skip


@dataclass
class Running:
    """A worker process plus the background threads feeding it."""

    config: Config
    worker: WorkerProcess
    fleet: SimulatedFleet
    stop: threading.Event = field(default_factory=threading.Event)
    threads: list[threading.Thread] = field(default_factory=list)

    def spawn(self, target: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        thread = threading.Thread(
            target=target, args=args, kwargs={**kwargs, "stop": self.stop}, daemon=True
        )
        thread.start()
        self.threads.append(thread)

    def restart_worker(self) -> None:
        self.worker = WorkerProcess(self.config, name=f"worker-{uuid.uuid4().hex[:6]}").start()

    def state(self) -> dict[str, Any]:
        url = f"http://{self.config.worker.web_host}:{self.config.worker.web_port}/state/"
        return httpx.get(url, timeout=5).json()


@contextlib.contextmanager
def start_running(
    config: Config, *, checkpoint_s: float = 1.0, executor: bool = True, **worker: Any
) -> Iterator[Running]:
    """Worker + 1 Hz fleet (16 nodes over the demo fleet's 4 regions) + executor twin.

    The regions are pinned one to a partition, as `gpuflow up` does; `worker` overrides
    worker settings (e.g. `policy_file`); `checkpoint_s`: the executor's on-demand checkpoint;
    without `executor`, placed jobs hold their GPUs and nothing reports back.
    """
    with run_stack(config, checkpoint_s=checkpoint_s, executor=executor, **worker) as run:
        yield run


@contextlib.contextmanager
def run_stack(
    config: Config,
    *,
    nodes: int = 16,
    executor: bool = True,
    stale_after_s: float = 30.0,
    checkpoint_s: float = 1.0,
    **worker: Any,
) -> Iterator[Running]:
    """What the `running` fixture runs, for tests that change the config first (`worker`:
    worker settings to override)."""
    spec = demo_fleet()
    cfg = dataclasses.replace(
        config.with_regions(r.name for r in spec.regions),
        worker=dataclasses.replace(
            config.worker, web_port=free_port(), stale_after_s=stale_after_s, **worker
        ),
    )
    fleet = SimulatedFleet(spec, generate_nodes(spec, nodes, seed=3), seed=3)
    run = Running(cfg, WorkerProcess(cfg).start(), fleet)
    run.spawn(run_fleet, cfg, fleet)
    if executor:
        run.spawn(ExecutorTwin(cfg, time_scale=1.0, checkpoint_s=checkpoint_s).run)
    try:
        yield run
    finally:
        run.stop.set()
        for thread in run.threads:
            thread.join(15)
        run.worker.stop()


@pytest.fixture
def running(config: Config) -> Iterator[Running]:
    """The default `start_running` stack."""
    with start_running(config) as run:
        yield run


def submit_jobs(config: Config, jobs: list[dict[str, Any]], rate_per_s: float) -> None:
    p = producer(config.kafka)
    started = time.monotonic()
    for i, job in enumerate(jobs):
        record = {**job, "event_id": str(uuid.uuid4()), "ts": int(time.time() * 1000)}
        p.produce(
            JOBS_SUBMITTED, key=job["job_id"].encode(), value=CODEC.encode("JobSubmitted", record)
        )
        p.poll(0)
        if (wait := started + (i + 1) / rate_per_s - time.monotonic()) > 0:
            time.sleep(wait)
    p.flush(10)


class TopicReader:
    """Reads a whole topic from the beginning, then keeps up with it."""

    def __init__(self, config: Config, topic: str) -> None:
        self.topic = topic
        self.config = config
        self.kafka = config.kafka
        self.records: list[dict[str, Any]] = []
        self.raw: list[Any] = []
        self._c = consumer(config.kafka, group_id=f"test-{uuid.uuid4().hex[:8]}")
        meta = self._c.list_topics(topic, timeout=10).topics[topic]
        self._c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in meta.partitions])

    def poll(self, seconds: float = 0.5) -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in self._c.consume(1000, timeout=0.1):
                if msg.error():
                    continue
                self.raw.append(msg)
                try:
                    self.records.append(CODEC.decode(msg.value())[1])
                except Exception:
                    self.records.append({"_undecodable": msg.value()})
        return self.records

    def read_to_end(self, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Everything written to the topic up to now (its true ends), however long it takes.

        Judging from logs needs a cut that is consistent: read the decisions first, then the
        job events; every release a decision relied on was written before that decision, so
        it is inside the later cut (a fixed poll time can stop short of it under load).
        """
        ends = end_offsets(self.kafka, self.topic)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in self._c.position(
                [TopicPartition(self.topic, p) for p in ends])}  # fmt: skip
            if all(positions.get(p, -1) >= end for p, end in ends.items() if end > 0):
                return self.records
            self.poll(0.2)
        raise AssertionError(f"{self.topic}: not read to its ends {ends} in {timeout_s}s")

    def close(self) -> None:
        self._c.close()


def wait_for(predicate: Callable[[], bool], timeout_s: float, every_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(every_s)
    return predicate()


def final_decisions(decisions: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """job_id -> every final (PLACED/REJECTED) decision seen for it, all epochs."""
    out: dict[str, list[dict[str, Any]]] = {}
    for d in decisions:
        if d.get("outcome") in ("PLACED", "REJECTED"):
            out.setdefault(d["job_id"], []).append(d)
    return out


def duplicated(decisions: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """(job_id, epoch) decided more than once: a job is decided once per placement epoch."""
    seen: dict[tuple[str, int], int] = {}
    for d in decisions:
        if d.get("outcome") in ("PLACED", "REJECTED"):
            key = (d["job_id"], int(d.get("epoch") or 0))
            seen[key] = seen.get(key, 0) + 1
    return {k: n for k, n in seen.items() if n > 1}


def check_once_and_not_overbooked(decisions: TopicReader, events: TopicReader) -> set[str]:
    """No job has two final decisions for one epoch, every placed job finishes, no GPU was
    booked twice (from the logs alone); the placed job ids."""
    decisions.poll(3.0)  # a late duplicate would arrive by now
    finals: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for job_id, found in final_decisions(decisions.records).items():
        for d in found:  # once per placement epoch (an evicted job is placed again)
            finals.setdefault((job_id, int(d.get("epoch") or 0)), []).append(d)
    twice = {
        k: [(d["outcome"], d.get("region"), d["attempt"], d["ts"]) for d in v]
        for k, v in finals.items()
        if len(v) > 1
    }
    assert twice == {}, f"jobs decided twice: {twice}"
    placed = {d["job_id"] for d in decisions.records if d.get("outcome") == "PLACED"}
    finished = lambda: {e["job_id"] for e in events.poll() if e["type"] == "FINISHED"}  # noqa: E731
    assert wait_for(lambda: placed <= finished(), 90)
    assert logged_overbooking(decisions, events) == []
    return placed


def logged_overbooking(decisions: TopicReader, events: TopicReader) -> list[str]:
    """GPUs booked twice, judged from the logs alone at a consistent cut: the placement
    decisions first, then the migrations, then the job events (every release or MIGRATED report
    a decision relied on was written before it, so it is inside the later cuts)."""
    decisions.read_to_end()
    moves = TopicReader(decisions.config, DECISIONS_MIGRATION)
    try:
        moved = moves.read_to_end()
    finally:
        moves.close()
    return overbooked(decisions.records, events.read_to_end(), moved)
