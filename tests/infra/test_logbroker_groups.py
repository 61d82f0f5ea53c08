"""The log broker's group coordinator: generations, leaders, rebalances and expiry."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from infra.logbroker.groups import (
    ILLEGAL_GENERATION,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    GroupCoordinator,
    JoinResult,
)

PROTOCOLS = [("range", b"meta")]


def _join(
    c: GroupCoordinator, member: str = "", rebalance_ms: int = 5000, session_ms: int = 6000
) -> Coroutine[Any, Any, JoinResult]:
    return c.join(
        "g", member, "client", "127.0.0.1", session_ms, rebalance_ms, "consumer", PROTOCOLS
    )


def test_a_lone_member_becomes_leader_and_gets_what_it_assigned() -> None:
    async def run() -> None:
        c = GroupCoordinator()
        r = await _join(c)
        assert (r.error, r.generation, r.leader) == (NONE, 1, r.member_id)
        assert r.members == ((r.member_id, b"meta"),)
        assert await c.sync("g", 1, r.member_id, [(r.member_id, b"all")]) == (NONE, b"all")
        assert c.heartbeat("g", 1, r.member_id) == NONE
        assert c.groups["g"].state == "Stable"

    asyncio.run(run())


def test_a_second_member_makes_the_first_rejoin_and_both_get_assignments() -> None:
    async def run() -> None:
        c = GroupCoordinator()
        first = await _join(c)
        await c.sync("g", 1, first.member_id, [(first.member_id, b"all")])
        second = asyncio.create_task(_join(c))
        await asyncio.sleep(0.01)
        assert c.heartbeat("g", 1, first.member_id) == REBALANCE_IN_PROGRESS
        again = await _join(c, first.member_id)
        joined = await second
        assert again.generation == joined.generation == 2
        assert again.leader == first.member_id and len(again.members) == 2
        assert joined.members == ()  # only the leader sees the members
        follower = asyncio.create_task(c.sync("g", 2, joined.member_id, []))
        await asyncio.sleep(0.01)
        assert not follower.done()  # waits for the leader's assignment
        plan = [(first.member_id, b"p0"), (joined.member_id, b"p1")]
        assert await c.sync("g", 2, first.member_id, plan) == (NONE, b"p0")
        assert await follower == (NONE, b"p1")
        assert c.heartbeat("g", 1, first.member_id) == ILLEGAL_GENERATION

    asyncio.run(run())


def test_a_member_that_does_not_rejoin_in_time_is_dropped() -> None:
    async def run() -> None:
        c = GroupCoordinator()
        first = await _join(c, rebalance_ms=200)
        await c.sync("g", 1, first.member_id, [])
        second = await asyncio.wait_for(_join(c, rebalance_ms=200), 2)  # first never rejoins
        assert second.generation == 2 and second.leader == second.member_id
        assert list(c.groups["g"].members) == [second.member_id]
        assert c.heartbeat("g", 2, first.member_id) == UNKNOWN_MEMBER_ID

    asyncio.run(run())


def test_leave_and_session_expiry_rebalance_the_rest() -> None:
    async def run() -> None:
        c = GroupCoordinator()
        a = await _join(c)
        b_task = asyncio.create_task(_join(c, session_ms=1000))
        await asyncio.sleep(0.01)
        a2, b = await asyncio.gather(_join(c, a.member_id), b_task)
        await asyncio.gather(
            c.sync("g", 2, a2.member_id, [(a.member_id, b"x"), (b.member_id, b"y")]),
            c.sync("g", 2, b.member_id, []),
        )
        assert c.leave("g", a.member_id) == NONE
        assert c.heartbeat("g", 2, b.member_id) == REBALANCE_IN_PROGRESS
        b2 = await _join(c, b.member_id, session_ms=1000)
        assert (b2.generation, b2.leader) == (3, b.member_id)
        await c.sync("g", 3, b.member_id, [])
        c.groups["g"].members[b.member_id].last_seen -= 2  # its session ran out
        c.expire()
        assert c.groups["g"].state == "Empty" and not c.groups["g"].members

    asyncio.run(run())


def test_commits_need_the_current_generation_unless_the_consumer_is_simple() -> None:
    async def run() -> None:
        c = GroupCoordinator()
        r = await _join(c)
        assert c.check_commit("g", 1, r.member_id) == NONE
        assert c.check_commit("g", 0, r.member_id) == ILLEGAL_GENERATION
        assert c.check_commit("g", 1, "stranger") == UNKNOWN_MEMBER_ID
        assert c.check_commit("other", -1, "") == NONE

    asyncio.run(run())
