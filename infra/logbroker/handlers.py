"""One coroutine per Kafka API: decoded request struct in, response struct out.

Requests and responses are aiokafka's protocol structs (`aiokafka.protocol`), which give every
non-flexible version of the APIs below; `VERSIONS` is what ApiVersions advertises, so clients
never send a flexible (tagged-field) request other than ApiVersions itself.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.protocol.api import Response
from aiokafka.protocol.struct import Struct

from infra.logbroker.partition import BatchError, PartitionLog, split_batches
from infra.logbroker.state import BrokerState

__all__ = ["VERSIONS", "Context", "api", "dispatch", "request_class", "respond"]

log = logging.getLogger(__name__)

NONE, OFFSET_OUT_OF_RANGE, CORRUPT_MESSAGE, UNKNOWN_TOPIC = 0, 1, 2, 3
INVALID_TOPIC, INVALID_PARTITIONS, TOPIC_EXISTS, INVALID_REQUEST = 17, 37, 36, 42
UNSUPPORTED_FOR_MESSAGE_FORMAT, NOT_COORDINATOR = 43, 16
TRANSACTIONS_UNSUPPORTED = 35

# api key -> (min, max) version served
VERSIONS: dict[int, tuple[int, int]] = {
    0: (3, 7),  # Produce (v2 record batches only)
    # Fetch: v7+ sessions are answered with session id 0 ("none": every fetch is full, as
    # KIP-227 allows); v10 is what librdkafka needs before it compresses with zstd
    1: (4, 10),
    2: (1, 3),  # ListOffsets
    3: (1, 5),  # Metadata
    8: (2, 3),  # OffsetCommit
    9: (1, 3),  # OffsetFetch
    10: (0, 1),  # FindCoordinator
    11: (0, 2),  # JoinGroup
    12: (0, 1),  # Heartbeat
    13: (0, 1),  # LeaveGroup
    14: (0, 1),  # SyncGroup
    15: (0, 1),  # DescribeGroups
    16: (0, 1),  # ListGroups
    18: (0, 2),  # ApiVersions
    19: (0, 3),  # CreateTopics
    20: (0, 3),  # DeleteTopics
    21: (0, 1),  # DeleteRecords
    22: (0, 0),  # InitProducerId (idempotence; no transactions)
    32: (0, 1),  # DescribeConfigs
}

_MODULES = ("admin", "metadata", "produce", "fetch", "offset", "group", "commit", "coordination")
_CLASSES: dict[tuple[int, int], type[Struct]] = {}


def request_class(api_key: int, version: int) -> type[Struct] | None:
    """aiokafka's request struct for (key, version), if that version is served."""
    if not _CLASSES:
        for name in (*_MODULES, "transaction"):
            module = importlib.import_module(f"aiokafka.protocol.{name}")
            for value in vars(module).values():
                if isinstance(value, type) and hasattr(value, "RESPONSE_TYPE"):
                    key = (getattr(value, "API_KEY"), getattr(value, "API_VERSION"))  # noqa: B009
                    _CLASSES[key] = value
    low, high = VERSIONS.get(api_key, (0, -1))
    return _CLASSES.get((api_key, version)) if low <= version <= high else None


@dataclass(frozen=True, slots=True)
class Context:
    state: BrokerState
    client_id: str
    host: str


Handler = Callable[[Context, int, Any], Awaitable[Response | None]]
_HANDLERS: dict[int, Handler] = {}


def api(key: int) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[key] = fn
        return fn

    return register


async def dispatch(ctx: Context, api_key: int, version: int, request: Any) -> Response | None:
    return await _HANDLERS[api_key](ctx, version, request)


def respond(api_key: int, version: int, *fields: Any) -> Response:
    cls = request_class(api_key, version)
    assert cls is not None
    response: Response = getattr(cls, "RESPONSE_TYPE")(*fields)  # noqa: B009
    return response


def _now_ms() -> int:
    return int(time.time() * 1000)


def _partition(ctx: Context, topic: str, partition: int) -> PartitionLog | None:
    t = ctx.state.topics.get(topic)
    if t is None or not 0 <= partition < len(t.partitions):
        return None
    return t.partitions[partition]


@api(18)
async def api_versions(ctx: Context, version: int, request: Any) -> Response:
    versions = [(k, lo, hi) for k, (lo, hi) in sorted(VERSIONS.items())]
    if version == 2:
        return respond(18, 2, NONE, versions, 0)
    return respond(18, version, NONE, versions)


