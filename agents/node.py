"""The node agent: reads its GPUs through a `GpuReader`, applies the tiered cadence, and
turns readings into NodeInventory / NodeTelemetry records; `run_agent` publishes them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.host import HostStats, host_capacity
from agents.publisher import EventPublisher, PublishStats
from agents.reader import GpuReader, GpuReading, NodeGpus
from agents.telemetry import telemetry_event
from agents.tiers import TierPolicy, TierScheduler, significant_change
from infra.config import Config
from infra.topics import NODE_INVENTORY, NODE_TELEMETRY

__all__ = ["NodeAgent", "NodeIdentity", "run_agent"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NodeIdentity:
    """Where a node sits and what it costs; the agent cannot read these from the GPU."""

    node_id: str
    region: str
    zone: str = ""
    rack: str = ""
    cloud: str = ""
    price_per_gpu_hour: float = 0.0
    labels: Mapping[str, str] = field(default_factory=dict)


class NodeAgent:
    """One node's agent. `tick(now_ms)` returns the telemetry records due at that instant."""

    def __init__(
        self,
        identity: NodeIdentity,
        reader: GpuReader,
        policy: TierPolicy | None = None,
        *,
        host: HostStats | None = None,
    ) -> None:
        self.identity = identity
        self.reader = reader
        self.policy = policy or TierPolicy()
        self.host = host or HostStats()
        self.gpus: NodeGpus = reader.inventory()
        self._sched: TierScheduler | None = None
        self._sent: dict[int, dict[str, Any]] = {}
        self._energy_prev: float | None = None
        self._power_s = self._useful_s = 0.0
        self._last_s: float | None = None

    def inventory_event(self, now_ms: int) -> dict[str, Any]:
        g, ident = self.gpus, self.identity
        first = g.gpus[0]
        cpu_milli, mem_mib = host_capacity()
        models = sorted({x.model for x in g.gpus})
        labels = {**g.labels, **ident.labels}
        if len(models) > 1:  # a mixed node: the inventory names the first, labels say all
            labels["gpu_models"] = ",".join(models)
        return {
            "event_id": f"inv:{ident.node_id}:{now_ms}",
            "ts": now_ms,
            "schema": 1,
            "node_id": ident.node_id,
            "region": ident.region,
            "zone": ident.zone,
            "rack": ident.rack,
            "cloud": ident.cloud,
            "gpu_model": first.model,
            "gpu_count": len(g.gpus),
            "gpu_memory_mib": min(x.memory_mib for x in g.gpus),
            "interconnect": g.interconnect,
            "nvlink_islands": [list(i) for i in g.nvlink_islands],
            "cpu_milli": cpu_milli,
            "memory_mib": mem_mib,
            "price_per_gpu_hour": ident.price_per_gpu_hour,
            "compute_capability": first.compute_capability,
            "driver_version": g.driver_version,
            "mig_enabled": any(x.mig_enabled for x in g.gpus),
            "software_stack": g.software_stack,
            "labels": {k: str(v) for k, v in labels.items()},
        }

    def tick(self, now_ms: int) -> list[dict[str, Any]]:
        """Read the GPUs and return what the cadence says to send now."""
        now_s = now_ms / 1000.0
        if self._sched is None:
            self._sched = TierScheduler(self.policy, now_s)
        readings = self.reader.read()
        samples = {r.index: r.sample() for r in readings}
        self._account(readings, now_s)
        changed = [i for i, s in samples.items()
                   if significant_change(self._sent.get(i), s, self.policy)]  # fmt: skip
        plan = self._sched.plan(now_s, changed, len(samples))
        if plan is None:
            return []
        ident = self.identity
        out = []
        if plan.tier is not None:
            gpus = [samples[i] for i in plan.gpu_indices]
            self._sent.update({s["index"]: s for s in gpus})
            healthy = any(s["healthy"] for s in samples.values())
            out.append(telemetry_event(ident.node_id, ident.region, now_ms, plan.tier,
                                       plan.full_snapshot, gpus, node_healthy=healthy))  # fmt: skip
        if plan.nearline:
            rates = self.host.rates()
            out.append(telemetry_event(
                ident.node_id, ident.region, now_ms, "NEARLINE", False, [],
                **(vars(rates) if rates else {}),
            ))  # fmt: skip
        if plan.slow:
            out.append(self._slow_event(now_ms, readings))
        return out

    def _account(self, readings: list[GpuReading], now_s: float) -> None:
        """Integrate power and useful work between ticks, for the slow tier's perf-per-watt."""
        dt = self.policy.realtime_s if self._last_s is None else max(0.0, now_s - self._last_s)
        self._last_s = now_s
        for r in readings:
            self._power_s += r.power_w * dt
            self._useful_s += r.util_pct / 100.0 * r.perf_factor * dt

    def _slow_event(self, now_ms: int, readings: list[GpuReading]) -> dict[str, Any]:
        counters = [r.energy_j for r in readings if r.energy_j is not None]
        energy: float | None
        if counters and len(counters) == len(readings):
            total = sum(counters)
            energy = None if self._energy_prev is None else max(0.0, total - self._energy_prev)
            self._energy_prev = total
        else:  # no hardware counter: integrate sampled power
            energy = self._power_s
        ppw = self._useful_s / (self._power_s / 1000.0) if self._power_s > 0 else None
        self._power_s = self._useful_s = 0.0
        return telemetry_event(
            self.identity.node_id, self.identity.region, now_ms, "SLOW", False, [],
            energy_j=None if energy is None else round(energy, 1),
            perf_per_watt=None if ppw is None else round(ppw, 4),
        )  # fmt: skip


def run_agent(
    config: Config,
    agent: NodeAgent,
    *,
    hz: float = 1.0,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
    inventory_every_s: float = 60.0,
    publisher: EventPublisher | None = None,
) -> PublishStats:
    """Publish one node's inventory and telemetry until `stop` or `duration_s`."""
    stop = stop or threading.Event()
    pub = publisher or EventPublisher(config)
    agent.policy = agent.policy.with_heartbeat_below(config.worker.stale_after_s)
    started = time.monotonic()
    next_inv = started
    log.info("agent started node_id=%s gpus=%d", agent.identity.node_id, len(agent.gpus.gpus))
    try:
        while not stop.is_set():
            now = time.monotonic()
            if duration_s is not None and now - started >= duration_s:
                break
            now_ms = int(time.time() * 1000)
            if now >= next_inv:
                pub.publish(NODE_INVENTORY, [agent.inventory_event(now_ms)])
                next_inv = now + inventory_every_s
            pub.publish(NODE_TELEMETRY, agent.tick(now_ms))
            pub.producer.poll(0)
            pub.stats.ticks += 1
            stop.wait(max(0.0, 1.0 / hz - (time.monotonic() - now)))
    finally:
        pub.flush()
        pub.stats.elapsed_s = time.monotonic() - started
        log.info("agent stopped node_id=%s events=%d", agent.identity.node_id, pub.stats.events)
    return pub.stats
