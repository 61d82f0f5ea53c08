"""Worker memory bounded by live jobs plus a horizon: decided jobs and released reservations.

A job's final decision only has to be remembered while a duplicate of its submission can still
arrive: at-least-once redelivery after a crash or rebalance replays seconds (the commit
interval), so remembering decided jobs for `worker.horizon_s` (10 minutes by default) keeps
every decision idempotent while memory stays flat. Jobs that still hold GPUs are never
forgotten. Released reservations stay in the table as markers for the same horizon (so a
rebuild from a stale changelog cannot resurrect them), then are deleted. The book
(`streams.scheduler.book`) owns both and does the forgetting.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSet
from typing import Any

__all__ = ["DecidedJobs", "ReleasedLog"]


class DecidedJobs(MutableSet[str]):
    """Job ids with a final decision, each with when it was decided (monotonic seconds).

    Pruning looks only at what came due (a queue in the order jobs were added), so its cost
    is per job forgotten, not per job remembered: a full scan at every tick cost the worker
    51 ms per tick with 60,000 jobs remembered (100 jobs/s for a 10-minute horizon).
    """

    def __init__(self, horizon_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.horizon_s = horizon_s
        self._clock = clock
        self._at: dict[str, float] = {}
        self._due: deque[tuple[float, str]] = deque()  # (when to look again, job), as added

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._at

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)

    def __len__(self) -> int:
        return len(self._at)

    def add(self, job_id: str, age_s: float = 0.0) -> None:
        """Remember `job_id`, decided `age_s` ago (a decision read back from the log is older)."""
        at = self._clock() - max(0.0, age_s)
        if at > self._at.get(job_id, -math.inf):
            self._remember(job_id, at)

    def discard(self, job_id: str) -> None:
        self._at.pop(job_id, None)  # its queue entry is skipped when it comes due

    def prune(self, keep: Callable[[str], bool]) -> int:
        """Forget jobs decided more than `horizon_s` ago, except those `keep` names; how many."""
        return len(self.expire(keep))

    def expire(self, keep: Callable[[str], bool]) -> list[str]:
        """Forget jobs decided more than `horizon_s` ago; those `keep` names (still holding
        GPUs) are looked at again a horizon later, so a duplicate of a long job's submission
        is refused for a while after it ends too. The jobs forgotten."""
        now = self._clock()
        gone = []
        while self._due and self._due[0][0] < now:
            due, job_id = self._due.popleft()
            at = self._at.get(job_id)
            if at is None or at + self.horizon_s != due:
                continue  # discarded, or added again since (a later entry stands for it)
            if keep(job_id):
                self._remember(job_id, now)
            else:
                del self._at[job_id]
                gone.append(job_id)
        return gone

    def _remember(self, job_id: str, at: float) -> None:
        self._at[job_id] = at
        self._due.append((at + self.horizon_s, job_id))


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

    def forget(self, region: str, reservations: MutableMapping[str, Any]) -> list[str]:
        """Delete `region`'s released markers older than the horizon from the table; the jobs
        whose markers went."""
        gone = []
        for job_id in self.expired(region):
            entry = reservations.get(job_id)
            if entry is not None and entry.get("released"):
                del reservations[job_id]
                gone.append(job_id)
        return gone

    def __len__(self) -> int:
        return sum(map(len, self._by_region.values()))
