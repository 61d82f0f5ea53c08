"""Worker memory bounded by live jobs plus a horizon: decided jobs and released reservations.

A job's final decision only has to be remembered while a duplicate of its submission can still
arrive: at-least-once redelivery after a crash or rebalance replays seconds (the commit
interval), so remembering decided jobs for `worker.horizon_s` (10 minutes by default) keeps
every decision idempotent while memory stays flat. Jobs that still hold GPUs are never
forgotten. Released reservations stay in the table as markers for the same horizon (so a
rebuild from a stale changelog cannot resurrect them), then are deleted.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSet
from typing import Any

__all__ = ["DecidedJobs", "ReleasedLog"]


class DecidedJobs(MutableSet[str]):
    """Job ids with a final decision, each with when it was decided (monotonic seconds)."""

    def __init__(self, horizon_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon_s = horizon_s
        self._clock = clock
        self._at: dict[str, float] = {}

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def add(self, job_id: str, age_s: float = 0.0) -> None:
        """Remember `job_id`, decided `age_s` ago (a decision read back from the log is older)."""
        at = self._clock() - max(0.0, age_s)
        self._at[job_id] = max(at, self._at.get(job_id, at))

    def discard(self, job_id: str) -> None:
        self._at.pop(job_id, None)

    def prune(self, keep: Callable[[str], bool]) -> int:
        """Forget jobs decided more than `horizon_s` ago, except those `keep` names; how many."""
        cutoff = self._clock() - self.horizon_s
        old = [j for j, at in self._at.items() if at < cutoff and not keep(j)]
        for job_id in old:
            del self._at[job_id]
        return len(old)


class ReleasedLog:
    """Released reservations per region in release order, to delete once past the horizon."""

    def __init__(self, horizon_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon_s = horizon_s
        self._clock = clock
        self._by_region: dict[str, deque[tuple[float, str]]] = {}

    def add(self, region: str, job_ids: Iterable[str]) -> None:
        now = self._clock()
        queue = self._by_region.setdefault(region, deque())
        queue.extend((now, j) for j in job_ids)

    def expired(self, region: str) -> list[str]:
        """Jobs of `region` released more than `horizon_s` ago (each returned once)."""
        queue = self._by_region.get(region)
        cutoff = self._clock() - self.horizon_s
        out = []
        while queue and queue[0][0] < cutoff:
            out.append(queue.popleft()[1])
        return out

    def forget(self, region: str, reservations: MutableMapping[str, Any]) -> int:
        """Delete `region`'s released markers older than the horizon from the table; how many."""
        gone = 0
        for job_id in self.expired(region):
            entry = reservations.get(job_id)
            if entry is not None and entry.get("released"):
                del reservations[job_id]
                gone += 1
        return gone

    def __len__(self) -> int:
        return sum(map(len, self._by_region.values()))
