"""EASY backfill: the first job in queue order that cannot start gets a reservation at its
earliest start, computed from the expected end of the jobs running now; a later job may start
ahead of it only where it does not delay that start.

`earliest_start` works per GPU: `free_at[node][i]` is when GPU i becomes whole-free (now or
earlier: free now; a running job's expected end; inf: unknown). A gang that must sit on one
node (chunk == need) starts when some eligible node has `need` GPUs free; a gang that may spread
starts when the eligible nodes together offer `need` in whole tensor-parallel groups. The
reservation names the GPUs it will take: among those free by then, the ones that free *last*
(busy now), so GPUs free now stay usable for backfill.

A candidate that is expected to end by the reservation's start may go anywhere; one that runs
longer must leave the reserved GPUs alone (`held_now`: the reserved GPUs free now).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Reservation", "earliest_start", "held_now"]


@dataclass(frozen=True)
class Reservation:
    job_id: str
    start_ms: float
    gpus: Mapping[str, tuple[int, ...]]  # node -> GPU indices reserved

    @property
    def gpu_count(self) -> int:
        return sum(len(g) for g in self.gpus.values())


def _latest_by(times: Sequence[float], t: float, k: int) -> tuple[int, ...]:
    """k GPU indices free by t, the ones freeing last first."""
    ready = sorted((i for i, x in enumerate(times) if x <= t), key=lambda i: (-times[i], i))
    return tuple(sorted(ready[:k]))


def earliest_start(
    job_id: str,
    free_at: Mapping[str, Sequence[float]],
    *,
    need: int,
    chunk: int,
    tp: int = 1,
) -> Reservation | None:
    """Earliest start of a gang of `need` GPUs (see the module doc); None when never."""
    if need <= 0 or not free_at:
        return None
    if chunk >= need:
        return _one_node(job_id, free_at, need)
    return _spread(job_id, free_at, need, max(1, tp))


def _one_node(job_id: str, free_at: Mapping[str, Sequence[float]], need: int) -> Reservation | None:
    best: tuple[float, int, str] | None = None
    for node, times in free_at.items():
        if len(times) < need:
            continue
        t = sorted(times)[need - 1]
        option = (t, len(times) - need, node)  # earliest, then the tightest node
        if best is None or option < best:
            best = option
    if best is None or math.isinf(best[0]):
        return None
    t, _, node = best
    return Reservation(job_id, t, {node: _latest_by(free_at[node], t, need)})


def _spread(
    job_id: str, free_at: Mapping[str, Sequence[float]], need: int, tp: int
) -> Reservation | None:
    moments = sorted({x for times in free_at.values() for x in times if math.isfinite(x)})
    for t in moments:
        usable = {n: (sum(x <= t for x in times) // tp) * tp for n, times in free_at.items()}
        if sum(usable.values()) < need:
            continue
        gpus: dict[str, tuple[int, ...]] = {}
        left = need
        for node in sorted(usable, key=lambda n: (-usable[n], n)):
            if left <= 0 or usable[node] == 0:
                break
            take = min(usable[node], left)
            gpus[node] = _latest_by(free_at[node], t, take)
            left -= take
        return Reservation(job_id, t, gpus)
    return None


def held_now(
    reservation: Reservation, free_at: Mapping[str, Sequence[float]], now_ms: float
) -> dict[str, tuple[int, ...]]:
    """Reserved GPUs that are free now: what a job running past the start must not take."""
    out: dict[str, tuple[int, ...]] = {}
    for node, gpus in reservation.gpus.items():
        free = tuple(g for g in gpus if free_at[node][g] <= now_ms)
        if free:
            out[node] = free
    return out
