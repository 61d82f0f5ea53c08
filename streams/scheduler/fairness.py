"""Queue order between and within tenants.

Between tenants: weighted Dominant Resource Fairness, the lowest share first, updated as jobs
start in the same pass (`FairOrder`). Within a tenant: `WithinOrder`, a function from the
tenant's waiting queue entries to their order; the default is priority, then age
(`priority_then_age`). A speed-aware order plugs in as `Scheduler(within_tenant_order=...)`.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scorer.tenancy import dominant_share

__all__ = [
    "QUEUE_DEPTH",
    "FairOrder",
    "WithinOrder",
    "entry_priority",
    "priority_then_age",
    "resources",
]

MILLI = 1000

WithinOrder = Callable[[Sequence[Mapping[str, Any]]], list[Mapping[str, Any]]]

# Jobs per tenant a pass orders and tries: the first by priority, then age. Like Slurm's
# `default_queue_depth` (100) it bounds a pass's work however long the queue is (ordering
# and trying every waiting job on every release made passes cost O(queue)); the oldest jobs
# of the highest priority are always inside, so nothing starves, but a younger job that
# would fit the freed GPUs better waits until the jobs ahead of it thin out.
QUEUE_DEPTH = 100


def entry_priority(routed: Mapping[str, Any]) -> int:
    """A queue entry's effective priority (its class value; the job's integer for old entries)."""
    return int(routed.get("prio", routed["job"].get("priority", 0)))


def priority_then_age(waiting: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Within one tenant: higher priority first, then the longest waiting."""
    return sorted(waiting, key=lambda r: (-entry_priority(r), int(r.get("queued_ts", 0))))


def _first(jobs: list[Mapping[str, Any]], depth: int) -> list[Mapping[str, Any]]:
    if len(jobs) <= depth:
        return jobs
    return heapq.nsmallest(
        depth, jobs, key=lambda r: (-entry_priority(r), int(r.get("queued_ts", 0)))
    )


def resources(job: Mapping[str, Any]) -> tuple[float, float, float]:
    """GPUs, CPU milli and memory MiB a job holds (per node: counted on every node it spans)."""
    gpus = int(job.get("gpu_count", 1)) * int(job.get("gpu_milli", 1000)) / MILLI
    return (gpus, float(job.get("cpu_milli") or 0), float(job.get("memory_mib") or 0))


@dataclass
class FairOrder:
    """A region's waiting jobs in fair order: the lowest-share tenant's next job first."""

    by_tenant: dict[str, deque[Mapping[str, Any]]]
    usage: dict[str, np.ndarray]  # tenant -> (GPUs, CPU milli, memory MiB) held in the region
    capacity: np.ndarray
    weight: Callable[[str], float]
    heap: list[tuple[float, str]] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        waiting: Sequence[Mapping[str, Any]],
        within: WithinOrder,
        usage: dict[str, np.ndarray],
        capacity: np.ndarray,
        weight: Callable[[str], float],
        depth: int = QUEUE_DEPTH,
    ) -> FairOrder:
        """`within` orders each tenant's first `depth` jobs by priority, then age."""
        by_tenant: dict[str, list[Mapping[str, Any]]] = {}
        for routed in waiting:
            by_tenant.setdefault(str(routed["job"].get("tenant", "default")), []).append(routed)
        ordered = {t: deque(within(_first(jobs, depth))) for t, jobs in sorted(by_tenant.items())}
        return cls(ordered, usage, capacity, weight)

    def __post_init__(self) -> None:
        for tenant in self.by_tenant:
            self.shares[tenant] = self._share(tenant)
            heapq.heappush(self.heap, (self.shares[tenant], tenant))

    def _share(self, tenant: str) -> float:
        return dominant_share(
            self.usage.get(tenant, np.zeros(3)), self.capacity, self.weight(tenant)
        )

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        while self.heap:
            _, tenant = heapq.heappop(self.heap)
            jobs = self.by_tenant[tenant]
            if not jobs:
                continue
            yield jobs.popleft()
            if jobs:  # ranked again with its share as it is now (`placed` may have grown it)
                heapq.heappush(self.heap, (self.shares[tenant], tenant))

    def placed(self, routed: Mapping[str, Any]) -> None:
        """A job started: its tenant's share grows before its next job is ranked."""
        tenant = str(routed["job"].get("tenant", "default"))
        vector = np.array(resources(routed["job"]), float)
        self.usage[tenant] = self.usage.get(tenant, np.zeros(3)) + vector
        self.shares[tenant] = self._share(tenant)
