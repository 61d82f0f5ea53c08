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
from infra.kafka import consumer, producer
from infra.topics import JOBS_SUBMITTED
from schemas import SingleObjectCodec

CODEC = SingleObjectCodec()


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
    spec = demo_fleet()
    cfg = dataclasses.replace(
        config.with_regions(r.name for r in spec.regions),
        worker=dataclasses.replace(
            config.worker, web_port=free_port(), stale_after_s=30.0, **worker
        ),
    )
    fleet = SimulatedFleet(spec, generate_nodes(spec, 16, seed=3), seed=3)
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


def overbooked(decisions: list[dict[str, Any]], events: list[dict[str, Any]]) -> list[str]:
    """GPUs whose concurrent reservations exceed one whole GPU, from the logs alone.

    A placement (job, epoch) holds its GPUs from its decision's ts until that epoch's end
    event (FINISHED, FAILED or EVICTED) ts: the placer only reuses GPUs after it consumed that
    event, so later decisions are later in ts.
    """
    ends = {
        (e["job_id"], int(e.get("epoch") or 0)): e["ts"]
        for e in events
        if e.get("type") in ("FINISHED", "FAILED", "EVICTED")
    }
    spans: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    for d in decisions:
        if d.get("outcome") != "PLACED":
            continue
        end = ends.get((d["job_id"], int(d.get("epoch") or 0)), 2**62)
        for a in d["assignments"]:
            for gpu in a["gpu_indices"]:
                spans.setdefault((a["node_id"], gpu), []).append((d["ts"], end, a["gpu_milli"]))
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
