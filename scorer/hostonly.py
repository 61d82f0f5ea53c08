"""CPU-only jobs (gpu_count 0): a node with the job's host CPU and memory free.

A CPU-only job on a GPU node takes host resources the node's GPUs need to be usable (FGD counts
a node that cannot host a task as all fragment), so GPU-less nodes come first, then GPU nodes
with the fewest free GPUs, then the tightest CPU fit (best fit keeps big blocks for big jobs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scorer.state import ClusterState
from scorer.types import Assignment, JobSpec, PlacementResult

__all__ = ["place_host_only"]


def _fits(capacity: np.ndarray, free: np.ndarray, need: int) -> np.ndarray:
    """Undeclared capacity (0) is not held against the job."""
    return (capacity == 0) | (free >= need)


HostRank = Callable[[ClusterState, JobSpec, np.ndarray], np.ndarray]  # lower first


def place_host_only(
    state: ClusterState, job: JobSpec, region: str | None, rank: HostRank | None = None
) -> PlacementResult:
    """The node for a CPU-only job; `rank` (a policy's own order, lower first, inventory order
    breaking ties) replaces the default order below."""
    slots = state.slots(region)
    refusals: dict[str, int] = {}
    ok = np.ones(slots.shape[0], bool)
    if job.allowed_regions:
        allowed = [state.region_index(r) for r in job.allowed_regions]
        ok &= np.isin(state.region[slots], [a for a in allowed if a is not None])
        _count(refusals, "region", ok)
    size = _fits(state.cpu_milli[slots], state.cpu_milli[slots], job.cpu_milli)
    size &= _fits(state.memory_mib[slots], state.memory_mib[slots], job.memory_mib)
    _count(refusals, "host_resources", size)
    static = ok & size
    healthy = state.node_ok[slots]
    _count(refusals, "health", healthy)
    free = _fits(state.cpu_milli[slots], state.free_cpu[slots], job.cpu_milli)
    free &= _fits(state.memory_mib[slots], state.free_mem[slots], job.memory_mib)
    _count(refusals, "capacity", free)
    candidates = slots[static & healthy & free]
    if not candidates.size:
        reasons = tuple(
            f"{name}: refused {count} of {slots.shape[0]} nodes for a CPU-only job "
            f"(cpu_milli {job.cpu_milli}, memory_mib {job.memory_mib})"
            for name, count in refusals.items()
        ) or (f"no nodes in region {region}",)
        return PlacementResult(
            placed=False, refusals=refusals, reasons=reasons, never_fits=not bool(static.any())
        )
    if rank is not None:
        best = int(candidates[np.lexsort((candidates, rank(state, job, candidates)))[0]])
    else:
        gpus_free = state.free_whole[candidates]
        cpu_left = np.where(state.cpu_milli[candidates] > 0, state.free_cpu[candidates], 1 << 40)
        # GPU-less first, then fewest free GPUs stranded, then tightest CPU fit, inventory order
        best = int(candidates[np.lexsort((candidates, cpu_left, gpus_free))[0]])
    total = int(state.gpu_count[best])
    score = 100.0 if total == 0 else 50.0 * (1.0 - int(state.free_whole[best]) / total)
    return PlacementResult(
        placed=True,
        assignments=(Assignment(state.spec(best).node_id, (), 0, job.cpu_milli, job.memory_mib),),
        region=state.region_name(int(state.region[best])),
        gpu_model=None,
        score=round(score, 3),
        breakdown={"host_fit": round(score, 2)},
        expected_throughput=1.0,
        expected_duration_s=job.expected_duration_s,
        price_per_hour=0.0,
        refusals=refusals,
    )


def _count(refusals: dict[str, int], name: str, mask: np.ndarray) -> None:
    refused = int(mask.shape[0] - np.count_nonzero(mask))
    if refused:
        refusals[name] = refused
