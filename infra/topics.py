"""gpuflow's topics, declared once: names, partition counts, compaction, and region partitioning.

Region-scoped topics (inventory, telemetry, routed jobs, job events, decisions) put every event
of a region in the same partition number, so the Faust worker that owns a region's placer also
owns that region's nodes, reservations and lifecycle events (co-partitioning).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "DEADLETTER",
    "DECISIONS_ADVISORY",
    "DECISIONS_BANDWIDTH",
    "DECISIONS_MIGRATION",
    "DECISIONS_PLACEMENT",
    "DECISIONS_PREEMPTION",
    "FORECASTS_DEMAND",
    "GRID_SIGNALS",
    "JOBS_CANCEL",
    "JOBS_EVENTS",
    "JOBS_LOGS",
    "JOBS_ROUTED",
    "JOBS_SUBMITTED",
    "LINK_TELEMETRY",
    "NODE_INVENTORY",
    "NODE_TELEMETRY",
    "REGION_STATE",
    "REPLAN_TICKS",
    "SERVICES_LOAD",
    "SERVICES_SCALING",
    "SERVICES_SPECS",
    "TOPICS",
    "RegionPartitioner",
    "TopicSpec",
    "region_partition",
    "topic_for_event",
]


@dataclass(frozen=True)
class TopicSpec:
    name: str
    event: str  # Avro event name carried
    compacted: bool = False
    region_keyed: bool = False  # partition = region_partition(region)
    retention_ms: int | None = None
    history: bool = True  # kept in ClickHouse (control topics are not)


NODE_INVENTORY = "gpuflow.node.inventory"
NODE_TELEMETRY = "gpuflow.node.telemetry"
LINK_TELEMETRY = "gpuflow.link.telemetry"
GRID_SIGNALS = "gpuflow.grid.signals"
JOBS_SUBMITTED = "gpuflow.jobs.submitted"
JOBS_EVENTS = "gpuflow.jobs.events"
REGION_STATE = "gpuflow.region.state"
JOBS_ROUTED = "gpuflow.jobs.routed"
DECISIONS_PLACEMENT = "gpuflow.decisions.placement"
DECISIONS_PREEMPTION = "gpuflow.decisions.preemption"
DECISIONS_MIGRATION = "gpuflow.decisions.migration"
DECISIONS_BANDWIDTH = "gpuflow.decisions.bandwidth"
DECISIONS_ADVISORY = "gpuflow.decisions.advisory"
FORECASTS_DEMAND = "gpuflow.forecasts.demand"
DEADLETTER = "gpuflow.deadletter"
REPLAN_TICKS = "gpuflow.replan.ticks"  # the scheduler's timer, per region (control)
JOBS_CANCEL = "gpuflow.jobs.cancel"  # users' cancel requests, keyed by job id
JOBS_LOGS = "gpuflow.jobs.logs"  # jobs' output, chunked by their executors, keyed by job id
SERVICES_SPECS = "gpuflow.services.specs"  # issue 33: services, keyed by name (compacted)
SERVICES_LOAD = "gpuflow.services.load"  # observed request rates, keyed by service
SERVICES_SCALING = "gpuflow.decisions.scaling"  # the autoscaler's decisions, keyed by service
_LOG_RETENTION_MS = 7 * 24 * 3600 * 1000  # a job's output is readable for a week

TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(NODE_INVENTORY, "NodeInventory", compacted=True, region_keyed=True),
    TopicSpec(NODE_TELEMETRY, "NodeTelemetry", region_keyed=True),
    TopicSpec(LINK_TELEMETRY, "LinkTelemetry"),
    TopicSpec(GRID_SIGNALS, "GridSignal"),
    TopicSpec(JOBS_SUBMITTED, "JobSubmitted"),
    # the ledger's four logs (streams.ledger.ledger) take the broker's retention like the rest: the
    # worker saves its fold every `worker.ledger_snapshot_s`, and a saved ledger whose position
    # retention has passed reads on from the log start
    TopicSpec(JOBS_EVENTS, "JobEvent", region_keyed=True),
    TopicSpec(REGION_STATE, "RegionSummary"),
    TopicSpec(JOBS_ROUTED, "RoutedJob", region_keyed=True),
    TopicSpec(DECISIONS_PLACEMENT, "PlacementDecision", region_keyed=True),
    TopicSpec(DECISIONS_PREEMPTION, "PreemptionDecision", region_keyed=True),
    TopicSpec(DECISIONS_MIGRATION, "MigrationDecision", region_keyed=True),
    TopicSpec(DECISIONS_BANDWIDTH, "BandwidthQuota"),
    TopicSpec(DECISIONS_ADVISORY, "NodeAdvisory", region_keyed=True),
    TopicSpec(FORECASTS_DEMAND, "DemandForecast"),
    TopicSpec(DEADLETTER, "DeadLetter"),
    TopicSpec(REPLAN_TICKS, "ReplanTick", region_keyed=True, history=False),
    TopicSpec(JOBS_CANCEL, "CancelRequest", history=False),
    TopicSpec(JOBS_LOGS, "JobLog", retention_ms=_LOG_RETENTION_MS, history=False),
    TopicSpec(SERVICES_SPECS, "ServiceSpec", compacted=True, history=False),
    TopicSpec(SERVICES_LOAD, "ServiceLoad"),  # the forecast processor reads it back
    TopicSpec(SERVICES_SCALING, "ScalingDecision", history=False),
)

_BY_EVENT = {t.event: t.name for t in TOPICS}


def topic_for_event(event: str) -> str:
    """The topic an event type is published on."""
    return _BY_EVENT[event]


def region_partition(region: str, partitions: int, order: Sequence[str] = ()) -> int:
    """Stable partition of a region: its place in `order` if pinned there, else crc32.

    crc32 is the same in every process and language, but a handful of regions on a handful of
    partitions collide (the demo's four regions hash onto two of four). `order` pins them: the
    i-th region goes to partition i % partitions. Every producer must use the same order.
    """
    if region in order:
        return order.index(region) % partitions
    return zlib.crc32(region.encode()) % partitions


@dataclass(frozen=True)
class RegionPartitioner:
    """`region_partition` with the partition count and pinned order bound (one per process)."""

    partitions: int
    order: tuple[str, ...] = ()

    def __call__(self, region: str) -> int:
        return region_partition(region, self.partitions, self.order)
