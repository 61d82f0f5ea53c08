"""The scheduler's notion of now: the wall clock in a live worker, or event time in a replay.

Event time is the latest timestamp seen on the events the worker handles (submissions, job
events, timer ticks), so a replay driven in lockstep decides exactly as the in-process engine
does, whatever the wall clock says.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "EventClock", "FuncClock", "WallClock", "as_clock"]


class WallClock:
    """Milliseconds since the epoch, now."""

    def observe(self, ts_ms: int) -> None:
        return None

    def now(self) -> int:
        return int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now()


class EventClock:
    """The latest event timestamp seen (ms); never goes back."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = start_ms

    def observe(self, ts_ms: int) -> None:
        self._now = max(self._now, int(ts_ms))

    def now(self) -> int:
        return self._now

    def __call__(self) -> int:
        return self._now


class FuncClock:
    """Time read from a function (a caller that keeps its own, e.g. a test); `observe` is a
    no-op."""

    def __init__(self, read: Callable[[], int]) -> None:
        self._read = read

    def observe(self, ts_ms: int) -> None:
        return None

    def now(self) -> int:
        return int(self._read())

    def __call__(self) -> int:
        return self.now()


Clock = WallClock | EventClock | FuncClock


def as_clock(clock: Clock | Callable[[], int] | None) -> Clock:
    """A clock from a clock, a function returning ms, or None (the wall clock)."""
    if clock is None:
        return WallClock()
    if isinstance(clock, WallClock | EventClock | FuncClock):
        return clock
    return FuncClock(clock)
