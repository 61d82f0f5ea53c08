"""Micro-batched agents on the real broker (`streams.worker.batching`, `worker.batch_max`).

A burst of submissions is taken in batches by the router, and a burst of ends by the
lifecycle agent, whose one queue pass per region after its batch places the jobs that waited;
every job is decided once per epoch and no GPU is booked twice. With `batch_max = 1` the same
stack takes one event at a time and decides the same way.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest
from harness import (
    CODEC,
    Running,
    TopicReader,
    duplicated,
    final_decisions,
    logged_overbooking,
    run_stack,
    submit_jobs,
    wait_for,
)

from agents.jobgen import generate_jobs
from infra.config import Config
from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS

pytestmark = pytest.mark.integration


def _metrics(running: Running) -> dict[str, Any]:
    cfg = running.config.worker
    return dict(httpx.get(f"http://{cfg.web_host}:{cfg.web_port}/metrics/", timeout=10).json())


def _mean_batch(running: Running, agent: str) -> float:
    page = _metrics(running)
    return page["consumed"].get(agent, 0) / max(1, page["batches"].get(agent, 0))


def _finish(running: Running, placed: list[dict[str, Any]]) -> None:
    """Report every placed job FINISHED at once, as an executor would, on its region's
    partition."""
    p, partition_of = producer(running.config.kafka), running.config.kafka.partitioner()
    for d in placed:
        record = {
            "event_id": f"{d['job_id']}:FINISHED:{d.get('epoch') or 0}",
            "ts": int(time.time() * 1000),
            "job_id": d["job_id"],
            "region": d["region"],
            "type": "FINISHED",
            "node_ids": sorted({a["node_id"] for a in d["assignments"]}),
            "progress": 1.0,
            "epoch": int(d.get("epoch") or 0),
        }
        value = CODEC.encode("JobEvent", record)
        key, partition = d["job_id"].encode(), partition_of(d["region"])
        p.produce(JOBS_EVENTS, key=key, value=value, partition=partition)
    p.flush(10)


@pytest.mark.parametrize("batch_max", [64, 1])
def test_bursts_are_taken_in_batches_and_every_job_is_decided_once(
    config: Config, batch_max: int
) -> None:
    # no executor: placed jobs hold their GPUs until this test reports them finished
    with run_stack(config, executor=False, batch_max=batch_max) as running:
        regions = [r.name for r in running.fleet.spec.regions]
        jobs = generate_jobs(240, seed=11, regions=regions, prefix=f"batch-{uuid.uuid4().hex[:6]}")
        want = {j["job_id"] for j in jobs}
        decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
        events = TopicReader(running.config, JOBS_EVENTS)
        submit_jobs(running.config, jobs, rate_per_s=100_000)  # one burst

        def first_answers() -> set[str]:
            return {d["job_id"] for d in decisions.poll()}

        assert wait_for(lambda: want <= first_answers(), 120), running.worker.log_tail()
        router = _mean_batch(running, "router")
        placed = [d for d in decisions.records if d["outcome"] == "PLACED"]
        waiting = want - set(final_decisions(decisions.records))
        assert placed and waiting, "the burst should fill the fleet and leave jobs waiting"

        # the ends arrive together: the lifecycle's pass after its batch places the waiting
        _finish(running, placed)
        before = len(placed)
        assert wait_for(
            lambda: len([d for d in decisions.poll() if d["outcome"] == "PLACED"]) > before, 60
        ), f"no waiting job placed after the releases\n{running.worker.log_tail()}"
        lifecycle = _mean_batch(running, "lifecycle")

        assert duplicated(decisions.records) == {}, "a job was decided twice in one epoch"
        assert logged_overbooking(decisions, events) == []
        page = _metrics(running)
        assert page["faults"] == {}
        decisions.close()
        events.close()
    if batch_max == 1:
        assert router == 1.0 and lifecycle == 1.0
    else:  # the burst was waiting when the agents fetched it
        assert router > 1.5, f"router took {router:.2f} events per batch"
        assert lifecycle > 1.5, f"lifecycle took {lifecycle:.2f} events per batch"
