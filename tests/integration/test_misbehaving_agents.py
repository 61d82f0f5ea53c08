"""Agents and executors that misbehave, on the real broker and worker: a node that reconnects
with a different inventory, a burst of stale telemetry, a node that goes silent, and an
executor reporting events for unknown jobs, twice, or a finish before a start. The worker
keeps every reservation, promises no GPU twice, and goes on deciding."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from harness import CODEC, Running, TopicReader, overbooked, run_stack, submit_jobs, wait_for

from agents import demo_fleet, generate_nodes
from infra.config import Config
from infra.kafka import producer
from infra.topics import (
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    JOBS_EVENTS,
    NODE_INVENTORY,
    NODE_TELEMETRY,
)

pytestmark = pytest.mark.integration

NODE = "eu-west-h100x8-00000"  # the only H100 node of eu-west in the harness fleet
H100_EU = {"allowed_gpu_models": ["H100"], "allowed_regions": ["eu-west"],
           "expected_duration_s": 3600.0}  # fmt: skip


def _send(run: Running, topic: str, event: str, key: str, records: list[dict[str, Any]]) -> None:
    p = producer(run.config.kafka)
    part = run.config.kafka.partitioner()("eu-west")
    for record in records:
        p.produce(topic, CODEC.encode(event, record), key.encode(), partition=part)
    p.flush(10)


def _inventory(gpus: int, ts: int) -> dict[str, Any]:
    spec = demo_fleet()
    record = next(n for n in generate_nodes(spec, 16, seed=3) if n["node_id"] == NODE)
    return {**record, "event_id": f"inv:{NODE}:{ts}", "ts": ts, "gpu_count": gpus,
            "nvlink_islands": [list(range(gpus))]}  # fmt: skip


def _state(run: Running) -> dict[str, Any]:
    try:
        return run.state()
    except httpx.HTTPError:  # not serving yet
        return {}


def _h100(run: Running) -> tuple[int, int]:
    view = _state(run).get("regions", {}).get("eu-west", {"free_gpus": {}, "total_gpus": {}})
    return view["free_gpus"].get("H100", 0), view["total_gpus"].get("H100", 0)


def _outcomes(reader: TopicReader, job_id: str) -> list[str]:
    return [d["outcome"] for d in reader.poll(0.3) if d.get("job_id") == job_id]


def _metrics(run: Running) -> dict[str, Any]:
    url = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}/metrics/"
    return httpx.get(url, timeout=5).json()


def test_agents_and_executors_misbehaving(config: Config) -> None:
    with run_stack(config, executor=False, stale_after_s=15.0) as run:
        assert wait_for(lambda: _state(run).get("ready") and _h100(run) == (8, 8), 90)
        decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
        submit_jobs(run.config, [{"job_id": "held", "gpu_count": 4, **H100_EU}], 10)
        assert wait_for(lambda: _outcomes(decisions, "held") == ["PLACED"], 60)
        assert _h100(run) == (4, 8)

        # the node reconnects with 2 GPUs: "held" keeps GPUs it no longer sees, and is reported
        now = int(time.time() * 1000)
        _send(run, NODE_INVENTORY, "NodeInventory", NODE, [_inventory(2, now)])
        migrations = TopicReader(run.config, DECISIONS_MIGRATION)
        assert wait_for(lambda: any(m.get("job_id") == "held" for m in migrations.poll(0.3)), 30), (
            run.worker.log_tail()
        )
        submit_jobs(run.config, [{"job_id": "squeezed", "gpu_count": 2, **H100_EU}], 10)
        # GPUs 0-1 exist but "held" has them: it waits
        assert wait_for(lambda: _outcomes(decisions, "squeezed") == ["QUEUED"], 30)
        # an older inventory arriving late changes nothing
        _send(run, NODE_INVENTORY, "NodeInventory", NODE, [_inventory(8, now - 60_000)])
        # it comes back with 8: "held" still holds its 4; the other 4 are free again
        _send(run, NODE_INVENTORY, "NodeInventory", NODE, [_inventory(8, now + 1)])
        assert wait_for(lambda: _h100(run)[1] == 8, 30)
        assert wait_for(lambda: _outcomes(decisions, "squeezed") == ["QUEUED", "PLACED"], 30)
        assert _h100(run)[0] == 8 - 4 - 2  # on GPUs 4-7, beside "held"

        # a burst of stale telemetry calling every GPU sick changes nothing either
        sick = [{"index": i, "healthy": False, "util_pct": 0.0, "perf_factor": 1.0}
                for i in range(8)]  # fmt: skip
        stale = [{"event_id": f"old-{i}", "ts": now - 600_000 + i, "node_id": NODE,
                  "region": "eu-west", "gpus": sick, "full_snapshot": True,
                  "node_healthy": False} for i in range(50)]  # fmt: skip
        free_before = _h100(run)[0]
        _send(run, NODE_TELEMETRY, "NodeTelemetry", NODE, stale)
        assert wait_for(lambda: _metrics(run)["ignored"].get("telemetry_out_of_order", 0) >= 50, 30)
        assert _h100(run)[0] == free_before and NODE not in run.state()["stale_nodes"]

        # the executor: events for a job nobody placed, twice, and a finish before a start
        ghost = [{"event_id": f"ghost-{i}", "ts": now, "job_id": "never-placed",
                  "region": "eu-west", "type": kind, "node_ids": [NODE], "progress": 1.0}
                 for i, kind in enumerate(["FINISHED", "FINISHED", "STARTED"])]  # fmt: skip
        twice = [{"event_id": f"held-{i}", "ts": now, "job_id": "held", "region": "eu-west",
                  "type": kind, "node_ids": [NODE], "progress": 1.0}
                 for i, kind in enumerate(["FINISHED", "FINISHED", "STARTED"])]  # fmt: skip
        _send(run, JOBS_EVENTS, "JobEvent", "held", ghost + twice)
        free_now = free_before + 4  # "held"'s four GPUs, freed once
        assert wait_for(lambda: _h100(run)[0] == free_now, 30), (_h100(run), free_now)
        time.sleep(2)
        assert _h100(run) == (free_now, 8)  # not freed twice, nothing freed for the ghost

        # a node that goes silent becomes stale, and takes no more work
        other = "eu-west-l40sx4-00000"
        assert other not in run.state()["stale_nodes"]
        run.stop.set()  # the fleet stops reporting
        assert wait_for(lambda: other in run.state()["stale_nodes"], 45)
        assert run.worker.alive()
        assert _metrics(run)["faults"] == {}
        assert not overbooked(
            decisions.poll(1.0), [e for e in twice if e["type"] == "FINISHED"][:1]
        )
        decisions.close()
        migrations.close()
