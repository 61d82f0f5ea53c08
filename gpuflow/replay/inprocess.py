"""The in-process engine: the worker's own `Scheduler`, called directly (no broker).

Every JOBS_ROUTED message is fed straight back into `place`, as the broker would deliver it;
the Scheduler's tables are plain dicts. Same preset and throughput model as the worker. The
scheduler's clock is the replay's virtual time (the time of the event being decided), so grace
periods, expected ends and waits are measured in trace seconds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from gpuflow.replay.engine import Decided
from infra.topics import JOBS_ROUTED, TOPICS
from scorer import Catalog, ClusterState, ThroughputModel, make_placer, preset
from scorer.network import NetworkView
from scorer.replan import ReplanConfig
from scorer.tenancy import TenancyPolicy
from streams.base.clock import EventClock
from streams.base.outbox import Outgoing
from streams.scheduler.core import Scheduler

__all__ = ["InProcessDecider"]

DECISION_TOPICS = frozenset(t.name for t in TOPICS if t.name.startswith("gpuflow.decisions."))


class InProcessDecider:
    def __init__(
        self,
        policy: str,
        throughput: ThroughputModel | None = None,
        partitions: int = 4,
        catalog: Catalog | None = None,
        replan: ReplanConfig | None = None,
        *,
        network: NetworkView | None = None,
        cross_region: bool = False,
        tenancy: TenancyPolicy | None = None,
        try_once: bool = False,
    ) -> None:
        """`network`: links and placed flows for the placer; `cross_region`: gangs that fit no
        region may span several (this decider holds every region, like a single worker).
        `try_once` (arrivals-only): a job that does not fit on arrival is REJECTED, never
        queued, preempting or moved. The scheduler runs on event time (the latest timestamp
        it was handed)."""
        state = ClusterState(catalog)
        placer = make_placer(policy, state, throughput=throughput, network=network)
        chosen = preset(policy)
        self.clock = EventClock()
        self.scheduler = Scheduler(
            state, placer, reservations={}, queue={}, nodes={}, partitions=partitions,
            view_ttl_s=0, moves={}, replan=(replan or ReplanConfig()) if chosen.replan else None,
            queue_order=chosen.queue, clock=self.clock, cross_region=cross_region,
            tenancy=tenancy, try_once=try_once,
        )  # fmt: skip

    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        for record in nodes:
            self.scheduler.nodes[record["node_id"]] = dict(record)
        self.scheduler.rebuild({})

    def submit(self, record: Mapping[str, Any]) -> list[Decided]:
        self.clock.observe(int(record["ts"]))
        return self._follow(self.scheduler.route(dict(record), started_ns=time.perf_counter_ns()))

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        self.clock.observe(int(record["ts"]))
        return self._follow(self.scheduler.on_job_event(dict(record)))

    def tick(self, ts_ms: int) -> list[Decided]:
        self.clock.observe(ts_ms)
        return self._follow(self.scheduler.on_tick(ts_ms))

    def close(self) -> None:
        return None

    def _follow(self, out: list[Outgoing]) -> list[Decided]:
        """Deliver routed hops until only decisions remain; decisions in emission order."""
        decisions: list[Decided] = []
        pending = list(out)
        while pending:
            msg = pending.pop(0)
            if msg.topic == JOBS_ROUTED:
                pending.extend(
                    self.scheduler.place(dict(msg.record), started_ns=time.perf_counter_ns())
                )
            elif msg.topic in DECISION_TOPICS:
                decisions.append(Decided(msg.topic, dict(msg.record)))
        return decisions