@api(3)
async def metadata(ctx: Context, version: int, request: Any) -> Response:
    state, s = ctx.state, ctx.state.settings
    names = request.topics
    auto = s.auto_create and (version < 4 or bool(request.allow_auto_topic_creation))
    if names is None:
        names = list(state.topics)
    topics: list[Any] = []
    for name in names:
        t = state.topics.get(name)
        if t is None and auto and state.legal_name(name):
            t = state.create(name, s.partitions)
            log.info("topic %s created on first use (%d partitions)", name, s.partitions)
        if t is None:
            error = UNKNOWN_TOPIC if state.legal_name(name) else INVALID_TOPIC
            topics.append((error, name, False, []))
            continue
        node = [s.node_id]
        parts = [
            (NONE, p, s.node_id, node, node, *([[]] if version >= 5 else []))
            for p in range(len(t.partitions))
        ]
        topics.append((NONE, name, False, parts))
    brokers = [(s.node_id, s.host, s.port, None)]
    if version == 1:
        return respond(3, 1, brokers, s.node_id, topics)
    if version == 2:
        return respond(3, 2, brokers, state.cluster_id, s.node_id, topics)
    return respond(3, version, 0, brokers, state.cluster_id, s.node_id, topics)


@api(0)
async def produce(ctx: Context, version: int, request: Any) -> Response | None:
    state, now = ctx.state, _now_ms()
    if request.transactional_id is not None:
        tail = [-1] if version >= 5 else []
        results = [
            (name, [(p, TRANSACTIONS_UNSUPPORTED, -1, -1, *tail) for p, _ in parts])
            for name, parts in request.topics
        ]
        return respond(0, version, results, 0)
    results = []
    for name, parts in request.topics:
        out = []
        for p, records in parts:
            log_ = _partition(ctx, name, p)
            error, base = NONE, -1
            if log_ is None:
                error = UNKNOWN_TOPIC
            else:
                try:
                    base = _append(state, name, p, log_, records or b"", now)
                except BatchError as exc:
                    log.warning(
                        "produce to %s[%d] from %s refused: %s", name, p, ctx.client_id, exc
                    )
                    error = CORRUPT_MESSAGE
            row = (p, error, base, -1, *([log_.start if log_ else -1] if version >= 5 else []))
            out.append(row)
        results.append((name, out))
    if request.required_acks == 0:
        return None
    return respond(0, version, results, 0)


def _append(
    state: BrokerState, topic: str, p: int, log_: PartitionLog, records: bytes, now: int
) -> int:
    """Append every batch of a record set; a retried idempotent batch is answered, not stored."""
    first = -1
    for batch in split_batches(records):
        if batch.producer_id >= 0:
            key = (batch.producer_id, topic, p)
            recent = state.sequences.setdefault(key, [])
            state.sequence_used_ms[key] = now
            known = next((off for seq, off in recent if seq == batch.base_sequence), None)
            if known is not None:
                first = known if first < 0 else first
                continue
            base = log_.append(batch, now)
            recent.append((batch.base_sequence, base))
            del recent[:-5]  # Kafka keeps the last five batches per producer and partition
        else:
            base = log_.append(batch, now)
        first = base if first < 0 else first
    return first


@api(1)
async def fetch(ctx: Context, version: int, request: Any) -> Response:
    deadline = time.monotonic() + max(0, request.max_wait_time) / 1000
    at = 2 if version >= 9 else 1  # v9 puts the current leader epoch before the fetch offset
    wanted = [
        (name, [(row[0], row[at], row[-1]) for row in parts]) for name, parts in request.topics
    ]
    head = (0, NONE, 0) if version >= 7 else (0,)  # throttle, [error, session id 0: none]
    topics, size = _collect(ctx, wanted, request.max_bytes, version)
    need = max(1, request.min_bytes)
    if size < need:
        # held until `min_bytes` are there or the wait is over, as Kafka holds it; each new
        # batch is counted (cheaply) before the response is built again
        while (remaining := deadline - time.monotonic()) > 0 and await _wait_for_data(
            ctx, wanted, remaining
        ):
            if _pending(ctx, wanted, request.max_bytes) >= need:
                break
        topics, _ = _collect(ctx, wanted, request.max_bytes, version)
    return respond(1, version, *head, topics)


def _pending(ctx: Context, wanted: list[Any], max_bytes: int) -> int:
    """Bytes a fetch would return now (at most `max_bytes` past the first partition's)."""
    size = 0
    for name, parts in wanted:
        for p, offset, part_max in parts:
            log_ = _partition(ctx, name, p)
            if log_ is not None and log_.in_range(offset) and offset < log_.end:
                size += log_.pending(offset, part_max)
                if size >= max_bytes:
                    return size
    return size


def _collect(
    ctx: Context, wanted: list[Any], max_bytes: int, version: int
) -> tuple[list[Any], int]:
    topics, size = [], 0
    for name, parts in wanted:
        out = []
        for p, offset, part_max in parts:
            log_ = _partition(ctx, name, p)
            data, error = b"", NONE
            if log_ is None:
                error, end, start = UNKNOWN_TOPIC, -1, -1
            else:
                end, start = log_.end, log_.start
                if not log_.in_range(offset):
                    error = OFFSET_OUT_OF_RANGE
                elif offset < end and (not size or size < max_bytes):
                    # the first data of a response is whole however large; later ones fit
                    data = log_.read(offset, min(part_max, max_bytes - size) if size else part_max)
                    size += len(data)
            out.append((p, error, end, end, *([start] if version >= 5 else []), None, data))
        topics.append((name, out))
    return topics, size


