"""The bandwidth processor: link telemetry and job phases in, `BandwidthQuota` decisions out.

No Faust in here (the agents are in `streams/worker/bandwidth_agents.py`): every method takes
decoded records and returns the messages to send, so unit tests run it against plain dicts.

- `on_link(LinkTelemetry)` keeps the link graph current (paths are recomputed when a link
  changes materially, `LinkGraph.observe`).
- `on_job_event(JobEvent)`: STARTED / MIGRATED switch on the job's cross-region flows (noted
  at placement in the `NetworkView`, durable in the reservation table), PHASE COMPUTE / COMM
  flips its demand, FINISHED / FAILED / EVICTED drop them.
- `round(now_ms)`, on the worker's timer every `network.round_s`: recompute the allocation
  (elastic water-filling or equal shares, `BandwidthAllocator`) when anything changed or a
  quota is due for renewal, and emit what the `QuotaLedger` says changed enough.

A phase change is answered at the next round: at most `round_s` later, plus one broker hop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from infra.topics import DECISIONS_BANDWIDTH
from scorer.network import (
    Allocation,
    AllocationPolicy,
    BandwidthAllocator,
    Flow,
    Hysteresis,
    NetworkView,
    QuotaChange,
    QuotaLedger,
)
from streams.base.outbox import Outgoing, new_event_id, outgoing
from streams.scheduler.job_end import ENDS

__all__ = ["BandwidthProcessor", "flow_records", "flows_from_records"]

log = logging.getLogger(__name__)


def flow_records(flows: Iterable[Flow]) -> list[dict[str, Any]]:
    """Flows as JSON-safe dicts (the reservation table keeps them)."""
    return [{k: v for k, v in asdict(f).items() if v != float("inf")} for f in flows]


def flows_from_records(records: Iterable[Mapping[str, Any]] | None) -> list[Flow]:
    return [Flow(**dict(r)) for r in records or ()]


class BandwidthProcessor:
    """Quotas for the cross-region flows of the jobs this worker runs."""

    def __init__(
        self,
        view: NetworkView,
        *,
        policy: AllocationPolicy | None = None,
        hysteresis: Hysteresis | None = None,
        partition_of: Any = None,
    ) -> None:
        self.view = view
        self.allocator = BandwidthAllocator(view.graph, policy)
        self.ledger = QuotaLedger(hysteresis)
        self.partition_of = partition_of or (lambda region: 0)
        self.dirty = False
        self.rounds = 0
        self.changed_in: dict[str, int] = {}  # job -> the last round that changed its quotas
        self.last: Allocation | None = None

    # -- inputs ------------------------------------------------------------------------------

    def on_link(self, record: Mapping[str, Any]) -> None:
        self.view.graph.observe(
            record["src_region"],
            record["dst_region"],
            rtt_ms=float(record["rtt_ms"]),
            capacity_gbps=float(record["capacity_gbps"]),
            used_gbps=float(record.get("used_gbps") or 0.0),
            loss_pct=float(record.get("loss_pct") or 0.0),
        )
        self.dirty = True  # allocatable moved, if only a little: the ledger filters churn

    def on_job_event(self, event: Mapping[str, Any]) -> None:
        kind, job_id = event["type"], event["job_id"]
        if kind in ENDS:
            self.dirty |= self.allocator.remove(job_id)
        elif kind in ("STARTED", "MIGRATED"):
            self._start(job_id, "COMM")
        elif kind == "PHASE" and event.get("phase"):
            if not self.allocator.set_phase(job_id, event["phase"]):
                self._start(job_id, event["phase"])  # a phase before its STARTED
            self.dirty = True

    def _start(self, job_id: str, phase: str) -> None:
        flows = self.view.flows(job_id)
        if flows:
            self.allocator.set_job(job_id, flows, phase)
            self.dirty = True

    def restore(self, running: Mapping[str, Sequence[Flow]]) -> None:
        """After a restart: flows of jobs the tables say still run, assumed communicating."""
        for job_id, flows in running.items():
            if flows and job_id not in self.allocator.phase:
                self.allocator.set_job(job_id, flows, "COMM")
                self.dirty = True

    # -- the round ---------------------------------------------------------------------------

    def due(self, now_ms: int) -> bool:
        renew_ms = int(self.ledger.hysteresis.renew_before_s * 1000)
        expiry = self.ledger.next_expiry_ms()
        return self.dirty or (expiry is not None and expiry - now_ms <= renew_ms)

    def round(self, now_ms: int) -> list[Outgoing]:
        """Recompute if needed; the quota decisions to send (decreases first)."""
        if not self.due(now_ms):
            return []
        self.dirty = False
        self.rounds += 1
        alloc = self.last = self.allocator.allocate()
        changes = self.ledger.decide_arrays(alloc, now_ms)
        capacity = alloc.capacity_of() if changes else {}
        for c in changes:
            self.changed_in[c.job_id] = self.rounds
        return [self._message(c, alloc, capacity, now_ms) for c in changes]

    def _message(
        self, c: QuotaChange, alloc: Allocation, capacity: Mapping[str, float], now_ms: int
    ) -> Outgoing:
        src, _, dst = c.link_id.partition(">")
        record = {
            "event_id": new_event_id(),
            "ts": now_ms,
            "job_id": c.job_id,
            "link_id": c.link_id,
            "gbps": round(c.gbps, 6),
            "valid_until_ts": c.valid_until_ms,
            "phase": c.phase,
            "src_region": src,
            "dst_region": dst,
            "tenant": alloc.tenant.get(c.job_id, ""),
            "demand_gbps": _finite(c.demand_gbps),
            "weight": float(alloc.weight.get(c.job_id, 1.0)),
            "capacity_gbps": float(capacity.get(c.link_id, 0.0)),
            "reason": c.reason,
        }
        return outgoing(DECISIONS_BANDWIDTH, c.job_id, record, region=None,
                        partition_of=self.partition_of)  # fmt: skip

    # -- what the /bandwidth/ page shows ------------------------------------------------------

    def snapshot(self, now_ms: int) -> dict[str, Any]:
        graph = self.view.graph
        return {
            "rounds": self.rounds,
            "jobs": {
                j: {"phase": p, "changed_in_round": self.changed_in.get(j)}
                for j, p in self.allocator.phase.items()
            },
            "links": {
                lid: {
                    "rtt_ms": link.rtt_ms,
                    "capacity_gbps": link.capacity_gbps,
                    "used_gbps": link.used_gbps,
                    "allocatable_gbps": round(graph.allocatable(lid), 3),
                    "congested": graph.congested(lid),
                    "granted_gbps": round(self.ledger.in_force(lid, now_ms), 3),
                }
                for lid, link in sorted(graph.links.items())
            },
        }


def _finite(value: float) -> float:
    return float(value) if value != float("inf") else -1.0
