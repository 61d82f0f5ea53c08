"""Two workers split the regions; each router still places jobs in regions the other owns."""

from __future__ import annotations

import dataclasses
import threading
import uuid
from typing import Any

import httpx
import pytest
from harness import TopicReader, final_decisions, submit_jobs, wait_for

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin
from gpuflow.stack import WorkerProcess
from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, load_config
from infra.kafka import ensure_topics
from infra.topics import DECISIONS_PLACEMENT

pytestmark = pytest.mark.integration


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


def test_routers_see_regions_owned_by_the_other_worker(broker: EmbeddedBroker, tmp_path) -> None:
    cfg = _config(broker, str(tmp_path))
    a, b = _with_port(cfg, "a"), _with_port(cfg, "b")
    spec = demo_fleet()
    fleet = SimulatedFleet(spec, generate_nodes(spec, 40, seed=2), seed=2)
    stop = threading.Event()
    threads = [
        threading.Thread(target=run_fleet, args=(cfg, fleet), kwargs={"stop": stop}),
        threading.Thread(target=ExecutorTwin(cfg).run, args=(stop,)),
    ]
    workers = [WorkerProcess(a, name="a").start(), WorkerProcess(b, name="b").start()]
    for t in threads:
        t.start()
    try:
        everything = {r.name for r in spec.regions}

        def split() -> bool:
            ra, rb = _regions(a), _regions(b)
            return ra | rb == everything and not ra & rb and bool(ra) and bool(rb)

        assert wait_for(split, 90), (_regions(a), _regions(b), workers[0].log_tail())
        regions = sorted(everything)
        jobs: list[dict[str, Any]] = [
            {"job_id": f"two-{i}", "gpu_count": 1, "allowed_regions": [regions[i % 4]]}
            for i in range(40)
        ]
        decisions = TopicReader(cfg, DECISIONS_PLACEMENT)
        submit_jobs(cfg, jobs, rate_per_s=20)
        want = {j["job_id"] for j in jobs}
        assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 60)
        finals = final_decisions(decisions.records)
        for job in jobs:
            [decision] = finals[job["job_id"]]
            assert decision["outcome"] == "PLACED", decision["reasons"]
            assert decision["region"] == job["allowed_regions"][0]
        decisions.close()
    finally:
        stop.set()
        for t in threads:
            t.join(15)
        for w in workers:
            w.stop()