async def _wait_for_data(ctx: Context, wanted: list[Any], timeout: float) -> bool:
    """Wait until one of the fetched partitions gets a batch, or `timeout`; whether one did."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    logs = [lg for name, parts in wanted for p, _, _ in parts if (lg := _partition(ctx, name, p))]
    for lg in logs:
        lg.waiters.append(future)
    try:
        await asyncio.wait_for(asyncio.shield(future), timeout)
        return True
    except TimeoutError:
        return False
    finally:
        for lg in logs:
            if future in lg.waiters:
                lg.waiters.remove(future)
        if not future.done():
            future.cancel()


def _per_partition(
    ctx: Context, topics: Any, row: Callable[[int, PartitionLog | None, Any], tuple[Any, ...]]
) -> list[Any]:
    """[(topic, [row(partition, its log or None, the request's value for it), ...]), ...]"""
    return [
        (name, [row(p, _partition(ctx, name, p), value) for p, value in parts])
        for name, parts in topics
    ]


@api(2)
async def list_offsets(ctx: Context, version: int, request: Any) -> Response:
    def offset(p: int, log_: PartitionLog | None, timestamp: int) -> tuple[Any, ...]:
        if log_ is None:
            return (p, UNKNOWN_TOPIC, -1, -1)
        if timestamp == -1:
            return (p, NONE, -1, log_.end)
        if timestamp == -2:
            return (p, NONE, -1, log_.start)
        return (p, NONE, timestamp, log_.offset_for_time(timestamp))

    topics = _per_partition(ctx, request.topics, offset)
    if version == 1:
        return respond(2, 1, topics)
    return respond(2, version, 0, topics)


@api(19)
async def create_topics(ctx: Context, version: int, request: Any) -> Response:
    state, results = ctx.state, []
    validate_only = bool(request.validate_only) if version >= 1 else False
    for name, partitions, _, _, configs in request.create_topic_requests:
        partitions = state.settings.partitions if partitions == -1 else partitions
        if not state.legal_name(name):
            error, message = INVALID_TOPIC, f"illegal topic name {name!r}"
        elif name in state.topics:
            error, message = TOPIC_EXISTS, f"topic {name!r} already exists"
        elif partitions < 1:
            error, message = INVALID_PARTITIONS, f"{partitions} partitions"
        else:
            error, message = NONE, None
            if not validate_only:
                state.create(name, partitions, dict(configs))
                log.info("topic %s created (%d partitions, %s)", name, partitions, dict(configs))
        results.append((name, error, message) if version >= 1 else (name, error))
    if version <= 1:
        return respond(19, version, results)
    return respond(19, version, 0, results)


@api(20)
async def delete_topics(ctx: Context, version: int, request: Any) -> Response:
    results = []
    for name in request.topics:
        if name in ctx.state.topics:
            ctx.state.delete(name)
            results.append((name, NONE))
        else:
            results.append((name, UNKNOWN_TOPIC))
    if version == 0:
        return respond(20, 0, results)
    return respond(20, version, 0, results)


@api(21)
async def delete_records(ctx: Context, version: int, request: Any) -> Response:
    def delete(p: int, log_: PartitionLog | None, offset: int) -> tuple[Any, ...]:
        if log_ is None:
            return (p, -1, UNKNOWN_TOPIC)
        if offset != -1 and not log_.in_range(offset):
            return (p, log_.start, OFFSET_OUT_OF_RANGE)
        log_.delete_before(log_.end if offset == -1 else offset)
        return (p, log_.start, NONE)

    return respond(21, version, 0, _per_partition(ctx, request.topics, delete))


@api(22)
async def init_producer_id(ctx: Context, version: int, request: Any) -> Response:
    if request.transactional_id is not None:
        return respond(22, 0, 0, TRANSACTIONS_UNSUPPORTED, -1, -1)
    ctx.state.next_producer_id += 1
    return respond(22, 0, 0, NONE, ctx.state.next_producer_id, 0)


@api(32)
async def describe_configs(ctx: Context, version: int, request: Any) -> Response:
    resources = []
    for row in request.resources:
        kind, name, keys = row[0], row[1], row[2]
        t = ctx.state.topics.get(name) if kind == 2 else None
        configs = dict(t.configs) if t else {}
        if keys is not None:
            configs = {k: v for k, v in configs.items() if k in keys}
        entries: list[Any] = [
            (k, v, False, False, False) if version == 0 else (k, v, False, 1, False, [])
            for k, v in sorted(configs.items())
        ]
        error = NONE if t is not None or kind != 2 else UNKNOWN_TOPIC
        resources.append((error, None, kind, name, entries))
    return respond(32, version, 0, resources)
