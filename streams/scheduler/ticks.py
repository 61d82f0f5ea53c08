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
from streams.outbox import Outgoing, new_event_id, outgoing

if TYPE_CHECKING:
    from streams.scheduler.protocols import Ticks

__all__ = ["after_release", "region_pass", "tick_messages", "tick_passes"]


def after_release(s: Ticks, regions: Sequence[str]) -> list[Outgoing]:
    """Capacity came back: waiting jobs first, then running jobs that a faster GPU suits."""
    out: list[Outgoing] = []
    for region in regions:
        out.extend(region_pass(s, region))
    return out


def region_pass(s: Ticks, region: str) -> list[Outgoing]:
    """Waiting jobs first (a gang whose node was just freed for it before all), then
    running jobs a faster free GPU suits, then defragmentation for waiting gangs."""
    out: list[Outgoing] = []
    if s.replanner is not None:
        for gang in s.replanner.room_ready(region):
            routed = s.queue.get(gang)
            if routed is not None:
                note = "defragmentation freed a node for this gang"
                out.extend(s.place_waiting(routed, note=note))
            else:  # a running gang spread over nodes: consolidate it on the freed node
                out.extend(s.replanner.better_match(region, only={gang}))
    out.extend(s.retry_queue(region))
    if s.replanner is not None:
        out.extend(s.replanner.passes(region))
    return out


def tick_passes(s: Ticks, now_ms: int, regions: Collection[str] | None) -> list[Outgoing]:
    """Grace periods that ended, then a pass and a preemption sweep over every region with
    waiting jobs or moves (of `regions`, when given); re-planning first drops holds of moves
    not confirmed in time."""
    s.clock.observe(now_ms)
    out = s.preemption.expire(now_ms, regions) + s.cancels.expire(now_ms, regions)
    active = {r["region"] for r in s.queue.values()}
    if s.replanner is not None:
        active |= set(s.replanner.expire())
        active |= s.replanner.regions()
    if regions is not None:
        active &= set(regions)
    for region in sorted(active):
        out.extend(region_pass(s, region))
        out.extend(s.preemption.sweep(region))
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
