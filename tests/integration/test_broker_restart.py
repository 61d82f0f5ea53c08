"""The embedded broker restarted under a running worker, losing its `memory://` log.

The worker must notice (the broker's partitions now end before offsets it committed itself),
say so in its log and on /health/, recreate the topics, carry on with new submissions, and
never hand out GPUs that jobs placed before the loss still hold: the empty log says nothing is
running, the worker's memory says otherwise, and the worker trusts its memory.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import httpx
import pytest
from harness import (
    Running,
    TopicReader,
    final_decisions,
    overbooked,
    run_stack,
    submit_jobs,
    wait_for,
)

from agents import SimulatedFleet, TierPolicy, run_fleet
from agents.publisher import EventPublisher
from infra.broker import EmbeddedBroker
from infra.config import Config
from infra.topics import DECISIONS_PLACEMENT

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]

H100_EU = {"gpu_count": 8, "allowed_gpu_models": ["H100"], "allowed_regions": ["eu-west"],
           "expected_duration_s": 3600.0}  # fmt: skip


def _page(run: Running, page: str) -> dict[str, Any]:
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/{page}/"
    try:
        return httpx.get(url, timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}


def _health(run: Running) -> dict[str, Any]:
    return _page(run, "health")


def _telemetry_read(run: Running) -> int:
    return int(_page(run, "metrics").get("events", {}).get("telemetry", -1))


def _lane_applied(run: Running) -> dict[str, int]:
    """Per partition, the next NodeTelemetry offset the worker's telemetry lane will apply."""
    rows = _page(run, "consumer").get("telemetry_lane", {}).get("partitions", {})
    return {p: int(row["applied"]) for p, row in rows.items()}


def _outcomes(reader: TopicReader, job_id: str) -> list[str]:
    return [d["outcome"] for d in reader.poll(0.3) if d.get("job_id") == job_id]


def test_memory_broker_restart_is_detected_and_nothing_is_promised_twice(
    broker: EmbeddedBroker, config: Config
) -> None:
    config = dataclasses.replace(config, store=dataclasses.replace(config.store, enabled=False))
    with run_stack(config, stale_after_s=300.0) as run:
        assert wait_for(lambda: _health(run).get("ready") is True, 90), run.worker.log_tail()
        submit_jobs(run.config, [{"job_id": "before", **H100_EU}], 10)
        reader = TopicReader(run.config, DECISIONS_PLACEMENT)
        assert wait_for(lambda: _outcomes(reader, "before") == ["PLACED"], 60)
        before = list(reader.records)
        reader.close()
        assert wait_for(lambda: _health(run)["dependencies"]["broker"]["state"] == "ok", 10)

        # a log long enough that the new one, after the loss, stays below its offsets for the
        # rest of the test: 30 ticks of full snapshots from the 16 nodes (480 reports)
        burst = SimulatedFleet(run.fleet.spec, run.fleet.nodes, seed=5,
                               policy=TierPolicy(full_snapshot_s=1e-3))  # fmt: skip
        publisher, now_ms = EventPublisher(run.config), int(time.time() * 1000)
        floor = sum(_lane_applied(run).values())
        for k in range(30):
            publisher.publish_telemetry(burst.telemetry_tick(now_ms - (30 - k) * 1000))
        publisher.flush()
        assert wait_for(lambda: sum(_lane_applied(run).values()) >= floor + 480, 60)
        applied_before = _lane_applied(run)
        broker.stop()  # memory:// storage: every topic, record and commit is gone
        broker.start()
        assert wait_for(
            lambda: (
                _health(run).get("dependencies", {}).get("broker", {}).get("state")
                == "storage_lost"
            ),
            60,
        ), run.worker.log_tail()
        health = _health(run)
        assert health["live"] is True and "broker" in health["degraded"]
        assert "gpuflow.decisions.placement/1" in str(health["dependencies"]["broker"]) or any(
            "/" in p for p in health["dependencies"]["broker"]["partitions"]
        )
        log = run.worker.log_path.read_text(errors="replace")
        assert "BROKER LOST ITS LOG" in log and "refusing to rebuild" in log

        # the agents are restarted (their idempotent producers stop delivering after such a
        # loss, docs/reliability.md) and report into the new log; the telemetry lane (an
        # assigned consumer, not a group member: nothing else moves it off offsets the new
        # log does not have) reads that log from its start instead of waiting at its old
        # offsets until the new log passes them
        run.spawn(run_fleet, run.config, SimulatedFleet(run.fleet.spec, run.fleet.nodes, seed=4))
        read = _telemetry_read(run)
        assert wait_for(lambda: _telemetry_read(run) >= read + 16, 60), run.worker.log_tail()
        after = _lane_applied(run)
        assert sum(after.values()) < sum(applied_before.values()), (applied_before, after)
        assert _page(run, "consumer")["telemetry_lane"]["rewinds"] >= 1
        assert "reading it again from its start" in run.worker.log_path.read_text(errors="replace")

        # it carries on: new submissions are decided once the topics are back (the first
        # sends after the loss may fail while the worker's producer catches up)
        reader = TopicReader(run.config, DECISIONS_PLACEMENT)
        probes: list[str] = []

        def decided() -> bool:
            probes.append(f"probe-{len(probes)}")
            submit_jobs(run.config, [{"job_id": probes[-1], "gpu_count": 1}], 10)
            return bool(set(probes) & set(final_decisions(reader.poll(2.0))))

        assert wait_for(decided, 120, every_s=3.0), run.worker.log_tail()
        # the same GPUs again (only one H100 node in eu-west): must wait, not be placed on them
        submit_jobs(run.config, [{"job_id": "after", **H100_EU}], 10)
        assert wait_for(lambda: _outcomes(reader, "after") != [], 60)
        assert _outcomes(reader, "after") == ["QUEUED"], reader.records
        assert not overbooked(before + reader.records, [])
        reader.close()
        state = run.state()
        assert (
            state["held_jobs"] >= 2 and state["regions"]["eu-west"]["free_gpus"].get("H100", 0) == 0
        )
