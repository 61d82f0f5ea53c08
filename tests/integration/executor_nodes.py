"""Executor nodes for tests and the bench: `gpuflow agent --execute --simulate` as real
processes (so they can be SIGKILLed), plus readers of the job events they report."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import CODEC, TopicReader, wait_for

from infra.config import Config
from infra.jobspec import job_record
from infra.kafka import producer
from infra.topics import JOBS_EVENTS, JOBS_SUBMITTED

__all__ = ["ExecutorNode", "ended", "events_of", "events_reader", "submit", "wait_event"]

ENDS = ("FINISHED", "FAILED", "EVICTED", "TIMEOUT", "CANCELLED")


class ExecutorNode:
    """One simulated node (`gpus` x `model` in `region`) whose executor runs real processes."""

    def __init__(
        self,
        config: Config,
        node_id: str,
        root: Path,
        *,
        region: str = "us-east",
        model: str = "L4",
        gpus: int = 4,
        grace_s: float = 5.0,
    ) -> None:
        self.config, self.node_id, self.root = config, node_id, root
        self.args = [
            sys.executable,
            "-m",
            "gpuflow",
            "agent",
            "--execute",
            "--simulate",
            "--node-id",
            node_id,
            "--region",
            region,
            "--gpu-model",
            model,
            "--gpus",
            str(gpus),
            "--hz",
            "2",
            "--data-dir",
            str(root / "data"),
            "--state-dir",
            str(root / node_id),
            "--checkpoint-root",
            str(root / "checkpoints"),
            "--grace",
            str(grace_s),
        ]
        self.log = root / f"{node_id}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        k = self.config.kafka
        return {
            **os.environ,
            "GPUFLOW_KAFKA_BOOTSTRAP_SERVERS": k.bootstrap_servers,
            "GPUFLOW_KAFKA_REGION_ORDER": k.region_order,
            "GPUFLOW_WORKER_APP_ID": self.config.worker.app_id,
        }

    def start(self) -> ExecutorNode:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, env=self.env(), stdout=out, stderr=out)
        return self

    def kill(self) -> None:
        """SIGKILL: the executor dies, the jobs it started do not."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""


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
