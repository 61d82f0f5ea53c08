"""Preempt: on the timer, a few waiting jobs of a region look for victims (priority
preemption, quota reclaim: `streams.scheduler.preemption.Preemptions.sweep`). A job that
arrives and does not fit looks for victims in `refuse`, before it waits."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.protocols import Ticks

__all__ = ["Preempt"]


class Preempt:
    name = "preempt"

    def __init__(self, s: Ticks) -> None:
        self.s = s

    def run(self, region: str) -> list[Outgoing]:
        return self.s.preemption.sweep(region)
