"""Micro-batches for the decision agents: what is already waiting is taken together.

An agent that takes one event at a time pays, per event, its readiness check, a queue pass
after each release, and a produce that the broker stores as a batch of its own. `batches`
hands the agent every event already fetched and waiting in its stream (up to `max_events`), so
under load those costs are paid once per batch, and the records a batch sends leave together
(one produce request, one stored batch per partition). It never waits for more: an event that
arrives alone is handed on at once, so a quiet stack decides as fast as before.

Events are acknowledged only after the agent has processed the whole batch (Faust commits
acknowledged offsets), so a crash mid-batch redelivers the batch: at-least-once, as before,
and every decision is idempotent. Order is kept: a batch is the stream's order, and each
region's events come from one partition.

Faust's own `Stream.take_events` waits up to a fixed time for a batch to fill, which adds that
time to every hop when the stack is quiet and wakes the agent on that timer when idle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

__all__ = ["batches"]


async def batches(
    stream: Any, max_events: int, on_batch: Callable[[int], None] | None = None
) -> AsyncIterator[list[Any]]:
    """The stream's events in batches of what was waiting (at most `max_events`), each
    acknowledged once the caller has finished with its batch; `on_batch(size)` sees each."""
    manual = stream.noack()
    queue = getattr(getattr(manual, "channel", None), "queue", None)
    batch: list[Any] = []
    async for event in manual.events():
        batch.append(event)
        if len(batch) < max_events and queue is not None and not queue.empty():
            continue  # more is already here: take it too
        batch = _current(manual, batch)
        if not batch:
            continue
        if on_batch is not None:
            on_batch(len(batch))
        yield batch
        for done in batch:
            await manual.ack(done)
        batch = []


def _current(stream: Any, batch: list[Any]) -> list[Any]:
    """The batch without events fetched before the latest rebalance.

    The stream skips such events itself, but one taken before the rebalance can wait in a
    batch for the next event, which may come after it. Left unacknowledged, it is read again
    by whoever owns its partition now (this worker too, from its committed offset).
    """
    generation = getattr(getattr(stream, "app", None), "consumer_generation_id", None)
    if generation is None:
        return batch
    return [e for e in batch if e.message.generation_id == generation]
