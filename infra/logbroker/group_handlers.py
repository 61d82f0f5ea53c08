"""The group coordinator's APIs: find, join, sync, heartbeat, leave, offsets, describe, list."""

from __future__ import annotations

from typing import Any

from aiokafka.protocol.api import Response

from infra.logbroker.handlers import NONE, Context, api, respond

__all__: list[str] = []


@api(10)
async def find_coordinator(ctx: Context, version: int, request: Any) -> Response:
    s = ctx.state.settings
    if version == 0:
        return respond(10, 0, NONE, s.node_id, s.host, s.port)
    return respond(10, 1, 0, NONE, None, s.node_id, s.host, s.port)


@api(11)
async def join_group(ctx: Context, version: int, request: Any) -> Response:
    rebalance_ms = request.rebalance_timeout if version >= 1 else request.session_timeout
    r = await ctx.state.groups.join(
        request.group,
        request.member_id,
        ctx.client_id,
        ctx.host,
        request.session_timeout,
        rebalance_ms,
        request.protocol_type,
        list(request.group_protocols),
    )
    body = (r.error, r.generation, r.protocol, r.leader, r.member_id, list(r.members))
    return respond(11, version, *((0, *body) if version >= 2 else body))


@api(14)
async def sync_group(ctx: Context, version: int, request: Any) -> Response:
    error, assignment = await ctx.state.groups.sync(
        request.group, request.generation_id, request.member_id, list(request.group_assignment)
    )
    return respond(14, version, *((0, error, assignment) if version >= 1 else (error, assignment)))


@api(12)
async def heartbeat(ctx: Context, version: int, request: Any) -> Response:
    error = ctx.state.groups.heartbeat(request.group, request.generation_id, request.member_id)
    return respond(12, version, *((0, error) if version >= 1 else (error,)))


@api(13)
async def leave_group(ctx: Context, version: int, request: Any) -> Response:
    error = ctx.state.groups.leave(request.group, request.member_id)
    return respond(13, version, *((0, error) if version >= 1 else (error,)))


@api(8)
async def offset_commit(ctx: Context, version: int, request: Any) -> Response:
    groups = ctx.state.groups
    error = groups.check_commit(
        request.consumer_group, request.consumer_group_generation_id, request.consumer_id
    )
    offsets = groups.group(request.consumer_group).offsets
    topics = []
    for name, parts in request.topics:
        out = []
        for p, offset, meta in parts:
            if error == NONE:
                offsets[(name, p)] = (offset, meta or "")
            out.append((p, error))
        topics.append((name, out))
    return respond(8, version, *((0, topics) if version >= 3 else (topics,)))


@api(9)
async def offset_fetch(ctx: Context, version: int, request: Any) -> Response:
    group = ctx.state.groups.groups.get(request.consumer_group)
    offsets = group.offsets if group else {}
    wanted = request.topics
    if wanted is None:  # v2+: every partition the group committed
        by_topic: dict[str, list[int]] = {}
        for name, p in offsets:
            by_topic.setdefault(name, []).append(p)
        wanted = sorted(by_topic.items())
    topics = []
    for name, parts in wanted:
        out: list[Any] = []
        for p in parts:
            offset, meta = offsets.get((name, p), (-1, ""))
            out.append((p, offset, meta, NONE))
        topics.append((name, out))
    if version == 1:
        return respond(9, 1, topics)
    if version == 2:
        return respond(9, 2, topics, NONE)
    return respond(9, version, 0, topics, NONE)


@api(15)
async def describe_groups(ctx: Context, version: int, request: Any) -> Response:
    out: list[Any] = []
    for group_id in request.groups:
        g = ctx.state.groups.groups.get(group_id)
        if g is None:
            out.append((NONE, group_id, "Dead", "", "", []))
            continue
        members = [
            (m.member_id, m.client_id, m.host, dict(m.protocols).get(g.protocol, b""), m.assignment)
            for m in g.members.values()
        ]
        out.append((NONE, group_id, g.state, g.protocol_type, g.protocol, members))
    return respond(15, version, *((0, out) if version >= 1 else (out,)))


@api(16)
async def list_groups(ctx: Context, version: int, request: Any) -> Response:
    groups = [(g.group_id, g.protocol_type) for g in ctx.state.groups.groups.values()]
    return respond(16, version, *((0, NONE, groups) if version >= 1 else (NONE, groups)))
