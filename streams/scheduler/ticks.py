"""The scheduler's passes over a region: after capacity comes back (a release, a confirmed
migration) and on its timer (`Scheduler.on_tick`), and the timer itself as one ReplanTick per
region the worker holds.

A pass tries waiting jobs first (a gang whose node was just freed for it before all), then
running jobs a faster free GPU suits, then defragmentation for waiting gangs
(`streams.replanning`). A tick also ends grace periods that are over and lets a few waiting
jobs look for victims (`streams.scheduler.preemption`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from infra.topics import REPLAN_TICKS
from streams.base.outbox import Outgoing, new_event_id, outgoing

if TYPE_CHECKING:
    from streams.scheduler.actions.base import RegionAction
    from streams.scheduler.protocols import Ticks

__all__ = ["after_release", "region_pass", "tick_messages", "tick_passes"]


def after_release(
    s: Ticks, regions: Sequence[str], actions: Sequence[RegionAction]
) -> list[Outgoing]:
    """Capacity came back: waiting jobs first, then running jobs that a faster GPU suits."""
    out: list[Outgoing] = []
    for region in regions:
        out.extend(region_pass(region, actions))
    return out


def region_pass(region: str, actions: Sequence[RegionAction]) -> list[Outgoing]:
    """One region's pass: each of `actions` in order (`streams.scheduler.actions`; by default
    a gang whose node was just freed for it, then waiting jobs, then re-planning)."""
    out: list[Outgoing] = []
    for action in actions:
        out.extend(action.run(region))
    return out


def tick_passes(
    s: Ticks, now_ms: int, regions: Collection[str] | None, actions: Sequence[RegionAction]
) -> list[Outgoing]:
    """Grace periods that ended, then the tick actions (a pass and a preemption sweep) over
    every region with waiting jobs or moves (of `regions`, when given); re-planning first
    drops holds of moves not confirmed in time."""
    s.clock.observe(now_ms)
    out = s.preemption.expire(now_ms, regions) + s.cancels.expire(now_ms, regions)
    active = {r["region"] for r in s.queue.values()}
    if s.replanner is not None:
        active |= set(s.replanner.expire())
        active |= s.replanner.regions()
    if regions is not None:
        active &= set(regions)
    for region in sorted(active):
        out.extend(region_pass(region, actions))
    return out


def tick_messages(s: Ticks, now_ms: int) -> list[Outgoing]:
    """The worker's timer as one ReplanTick per region it holds (`Scheduler.on_tick` runs when
    each comes back through the region's partition, so its table writes land there)."""
    return [
        outgoing(
            REPLAN_TICKS,
            region,
            {"event_id": new_event_id(), "ts": now_ms, "region": region},
            region=region,
            partition_of=s.partition_of,
        )
        for region in s.state.regions
        if s.state.slots(region).size
    ]
