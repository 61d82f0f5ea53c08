"""Two workers split the regions; each router still places jobs in regions the other owns; when
one dies mid-stream the other takes its regions over and nothing is lost, repeated or overbooked.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import (
    CODEC,
    TopicReader,
    check_once_and_not_overbooked,
    final_decisions,
    submit_jobs,
    wait_for,
)

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin
from agents.jobgen import generate_jobs
from gpuflow.stack import WorkerProcess
from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, load_config
from infra.kafka import ensure_topics, producer
from infra.topics import DECISIONS_PLACEMENT, JOBS_CANCEL, JOBS_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def _config(broker: EmbeddedBroker, tmp: str) -> Config:
    # Two partitions: us-east and us-west hash to 0, eu-west and ap-southeast to 1.
    base = load_config(env={}, data_dir=tmp, kafka={"partitions": 2})
    cfg = base.with_bootstrap(broker.bootstrap_servers)
    worker = dataclasses.replace(cfg.worker, app_id=f"gpuflow-two-{uuid.uuid4().hex[:6]}")
    cfg = dataclasses.replace(
        cfg, worker=worker, store=dataclasses.replace(cfg.store, enabled=False)
    )
    ensure_topics(cfg.kafka)
    return cfg


def _with_port(cfg: Config, name: str) -> Config:
    return dataclasses.replace(
        cfg,
        data_dir=cfg.data_dir / name,
        worker=dataclasses.replace(cfg.worker, web_port=free_port()),
    )


def _regions(cfg: Config) -> set[str]:
    url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}/state/"
    try:
        return set(httpx.get(url, timeout=5).json()["regions"])
    except (httpx.HTTPError, ValueError, KeyError):
        return set()


@dataclass
class TwoWorkers:
    config: Config  # what the fleet, the executor twin and the test use
    a: Config
    b: Config
    workers: list[WorkerProcess]
    regions: list[str]


@contextlib.contextmanager
def _two_workers(broker: EmbeddedBroker, tmp_path: Path, seed: int) -> Iterator[TwoWorkers]:
    """Workers `a` and `b` on one app id, a 40-node demo fleet and the executor twin."""
    cfg = _config(broker, str(tmp_path))
    a, b = _with_port(cfg, "a"), _with_port(cfg, "b")
    spec = demo_fleet()
    fleet = SimulatedFleet(spec, generate_nodes(spec, 40, seed=seed), seed=seed)
    stop = threading.Event()
    threads = [
        threading.Thread(target=run_fleet, args=(cfg, fleet), kwargs={"stop": stop}),
        threading.Thread(target=ExecutorTwin(cfg).run, args=(stop,)),
    ]
    workers = [WorkerProcess(a, name="a").start(), WorkerProcess(b, name="b").start()]
    for t in threads:
        t.start()
    try:
        yield TwoWorkers(cfg, a, b, workers, sorted(r.name for r in spec.regions))
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        for w in workers:
            w.stop()


def test_routers_see_regions_owned_by_the_other_worker(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    with _two_workers(broker, tmp_path, seed=2) as two:
        a, b, everything = two.a, two.b, set(two.regions)

        def split() -> bool:
            ra, rb = _regions(a), _regions(b)
            return ra | rb == everything and not ra & rb and bool(ra) and bool(rb)

        assert wait_for(split, 90), (_regions(a), _regions(b), two.workers[0].log_tail())
        jobs: list[dict[str, Any]] = [
            {"job_id": f"two-{i}", "gpu_count": 1, "allowed_regions": [two.regions[i % 4]]}
            for i in range(40)
        ]
        decisions = TopicReader(two.config, DECISIONS_PLACEMENT)
        submit_jobs(two.config, jobs, rate_per_s=20)
        want = {j["job_id"] for j in jobs}
        assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 60)
        finals = final_decisions(decisions.records)
        for job in jobs:
            [decision] = finals[job["job_id"]]
            assert decision["outcome"] == "PLACED", decision["reasons"]
            assert decision["region"] == job["allowed_regions"][0]
        decisions.close()


def test_the_survivor_takes_over_a_killed_workers_regions(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    with _two_workers(broker, tmp_path, seed=4) as two:
        cfg, a, regions = two.config, two.a, two.regions
        survivor, victim = two.workers
        decisions = TopicReader(cfg, DECISIONS_PLACEMENT)
        events = TopicReader(cfg, JOBS_EVENTS)
        try:
            assert wait_for(lambda: _regions(a) and _regions(two.b), 90), survivor.log_tail()
            jobs = generate_jobs(200, seed=8, regions=regions, mean_duration_s=2.0, prefix="fail")
            for i, job in enumerate(jobs):
                job["allowed_regions"] = [regions[i % len(regions)]]
            sender = threading.Thread(target=submit_jobs, args=(cfg, jobs, 20.0))
            sender.start()
            assert wait_for(lambda: len(final_decisions(decisions.poll())) >= 50, 60)
            victim.kill()
            sender.join(60)

            want = {j["job_id"] for j in jobs}
            assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 120), (
                len(want - set(final_decisions(decisions.records))),
                survivor.log_tail(3000),
            )
            assert _regions(a) == set(regions)  # it holds every region now
            check_once_and_not_overbooked(decisions, events)
            url = f"http://{a.worker.web_host}:{a.worker.web_port}/health/"
            assert httpx.get(url, timeout=10).json()["live"] is True
        finally:
            decisions.close()
            events.close()


def test_a_cancel_read_by_the_other_worker_reaches_the_jobs_owner(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Each request is produced to the partition of the worker that does NOT own the job's
    region: only forwarding gets it to the owner, which stops the job (CANCELLED)."""
    with _two_workers(broker, tmp_path, seed=6) as two:
        cfg, regions = two.config, two.regions
        assert wait_for(lambda: _regions(two.a) and _regions(two.b), 90)
        jobs: list[dict[str, Any]] = [
            {"job_id": f"cx-{i}", "gpu_count": 1, "allowed_regions": [regions[i % 4]],
             "expected_duration_s": 3600.0}
            for i in range(8)
        ]  # fmt: skip
        decisions = TopicReader(cfg, DECISIONS_PLACEMENT)
        events = TopicReader(cfg, JOBS_EVENTS)
        try:
            submit_jobs(cfg, jobs, rate_per_s=20)
            want = {j["job_id"] for j in jobs}
            assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 60)
            partition_of = cfg.kafka.partitioner()
            p = producer(cfg.kafka)
            for job in jobs:
                other = 1 - partition_of(job["allowed_regions"][0])  # two partitions
                now = int(time.time() * 1000)
                request = {
                    "event_id": f"cancel:{job['job_id']}", "ts": now, "job_id": job["job_id"],
                    "tenant": "default", "reason": "test", "requested_by": "test",
                    "key_id": "", "signature": "",
                }  # fmt: skip
                value = CODEC.encode("CancelRequest", request, topic=JOBS_CANCEL)
                p.produce(JOBS_CANCEL, key=job["job_id"].encode(), value=value, partition=other)
            assert p.flush(10) == 0

            def cancelled() -> set[str]:
                return {e["job_id"] for e in events.poll() if e.get("type") == "CANCELLED"}

            assert wait_for(lambda: want <= cancelled(), 60), (
                want - cancelled(),
                two.workers[0].log_tail(2000),
                two.workers[1].log_tail(2000),
            )
        finally:
            decisions.close()
            events.close()
