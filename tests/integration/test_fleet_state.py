"""The telemetry processor's view equals what a 2,000-node fleet reports; silent nodes go stale.
Both ways in: the telemetry lane (batches beside Faust, the default) and the Faust agent."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
from harness import wait_for

from agents import Fault, SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from gpuflow.stack import WorkerProcess
from infra.broker import free_port
from infra.config import Config
from infra.kafka import committed_offsets, end_offsets
from infra.topics import NODE_TELEMETRY

pytestmark = pytest.mark.integration

STALE_AFTER_S = 6.0


def _state(cfg: Config) -> dict:
    import httpx

    url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}/state/"
    return httpx.get(url, timeout=5).json()


def _metrics(cfg: Config) -> dict:
    import httpx

    url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}/metrics/"
    return httpx.get(url, timeout=5).json()


@pytest.mark.parametrize("lane", [True, False], ids=["lane", "faust-agent"])
def test_free_capacity_matches_the_fleet_and_silent_nodes_go_stale(
    config: Config, lane: bool
) -> None:
    cfg = dataclasses.replace(
        config,
        worker=dataclasses.replace(
            config.worker, web_port=free_port(), stale_after_s=STALE_AFTER_S, telemetry_lane=lane
        ),
    )
    spec = demo_fleet()
    nodes = generate_nodes(spec, 2000, seed=5)
    fleet = SimulatedFleet(spec, nodes, seed=5)
    lost, silent = nodes[10], nodes[1500]
    stop = threading.Event()
    publisher = threading.Thread(
        target=run_fleet, args=(cfg, fleet), kwargs={"stop": stop}, daemon=True
    )
    worker = WorkerProcess(cfg).start()
    publisher.start()
    try:
        totals = fleet.region_gpu_totals()
        fleet.inject(Fault("gpu_lost", lost["node_id"], gpu=0))
        expected = dict(totals)
        expected[lost["region"]] -= 1

        def matches() -> bool:
            try:
                regions = _state(cfg)["regions"]
            except Exception:
                return False
            free = {r: sum(v["free_gpus"].values()) for r, v in regions.items()}
            return free == expected

        assert wait_for(matches, 60), (_state(cfg), expected, worker.log_tail())

        # the node's agent dies: no heartbeat, so it is unhealthy within stale_after_s
        fleet.inject(Fault("node_down", silent["node_id"]))
        killed = time.monotonic()
        expected[silent["region"]] -= silent["gpu_count"]
        assert wait_for(lambda: silent["node_id"] in _state(cfg)["stale_nodes"], 60)
        took = time.monotonic() - killed
        # the tracker checks once per summary interval, and a node's last report counts from
        # when the worker reads it: allow both on top of stale_after_s (on a loaded machine
        # the 2,000 nodes' telemetry is read seconds behind)
        lag_s = (_metrics(cfg)["telemetry_lag_ms"]["p99"] or 0.0) / 1000
        assert took <= STALE_AFTER_S + cfg.worker.summary_interval_s + 3 + lag_s, (took, lag_s)
        assert wait_for(matches, 10), (_state(cfg), expected)
        assert all(len(_state(cfg)["stale_nodes"]) == 1 for _ in range(3))
        # what was applied is committed, under the lane's own group or Faust's
        group = f"{cfg.worker.app_id}-telemetry" if lane else cfg.worker.app_id
        assert wait_for(lambda: sum(committed_offsets(cfg.kafka, group, NODE_TELEMETRY).values())
                        >= 2000, 30)  # fmt: skip
    finally:
        stop.set()
        publisher.join(15)
        worker.stop()


def test_a_fleet_that_re_announces_itself_adds_nothing_to_the_nodes_changelog(
    config: Config,
) -> None:
    """The agents re-send their inventory every minute (here every second); the worker's
    `nodes` table is written once per node, so its changelog, which the embedded broker keeps
    for ever, does not grow with uptime."""
    cfg = dataclasses.replace(
        config, worker=dataclasses.replace(config.worker, web_port=free_port())
    )
    spec = demo_fleet()
    fleet = SimulatedFleet(spec, generate_nodes(spec, 40, seed=11), seed=11)
    stop = threading.Event()
    publisher = threading.Thread(
        target=run_fleet, args=(cfg, fleet), kwargs={"stop": stop, "inventory_every_s": 1.0},
        daemon=True,
    )  # fmt: skip
    worker = WorkerProcess(cfg).start()
    publisher.start()
    try:

        def re_announced() -> bool:
            try:
                return _metrics(cfg)["ignored"].get("inventory_unchanged", 0) >= 40 * 4
            except Exception:
                return False

        assert wait_for(re_announced, 60), worker.log_tail()
        changelog = f"{cfg.worker.app_id}-nodes-changelog"
        assert sum(end_offsets(cfg.kafka, changelog).values()) == 40
    finally:
        stop.set()
        publisher.join(15)
        worker.stop()
