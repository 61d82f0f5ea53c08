"""The cancel agent: CancelRequests from `gpuflow.jobs.cancel`, checked and carried out by
`streams.scheduler.cancel.Cancels`; a refused one is dead-lettered with its reason.

`gpuflow.jobs.cancel` is keyed by job id, so with several workers the one that reads a request
may not own the job's region. Such a worker forwards the request's bytes, unchanged (a signed
request stays verifiable), to each partition of the topic it does not own, with a
`gpuflow-forwarded` header naming where the original was read; every partition number of every
topic belongs to one worker, so the job's owner reads one copy. A forwarded copy is never
forwarded again, and is checked as the original (its position), so a second copy that reaches the
same worker is a repeat, not a replayed request.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from infra.topics import JOBS_CANCEL
from schemas import DecodeError

if TYPE_CHECKING:
    import faust

    from streams.runtime.runtime import Runtime

__all__ = ["FORWARDED", "forward_to", "forwarded_from", "register_cancel"]

log = logging.getLogger(__name__)

FORWARDED = "gpuflow-forwarded"  # header on a forwarded copy: "partition:offset" of the original


def forwarded_from(
    headers: Sequence[tuple[str, bytes]] | Mapping[str, bytes] | None,
) -> tuple[int, int] | None:
    """Where a forwarded copy's original was read (partition, offset); None for an original.
    Faust gives headers as pairs or as a mapping."""
    pairs = headers.items() if isinstance(headers, Mapping) else (headers or ())
    for name, value in pairs:
        if (name.decode() if isinstance(name, bytes) else name) == FORWARDED:
            partition, _, offset = bytes(value).decode().partition(":")
            return int(partition), int(offset or -1)
    return None


def forward_to(partitions: int, read_from: int, owned: Collection[int]) -> list[int]:
    """The partitions a request this worker cannot serve goes to: those owned elsewhere."""
    return [p for p in range(partitions) if p != read_from and p not in owned]


def register_cancel(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> None:
    @app.agent(topics[JOBS_CANCEL], name="gpuflow.cancel")
    async def cancel(stream: Any) -> None:
        async for event in stream.events():
            try:
                async with rt.guard(event, "cancel"):
                    await _handle(rt, topics[JOBS_CANCEL], event)
            finally:  # handled or refused: the replay's lockstep counts it
                rt.handled["cancel"] = rt.handled.get("cancel", 0) + 1


async def _handle(rt: Runtime, topic: Any, event: Any) -> None:
    record = await rt.decode(event, "CancelRequest", "cancel")
    if record is None:
        return
    await rt.ensure_ready()
    message = event.message
    try:
        schema = rt.codec.writer(message.value)
    except DecodeError as exc:  # decoded a moment ago: not expected
        await rt.dead_letter(message, f"cancel refused: {exc}", "cancel")
        return
    key = message.key if isinstance(message.key, bytes) else None
    origin = forwarded_from(message.headers)
    position = (message.topic, *(origin or (message.partition, message.offset)))
    done = rt.scheduler.cancels.on_request(record, kafka_key=key, position=position, schema=schema)
    if done.refused is not None:
        rt.metrics.dead_lettered["cancel"] += 1
        await rt.dead_letter(message, f"cancel refused: {done.refused}", "cancel")
        return
    await rt.send_all(done.messages)
    if not done.held and origin is None:
        await _forward(rt, topic, message, record["job_id"])


async def _forward(rt: Runtime, topic: Any, message: Any, job_id: str) -> None:
    owned = rt.ownership.partitions() if rt.ownership is not None else frozenset()
    targets = forward_to(rt.config.kafka.partitions, message.partition, owned)
    header = [(FORWARDED, f"{message.partition}:{message.offset}".encode())]
    for partition in targets:
        await topic.send(key=message.key, value=message.value, partition=partition, headers=header)
    if targets:
        log.info("cancel forwarded job_id=%s to partitions %s", job_id, targets)
