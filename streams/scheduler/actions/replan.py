"""Re-planning's turn in a region pass, by the re-planner (`streams.replanning`, which owns
migration and defragmentation): `rooms` places a gang whose node a defragmentation freed (or
consolidates a running one there) before anyone else; `replan` moves running jobs that a
faster free GPU suits and defragments for waiting gangs. Both are off without a re-planner."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.protocols import Ticks

__all__ = ["Replan", "Rooms"]


class Rooms:
    name = "rooms"

    def __init__(self, s: Ticks) -> None:
        self.s = s

    def run(self, region: str) -> list[Outgoing]:
        s, out = self.s, []
        if s.replanner is None:
            return []
        for gang in s.replanner.room_ready(region):
            routed = s.queue.get(gang)
            if routed is not None:
                note = "defragmentation freed a node for this gang"
                out.extend(s.place_waiting(routed, note=note))
            else:  # a running gang spread over nodes: consolidate it on the freed node
                out.extend(s.replanner.better_match(region, only={gang}))
        return out


class Replan:
    name = "replan"

    def __init__(self, s: Ticks) -> None:
        self.s = s

    def run(self, region: str) -> list[Outgoing]:
        return self.s.replanner.passes(region) if self.s.replanner is not None else []
