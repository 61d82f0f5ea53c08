"""Backfill: a region's waiting jobs tried in fair order; the first that cannot start gets a
backfill reservation and later jobs start only around it (`streams.scheduler.queueing`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.protocols import Ticks

__all__ = ["Backfill"]


class Backfill:
    name = "backfill"

    def __init__(self, s: Ticks) -> None:
        self.s = s

    def run(self, region: str) -> list[Outgoing]:
        return self.s.retry_queue(region)
