"""The cancel agent: CancelRequests from `gpuflow.jobs.cancel`, checked and carried out by
`streams.scheduler.cancel.Cancels`; a refused one is dead-lettered with its reason."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from infra.topics import JOBS_CANCEL
from schemas import DecodeError

if TYPE_CHECKING:
    import faust

    from streams.runtime.runtime import Runtime

__all__ = ["register_cancel"]


def register_cancel(app: faust.App, rt: Runtime, topics: dict[str, Any]) -> None:
    @app.agent(topics[JOBS_CANCEL], name="gpuflow.cancel")
    async def cancel(stream: Any) -> None:
        async for event in stream.events():
            try:
                async with rt.guard(event, "cancel"):
                    await _handle(rt, event)
            finally:  # handled or refused: the replay's lockstep counts it
                rt.handled["cancel"] = rt.handled.get("cancel", 0) + 1


async def _handle(rt: Runtime, event: Any) -> None:
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
    position = (message.topic, message.partition, message.offset)
    done = rt.scheduler.cancels.on_request(record, kafka_key=key, position=position, schema=schema)
    if done.refused is not None:
        rt.metrics.dead_lettered["cancel"] += 1
        await rt.dead_letter(message, f"cancel refused: {done.refused}", "cancel")
        return
    await rt.send_all(done.messages)
