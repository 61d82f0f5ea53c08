"""Consumer groups on the classic protocol: join, sync, heartbeat, leave, and their offsets.

States follow Kafka's coordinator: Empty -> PreparingRebalance (a member joined, left or
expired; every member must join again) -> CompletingRebalance (the generation is formed; the
leader's assignment is awaited) -> Stable. A rebalance completes as soon as every known member
has joined again, or when the longest rebalance timeout has passed, dropping those that did not.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass, field

__all__ = ["Group", "GroupCoordinator", "JoinResult", "Member"]

NONE = 0
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27

EMPTY, PREPARING, COMPLETING, STABLE = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
)


@dataclass(frozen=True, slots=True)
class JoinResult:
    error: int
    generation: int = -1
    protocol: str = ""
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()


@dataclass(slots=True)
class Member:
    member_id: str
    client_id: str
    host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_seen: float = field(default_factory=time.monotonic)
    join: asyncio.Future[JoinResult] | None = None
    sync: asyncio.Future[tuple[int, bytes]] | None = None
    assignment: bytes = b""


@dataclass(slots=True)
class Group:
    group_id: str
    state: str = EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict[str, Member] = field(default_factory=dict)
    offsets: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)
    deadline: asyncio.TimerHandle | None = None


class GroupCoordinator:
    """Every group of the broker, with their committed offsets."""

    def __init__(self) -> None:
        self.groups: dict[str, Group] = {}
        self._ids = itertools.count(1)

    def group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id)
        return g

    async def join(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        if not 1000 <= session_timeout_ms <= 30 * 60 * 1000:
            return JoinResult(INVALID_SESSION_TIMEOUT, member_id=member_id)
        g = self.group(group_id)
        if g.members and protocol_type != g.protocol_type:
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if g.members and not self._common_protocol(g, {name for name, _ in protocols}):
            return JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if member_id and member_id not in g.members:
            return JoinResult(UNKNOWN_MEMBER_ID, member_id=member_id)
        if not member_id:
            member_id = f"{client_id}-{next(self._ids)}"
        m = g.members.get(member_id)
        if m is None:
            m = g.members[member_id] = Member(
                member_id, client_id, host, session_timeout_ms, rebalance_timeout_ms, protocols
            )
        else:
            m.protocols, m.session_timeout_ms = protocols, session_timeout_ms
            m.rebalance_timeout_ms = rebalance_timeout_ms
        g.protocol_type = protocol_type
        m.last_seen = time.monotonic()
        if m.join is not None and not m.join.done():
            m.join.set_result(JoinResult(UNKNOWN_MEMBER_ID, member_id=member_id))  # superseded
        m.join = asyncio.get_running_loop().create_future()
        future = m.join
        if g.state != PREPARING:
            self._prepare(g)
        self._maybe_complete(g)
        return await future

    async def sync(
        self, group_id: str, generation: int, member_id: str, assignments: list[tuple[str, bytes]]
    ) -> tuple[int, bytes]:
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g else None
        if g is None or m is None:
            return UNKNOWN_MEMBER_ID, b""
        if generation != g.generation:
            return ILLEGAL_GENERATION, b""
        if g.state == PREPARING:
            return REBALANCE_IN_PROGRESS, b""
        m.last_seen = time.monotonic()
        if g.state == STABLE:
            return NONE, m.assignment
        if member_id == g.leader:
            given = dict(assignments)
            for other in g.members.values():
                other.assignment = given.get(other.member_id, b"")
                if other.sync is not None and not other.sync.done():
                    other.sync.set_result((NONE, other.assignment))
                other.sync = None
            g.state = STABLE
            return NONE, m.assignment
        m.sync = asyncio.get_running_loop().create_future()
        return await m.sync

    def heartbeat(self, group_id: str, generation: int, member_id: str) -> int:
        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g else None
        if g is None or m is None:
            return UNKNOWN_MEMBER_ID
        m.last_seen = time.monotonic()
        if g.state == PREPARING:
            return REBALANCE_IN_PROGRESS
        if generation != g.generation:
            return ILLEGAL_GENERATION
        return NONE

    def leave(self, group_id: str, member_id: str) -> int:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        self._remove(g, member_id)
        return NONE

    def check_commit(self, group_id: str, generation: int, member_id: str) -> int:
        """Whether a member may commit: simple consumers (generation -1) always may."""
        if generation < 0:
            return NONE
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return UNKNOWN_MEMBER_ID
        if generation != g.generation:
            return ILLEGAL_GENERATION
        return NONE

    def expire(self) -> None:
        """Drop members whose session ran out (those waiting in a join are not counted)."""
        now = time.monotonic()
        for g in list(self.groups.values()):
            for m in list(g.members.values()):
                waiting = m.join is not None and not m.join.done()
                if not waiting and now - m.last_seen > m.session_timeout_ms / 1000:
                    self._remove(g, m.member_id)

    def forget_topic(self, topic: str) -> None:
        for g in self.groups.values():
            for key in [k for k in g.offsets if k[0] == topic]:
                del g.offsets[key]

    def _remove(self, g: Group, member_id: str) -> None:
        m = g.members.pop(member_id)
        if m.join is not None and not m.join.done():
            m.join.set_result(JoinResult(UNKNOWN_MEMBER_ID))
        if m.sync is not None and not m.sync.done():
            m.sync.set_result((UNKNOWN_MEMBER_ID, b""))
        if g.members:
            if g.state != PREPARING:
                self._prepare(g)
            self._maybe_complete(g)
        else:
            self._cancel_deadline(g)
            g.state, g.leader, g.protocol = EMPTY, "", ""
            g.generation += 1

    def _prepare(self, g: Group) -> None:
        g.state = PREPARING
        for m in g.members.values():  # a follower waiting for the old assignment rejoins
            if m.sync is not None and not m.sync.done():
                m.sync.set_result((REBALANCE_IN_PROGRESS, b""))
            m.sync = None
        timeout = max(m.rebalance_timeout_ms for m in g.members.values()) / 1000
        self._cancel_deadline(g)
        g.deadline = asyncio.get_running_loop().call_later(timeout, self._complete, g, True)

    def _maybe_complete(self, g: Group) -> None:
        if g.state == PREPARING and all(
            m.join is not None and not m.join.done() for m in g.members.values()
        ):
            self._complete(g, False)

    def _complete(self, g: Group, timed_out: bool) -> None:
        if g.state != PREPARING:
            return
        self._cancel_deadline(g)
        if timed_out:  # those that did not join again are out
            for m in [m for m in g.members.values() if m.join is None or m.join.done()]:
                del g.members[m.member_id]
        g.generation += 1
        if not g.members:
            g.state, g.leader, g.protocol = EMPTY, "", ""
            return
        g.protocol = self._common_protocol(g, None) or ""
        if g.leader not in g.members:
            g.leader = next(iter(g.members))
        g.state = COMPLETING
        metadata = tuple(
            (m.member_id, dict(m.protocols).get(g.protocol, b"")) for m in g.members.values()
        )
        for m in g.members.values():
            assert m.join is not None
            m.last_seen = time.monotonic()
            m.join.set_result(
                JoinResult(
                    NONE,
                    g.generation,
                    g.protocol,
                    g.leader,
                    m.member_id,
                    metadata if m.member_id == g.leader else (),
                )
            )

    @staticmethod
    def _common_protocol(g: Group, extra: set[str] | None) -> str | None:
        """The first protocol of the first member that every member (and `extra`) supports."""
        members = list(g.members.values())
        if not members:
            return None
        for name, _ in members[0].protocols:
            if all(name in dict(m.protocols) for m in members) and (extra is None or name in extra):
                return name
        return None

    @staticmethod
    def _cancel_deadline(g: Group) -> None:
        if g.deadline is not None:
            g.deadline.cancel()
            g.deadline = None
