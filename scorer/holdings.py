"""Which job holds what: each job's assignments, and the jobs holding each node.

The cluster state applies a reservation to its rows (free milli, host CPU and memory); this
book only remembers it, so that a release, or a node's recount after an inventory change,
knows what to give back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType

from scorer.types import Assignment

__all__ = ["Holdings"]


class Holdings:
    """Assignments by job id, and job ids by node id."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[Assignment, ...]] = {}
        self._node_jobs: dict[str, set[str]] = {}

    def get(self, job_id: str) -> tuple[Assignment, ...] | None:
        return self._held.get(job_id)

    def add(self, job_id: str, assignments: tuple[Assignment, ...]) -> None:
        self._held[job_id] = assignments
        for a in assignments:
            self._node_jobs.setdefault(a.node_id, set()).add(job_id)

    def pop(self, job_id: str) -> tuple[Assignment, ...] | None:
        """Forget the job's holding (None when it held nothing)."""
        assignments = self._held.pop(job_id, None)
        for a in assignments or ():
            jobs = self._node_jobs.get(a.node_id)
            if jobs is not None:
                jobs.discard(job_id)
        return assignments

    def on_node(self, node_id: str) -> Iterator[Assignment]:
        """Every assignment held on the node."""
        for job_id in self._node_jobs.get(node_id, ()):
            for a in self._held[job_id]:
                if a.node_id == node_id:
                    yield a

    def taken_on(self, node_id: str, gpus: int) -> tuple[list[int], int, int]:
        """What every holding takes on the node: milli-GPU per GPU index below `gpus`, host
        CPU (milli) and memory (MiB)."""
        milli, cpu, mem = [0] * gpus, 0, 0
        for a in self.on_node(node_id):
            for i in a.gpu_indices:
                if i < gpus:
                    milli[i] += a.gpu_milli
            cpu, mem = cpu + a.cpu_milli, mem + a.memory_mib
        return milli, cpu, mem

    def jobs_on(self, node_id: str) -> frozenset[str]:
        return frozenset(self._node_jobs.get(node_id, ()))

    @property
    def jobs(self) -> Mapping[str, tuple[Assignment, ...]]:
        return MappingProxyType(self._held)
