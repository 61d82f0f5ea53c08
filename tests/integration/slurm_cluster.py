"""Slurm test bed: real Slurm clusters on this host (agents.slurm.local), a gpuflow worker on
the test broker, and Slurm bridges as `gpuflow slurm-bridge` processes, all stopped by pid."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness import CODEC, TopicReader, wait_for

from agents.slurm.commands import parse_records
from agents.slurm.local import LocalSlurm, slurm_installed
from gpuflow.stack import WorkerProcess
from infra.broker import free_port
from infra.config import Config, config_env
from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, JOBS_SUBMITTED

__all__ = [
    "REGION",
    "Bridge",
    "close_readers",
    "needs_slurm",
    "readers",
    "slurm_cluster",
    "slurm_config",
    "slurm_tags",
    "submit",
    "worker",
]

MISSING = slurm_installed()
REGION = "slurm-a"
_OPEN: list[TopicReader] = []  # readers the running test opened; closed after it


def needs_slurm() -> None:
    """Not a skip: on a box without Slurm these tests fail and say what to install."""
    if MISSING:
        pytest.fail(
            f"Slurm is not installed ({MISSING} missing): apt-get install slurmctld "
            "slurmd slurm-client munge (.ci/run does it)"
        )


@contextlib.contextmanager
def slurm_cluster(root: Path, **kwargs: Any) -> Iterator[LocalSlurm]:
    cluster = LocalSlurm(root, **kwargs).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def slurm_config(config: Config, regions: list[str], **worker: Any) -> Config:
    cfg = config.with_regions(regions)
    return dataclasses.replace(
        cfg,
        worker=dataclasses.replace(cfg.worker, web_port=free_port(), stale_after_s=30.0, **worker),
        slurm=dataclasses.replace(
            cfg.slurm, poll_s=0.5, heartbeat_s=2.0, start_timeout_s=20.0, grace_s=5.0
        ),
    )


@contextlib.contextmanager
def worker(config: Config) -> Iterator[WorkerProcess]:
    w = WorkerProcess(config).start()
    try:
        yield w
    finally:
        w.stop()


@dataclass
class Bridge:
    """One `gpuflow slurm-bridge` process for `cluster` as `region`."""

    config: Config
    region: str
    cluster: LocalSlurm
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Bridge:
        env = {
            **os.environ,
            **config_env(self.config),
            "PYTHONUNBUFFERED": "1",
            "GPUFLOW_SLURM_SLURM_CONF": str(self.cluster.conf),
        }
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gpuflow", "slurm-bridge", "--region", self.region],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


@contextlib.contextmanager
def bridge(config: Config, region: str, cluster: LocalSlurm, log: Path) -> Iterator[Bridge]:
    b = Bridge(config, region, cluster, log).start()
    try:
        yield b
    finally:
        b.stop()


def submit(config: Config, job: dict[str, Any]) -> None:
    p = producer(config.kafka)
    record = {**job, "event_id": str(uuid.uuid4()), "ts": int(time.time() * 1000)}
    p.produce(
        JOBS_SUBMITTED, key=job["job_id"].encode(), value=CODEC.encode("JobSubmitted", record)
    )
    p.flush(10)


def preempt(
    config: Config, job_id: str, epoch: int, region: str, cause: str, grace_s: float
) -> None:
    """A PreemptionDecision as the worker would write it (cause CANCEL: a tenant's cancel)."""
    record = {
        "event_id": f"test:{job_id}:{cause}:{epoch}",
        "ts": int(time.time() * 1000),
        "job_id": job_id,
        "for_job_id": "",
        "region": region,
        "victim_assignments": [],
        "checkpoint_first": cause != "CANCEL",
        "victim_priority": 0,
        "reason": "test",
        "victim_epoch": epoch,
        "cause": cause,
        "grace_period_s": grace_s,
    }
    _decide(config, DECISIONS_PREEMPTION, "PreemptionDecision", record, region)


def events_of(records: list[dict[str, Any]], job_id: str) -> list[str]:
    return [r["type"] for r in records if r.get("job_id") == job_id]


def until(predicate: Any, timeout_s: float, what: str, *logs: Any) -> None:
    if not wait_for(predicate, timeout_s):
        tails = "\n".join(x.log_tail() for x in logs)
        raise AssertionError(f"{what} not within {timeout_s}s\n{tails}")


def place(
    config: Config, job_id: str, region: str, nodes: dict[str, list[int]], epoch: int = 0
) -> None:
    """A PLACED decision as the worker would write it."""
    record = {
        "event_id": f"test:{job_id}:{epoch}",
        "ts": int(time.time() * 1000),
        "job_id": job_id,
        "outcome": "PLACED",
        "region": region,
        "epoch": epoch,
        "gpu_count": sum(map(len, nodes.values())),
        "expected_duration_s": 5.0,
        "assignments": [{"node_id": n, "gpu_indices": i} for n, i in nodes.items()],
    }
    _decide(config, DECISIONS_PLACEMENT, "PlacementDecision", record, region)


def _decide(config: Config, topic: str, name: str, record: dict[str, Any], region: str) -> None:
    """A decision on the partition the worker writes `region`'s decisions to."""
    p = producer(config.kafka)
    p.produce(
        topic,
        key=record["job_id"].encode(),
        partition=config.kafka.partitioner()(region),
        value=CODEC.encode(name, record),
    )
    p.flush(10)


def free_gpus(config: Config, region: str) -> float | None:
    """The worker's free whole GPUs in `region` (its /metrics/ gauge), None if not shown."""
    import re

    import httpx

    w = config.worker
    try:
        text = httpx.get(f"http://{w.web_host}:{w.web_port}/metrics", timeout=5).text
    except httpx.HTTPError:
        return None
    found = re.findall(
        rf'^gpuflow_free_gpus{{[^}}]*region="{re.escape(region)}"[^}}]*}} (\S+)$', text, re.M
    )
    return sum(float(x) for x in found) if found else None


def readers(cfg: Config, *topics: str) -> list[TopicReader]:
    """One reader a topic, closed by `close_readers` when the test ends."""
    out = [TopicReader(cfg, t) for t in topics]
    _OPEN.extend(out)
    return out


def close_readers() -> None:
    while _OPEN:
        _OPEN.pop().close()


def slurm_tags(cluster: LocalSlurm) -> list[str]:
    """The gpuflow tags (`gpuflow:JOB:EPOCH`) of every job the cluster knows."""
    text = cluster.scontrol("show", "job", "-o")
    return [
        r["JobName"] for r in parse_records(text) if r.get("JobName", "").startswith("gpuflow:")
    ]
