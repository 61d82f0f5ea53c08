"""`gpuflow up --execute`: local executor nodes beside the simulated fleet, and the example's
story: a training job starts on a local node; a non-preemptible job takes the other local GPU
for 15 s and an online-inference job preempts the example (the only job it may evict); the
example resumes from its checkpoint on the other node once that is free, and finishes; its log
is one `gpuflow logs` away."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import OFFSET_END, TopicPartition

from agents.execution.local import ExecutorNode
from agents.executor import ExecutorTwin
from infra.config import Config
from infra.jobspec import job_record
from infra.kafka import consumer, producer
from infra.topics import JOBS_EVENTS, JOBS_SUBMITTED
from schemas import make_codec

__all__ = ["EXAMPLE", "LOCAL_MODEL", "TwinBesideExecutors", "local_nodes", "run_story"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_counting.py"
LOCAL_MODEL = "L4"  # the local nodes' model; in us-east the demo fleet has none of its own


class TwinBesideExecutors(ExecutorTwin):
    """The executor twin, leaving the placements on the local executor nodes to them."""

    def __init__(self, config: Config, local: set[str], **kw: Any) -> None:
        super().__init__(config, **kw)
        self.local = local

    def _on_local_or_twin(self: ExecutorTwin, p: Any, decision: dict[str, Any]) -> None:
        nodes = {a["node_id"] for a in decision.get("assignments") or ()}
        if nodes and nodes <= getattr(self, "local", set()):
            if self.on_decision is not None:
                self.on_decision(decision)
            return
        ExecutorTwin._on_placement(self, p, decision)

    _HANDLERS = {**ExecutorTwin._HANDLERS, "PlacementDecision": _on_local_or_twin}


def local_nodes(config: Config, root: Path, region: str, n: int) -> list[ExecutorNode]:
    return [
        ExecutorNode(
            config, f"local-{i}", root, region=region, model=LOCAL_MODEL, gpus=1, grace_s=10.0
        )
        for i in range(n)
    ]


def _job(region: str, **spec: Any) -> dict[str, Any]:
    return job_record(
        {"gpu_count": 1, "allowed_regions": [region], "allowed_gpu_models": [LOCAL_MODEL], **spec}
    )


def _story_jobs(region: str, tag: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The example, the non-preemptible filler for the other GPU, the urgent preemptor."""
    example = _job(
        region,
        job_id=f"example-{tag}",
        tenant="research",
        priority_class="batch",
        kind="TRAINING",
        checkpoint_signal="USR1",
        command=[sys.executable, str(EXAMPLE), "--steps", "40", "--step-s", "0.5"],
    )
    filler = _job(
        region,
        job_id=f"filler-{tag}",
        tenant="research",
        priority_class="urgent-training",
        preemptible=False,
        command=["sleep", "15"],
    )
    urgent = _job(
        region,
        job_id=f"urgent-{tag}",
        tenant="serving",
        kind="INFERENCE",
        priority_class="online-inference",
        command=["sleep", "40"],
    )
    return example, filler, urgent


def local_gpus_known(pages: Sequence[str], region: str) -> int:
    """The local model's GPUs in `region` that the workers count (their `/state/` pages)."""
    known = 0
    for url in pages:
        try:
            regions = httpx.get(url, timeout=5).json()["regions"]
        except (httpx.HTTPError, ValueError, KeyError):
            continue
        known += int(regions.get(region, {}).get("total_gpus", {}).get(LOCAL_MODEL, 0))
    return known


def run_story(
    config: Config,
    region: str,
    say: Callable[[str], None],
    stop: threading.Event,
    *,
    pages: Sequence[str] = (),
    local_gpus: int = 0,
    wait_s: float = 60.0,
) -> None:
    """Once the workers (`pages`: their /state/ URLs) count the local nodes' GPUs, submit the
    example, then the jobs that preempt it; narrate its events. Submitted before, the example
    would be REJECTED: no L4 in the region yet."""
    deadline = time.monotonic() + wait_s
    while local_gpus_known(pages, region) < local_gpus and not stop.is_set():
        if time.monotonic() > deadline:
            say(f"example: the worker did not count the local {LOCAL_MODEL}s in {wait_s:.0f}s")
            break
        stop.wait(0.5)
    tag = uuid.uuid4().hex[:4]
    example, filler, urgent = _story_jobs(region, tag)
    codec = make_codec(config.kafka.schema_registry_url or None)
    c = consumer(config.kafka, f"gpuflow-up-story-{tag}")
    meta = c.list_topics(JOBS_EVENTS, timeout=10).topics[JOBS_EVENTS]
    c.assign([TopicPartition(JOBS_EVENTS, p, OFFSET_END) for p in meta.partitions])
    c.consume(1, timeout=0.5)
    p = producer(config.kafka)

    def send(job: dict[str, Any]) -> None:
        job["ts"] = int(time.time() * 1000)
        p.produce(
            JOBS_SUBMITTED,
            key=job["job_id"].encode(),
            value=codec.encode("JobSubmitted", job, topic=JOBS_SUBMITTED),
        )
        p.flush(10)

    send(example)
    say(f"example: submitted {example['job_id']} (examples/train_counting.py, 40 steps)")
    mine = {example["job_id"]: "example", filler["job_id"]: "filler", urgent["job_id"]: "urgent"}
    sent_rest = False
    try:
        while not stop.is_set():
            for msg in c.consume(100, timeout=0.2):
                key = msg.key()
                if msg.error() or key is None or key.decode() not in mine:
                    continue
                e = codec.decode(msg.value())[1]
                say(_line(mine[e["job_id"]], e))
                if (
                    e["job_id"] == example["job_id"]
                    and e["type"] == "CHECKPOINTED"
                    and not sent_rest
                ):
                    sent_rest = True
                    send(filler)
                    send(urgent)
                    say(
                        "example: submitted an urgent-training and an online-inference job "
                        "for the local GPUs"
                    )
                if e["job_id"] == example["job_id"] and e["type"] in ("FINISHED", "FAILED"):
                    say(f"example: read its log with `gpuflow logs {example['job_id']}`")
    finally:
        c.close()


def _line(name: str, e: dict[str, Any]) -> str:
    where = ",".join(e.get("node_ids") or [])
    extra = {
        "STARTED": f"pid {e.get('pid')}",
        "CHECKPOINTED": f"progress {e.get('progress', 0):.0%}",
        "EVICTED": f"kept {e.get('progress', 0):.0%} ({e.get('detail')})",
        "FINISHED": f"exit {e.get('exit_code')}",
        "FAILED": f"exit {e.get('exit_code')} {e.get('cause')} {e.get('detail')}",
    }.get(e["type"], e.get("detail") or "")
    return f"{name}: {e['type']} epoch {e['epoch']} on {where} {extra}"
