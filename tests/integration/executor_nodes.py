"""Executor nodes for tests and the bench: `gpuflow agent --execute --simulate` as real
processes (so they can be SIGKILLed), plus readers of the job events they report."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from harness import CODEC, Running, TopicReader, run_stack, wait_for

from agents.execution.local import ExecutorNode
from infra.config import Config
from infra.jobspec import job_record
from infra.kafka import producer
from infra.topics import JOBS_EVENTS, JOBS_SUBMITTED

__all__ = [
    "ExecutorNode", "ended", "events_of", "events_reader", "executor_stack", "free_l4", "submit",
    "wait_event", "wait_for_nodes",
]  # fmt: skip

ENDS = ("FINISHED", "FAILED", "EVICTED", "TIMEOUT", "CANCELLED")


@contextlib.contextmanager
def executor_stack(
    config: Config, root: Path, prefix: str, nodes: int = 2, **worker: Any
) -> Iterator[tuple[Running, list[ExecutorNode]]]:
    """Broker + worker + fleet with `nodes` real node executors (`gpuflow agent --execute
    --simulate`) instead of the twin; every executor is stopped by pid at the end."""
    with run_stack(config, executor=False, **worker) as run:
        started: list[ExecutorNode] = []
        try:
            for i in range(nodes):
                name = f"{prefix}-{i}-{uuid.uuid4().hex[:4]}"
                started.append(ExecutorNode(run.config, name, root).start())
            wait_for_nodes(run, started)
            yield run, started
        finally:
            for node in started:
                node.stop()


def free_l4(run: Running) -> float:
    """Free L4 GPUs in us-east as the worker counts them (-1 while its page is not up)."""
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/state/"
    try:
        regions = httpx.get(url, timeout=5).json()["regions"]
    except (httpx.HTTPError, ValueError):
        return -1.0
    return float(regions.get("us-east", {}).get("free_gpus", {}).get("L4", 0))


def wait_for_nodes(run: Running, nodes: list[ExecutorNode], timeout_s: float = 60.0) -> None:
    """Until the worker counts every node's GPUs: a job submitted before it knows them is
    REJECTED (no L4 in us-east), so a test that submits at once failed in most runs."""
    want = sum(n.gpus for n in nodes)
    assert wait_for(lambda: free_l4(run) >= want, timeout_s), (
        f"the worker never counted {want} free L4s: {free_l4(run)}"
    )


def submit(config: Config, **spec: Any) -> str:
    """Submit one job (validated as `gpuflow submit` would); its id."""
    record = job_record(
        {
            "allowed_regions": ["us-east"],
            "allowed_gpu_models": ["L4"],
            "tenant": "default",
            "gpu_count": 1,
            **spec,
        }
    )
    p = producer(config.kafka)
    p.produce(
        JOBS_SUBMITTED, key=record["job_id"].encode(), value=CODEC.encode("JobSubmitted", record)
    )
    p.flush(10)
    return str(record["job_id"])


def events_of(reader: TopicReader, job_id: str) -> list[dict[str, Any]]:
    return [e for e in reader.poll(0.2) if e.get("job_id") == job_id]


def ended(reader: TopicReader, job_id: str) -> list[dict[str, Any]]:
    return [e for e in events_of(reader, job_id) if e["type"] in ENDS]


def wait_event(
    reader: TopicReader, job_id: str, kind: str, timeout_s: float = 30.0, epoch: int | None = None
) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def seen() -> bool:
        found[:] = [
            e
            for e in events_of(reader, job_id)
            if e["type"] == kind and (epoch is None or e["epoch"] == epoch)
        ]
        return bool(found)

    assert wait_for(seen, timeout_s, every_s=0.1), (
        f"no {kind} for {job_id}: "
        f"{[(e['type'], e['epoch'], e.get('detail')) for e in events_of(reader, job_id)]}"
    )
    return found[0]


def events_reader(config: Config) -> TopicReader:
    return TopicReader(config, JOBS_EVENTS)
