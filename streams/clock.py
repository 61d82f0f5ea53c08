"""The scheduler's notion of now: the wall clock in a live worker, or event time in a replay.

Event time is the latest timestamp seen on the events the worker handles (submissions, job
events, timer ticks), so a replay driven in lockstep decides exactly as the in-process engine
does, whatever the wall clock says.
"""

from __future__ import annotations

import time

__all__ = ["Clock", "EventClock", "WallClock"]


class WallClock:
    """Milliseconds since the epoch, now."""

    def observe(self, ts_ms: int) -> None:
        return None

    def now(self) -> int:
        return int(time.time() * 1000)


class EventClock:
    """The latest event timestamp seen (ms); never goes back."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def observe(self, ts_ms: int) -> None:
        self._now = max(self._now, int(ts_ms))

    def now(self) -> int:
        return self._now


Clock = WallClock | EventClock
