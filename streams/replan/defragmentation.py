"""Defragmentation, the mechanism half: when a gang waits, free one node for it by moving a
few short jobs (`scorer.replan.defrag` chooses them), and hold that node's GPUs for the gang as
its movers leave.

A room (`Room`: gang, region, node, movers) is kept per gang in the book (`Book.rooms`, in
memory: a restart lets it go) and its GPUs held under `Hold(ROOM, gang)`, both only through the
book's methods. One gang at a time per region; once every mover's move is confirmed the room is
released and the gang is tried first (`streams.scheduler.ticks`). Running gangs spread over
nodes that would run `SPREAD_GAIN` times as fast on one node are candidates too.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from scorer import Assignment, JobSpec
from scorer.replan import free_node_for, movable
from streams.base.outbox import Outgoing
from streams.replan.parts import BookStatement, DefragHost, Room
from streams.scheduler.convert import job_spec

__all__ = ["SPREAD_GAIN", "defragment", "drop_room", "hold_room", "room_ready", "waiting_gangs"]

SPREAD_GAIN = 1.5  # a spread gang this much faster on one node is worth a node freed for it

log = logging.getLogger(__name__)


def defragment(r: DefragHost, region: str) -> list[Outgoing]:
    """If a gang waits in `region`, free one node for it by moving a few short jobs (one
    gang at a time per region; `scorer.replan.defrag`)."""
    book = r.parts.book
    if any(room.region == region for room in book.rooms.values()):
        return []
    now = r.parts.clock.now()
    budget = min(r.config.defrag_moves_per_pass, r.region_budget(region, now))
    gangs = waiting_gangs(r, region)
    if budget <= 0 or not gangs:
        return []
    runs = r.running(region)
    for gang in gangs:
        statement = BookStatement(book)
        plan = free_node_for(
            r.parts.state, r.parts.placer, gang, region, runs, now, r.config,
            statement, r.mix, budget=budget,
        )  # fmt: skip
        if plan is None:
            continue
        before, after = plan.fragmentation
        log.info(
            "defragmentation region=%s gang=%s node=%s moves=%d wait_s=%.0f cost_s=%.0f "
            "fragmentation=%.0f->%.0f",
            region, gang.job_id, plan.node_id, len(plan.moves), plan.wait_s, plan.cost_s,
            before, after,
        )  # fmt: skip
        movers = tuple(m.run.job_id for m in plan.moves)
        book.open_room(Room(gang.job_id, region, plan.node_id, movers))
        note = f"region fragmentation (FGD) {before / 1000:.2f} -> {after / 1000:.2f} GPUs"
        return r.commit_all([replace(m, explain=(*m.explain, note)) for m in plan.moves])
    return []


def waiting_gangs(r: DefragHost, region: str) -> list[JobSpec]:
    """Queued gangs of `region` (whole GPUs, two or more), oldest first; then running gangs
    spread over nodes that would run at least `SPREAD_GAIN` times as fast on one node. At
    most `defrag_gangs` in all: each costs a look at every node of the region."""
    gangs: list[tuple[int, Mapping[str, Any]]] = []
    rooms = r.parts.book.rooms
    for routed in r.parts.queue.values():
        job = routed["job"]
        if routed["region"] != region or job["job_id"] in rooms:
            continue
        r.mix.observe(
            job["job_id"], int(job.get("gpu_count", 1)), int(job.get("gpu_milli", 1000)),
            int(job.get("cpu_milli") or 0), int(job.get("memory_mib") or 0),
        )  # fmt: skip
        if int(job.get("gpu_count", 1)) >= 2 and int(job.get("gpu_milli", 1000)) >= 1000:
            gangs.append((int(routed["queued_ts"]), job))
    limit = r.config.defrag_gangs
    oldest = heapq.nsmallest(limit, gangs, key=lambda g: (g[0], g[1]["job_id"]))
    out = [job_spec(job) for _, job in oldest]
    if len(out) >= limit:
        return out
    now, tp = r.parts.clock.now(), r.parts.placer.throughput
    for run in r.running(region):
        spread = len({a.node_id for a in run.assignments}) > 1
        if not spread or run.job_id in rooms or movable(run, now, r.config):
            continue
        if tp.relative_speed(run.job, run.gpu_model) >= SPREAD_GAIN * run.speed:
            out.append(run.job)
            if len(out) >= limit:
                break
    return out


def room_ready(r: DefragHost, region: str) -> list[str]:
    """Gangs of `region` whose node is free now (every mover left): release the room so
    the gang can take it, and try them first."""
    book, ready = r.parts.book, []
    for gang, room in list(book.rooms.items()):
        if room.region != region or any(r.pending(j) for j in room.movers):
            continue
        book.close_room(gang)
        ready.append(gang)
    return ready


def hold_room(r: DefragHost, mover: str) -> None:
    """A defragmentation mover left: hold its node's free GPUs for the gang (those it held
    already among them)."""
    book = r.parts.book
    for room in book.rooms.values():
        if mover in room.movers:
            state = book.state
            slot = state.slot_of(room.node)
            book.release_hold(room.hold)
            free = [g for g in range(int(state.gpu_count[slot])) if state.free_milli[slot, g] > 0]
            book.hold(
                room.hold,
                [Assignment(room.node, (g,), int(state.free_milli[slot, g])) for g in free],
            )


def drop_room(r: DefragHost, gang: str) -> None:
    """The gang was placed (or ended): its room is no longer needed."""
    r.parts.book.close_room(gang)
