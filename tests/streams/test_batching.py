"""`streams.worker.batching.batches` over an in-memory twin of a Faust stream (manual acks, a
queue)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from streams.worker.batching import batches

END = object()


class TwinStream:
    """What `batches` uses of a Faust stream: `noack()`, `events()`, `ack()`, `channel.queue`."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.channel = SimpleNamespace(queue=self.queue)
        self.acked: list[Any] = []

    def noack(self) -> TwinStream:
        return self

    async def events(self) -> AsyncIterator[Any]:
        while (event := await self.queue.get()) is not END:
            yield event

    async def ack(self, event: Any) -> None:
        self.acked.append(event)


def test_what_is_waiting_is_taken_together_and_acked_after_the_batch() -> None:
    async def run() -> tuple[list[list[int]], list[list[int]], list[int]]:
        stream, sizes = TwinStream(), list[int]()
        for i in range(5):
            stream.queue.put_nowait(i)
        seen, acked_before = [], []
        async for batch in batches(stream, 3, sizes.append):
            acked_before.append(list(stream.acked))  # nothing of this batch acked yet
            seen.append(batch)
            if len(seen) == 2:
                stream.queue.put_nowait(END)
        return seen, acked_before, sizes

    seen, acked_before, sizes = asyncio.run(run())
    assert seen == [[0, 1, 2], [3, 4]]  # at most max_events, in the stream's order
    assert acked_before == [[], [0, 1, 2]]
    assert sizes == [3, 2]


def test_an_event_that_arrives_alone_is_handed_on_at_once() -> None:
    async def run() -> list[list[int]]:
        stream, seen = TwinStream(), []

        async def later() -> None:
            stream.queue.put_nowait(0)
            await asyncio.sleep(0.05)
            stream.queue.put_nowait(1)
            stream.queue.put_nowait(2)
            await asyncio.sleep(0.05)
            stream.queue.put_nowait(END)

        feeder = asyncio.create_task(later())
        async for batch in batches(stream, 64):
            seen.append(batch)
        await feeder
        return seen

    assert asyncio.run(run()) == [[0], [1, 2]]


def test_a_batch_that_fails_is_not_acked() -> None:
    async def run() -> list[Any]:
        stream = TwinStream()
        for i in range(3):
            stream.queue.put_nowait(i)
        try:
            async for _ in batches(stream, 64):
                raise RuntimeError("the broker went away")
        except RuntimeError:
            pass
        return stream.acked

    assert asyncio.run(run()) == []  # redelivered after the restart: at least once


def test_a_stream_that_stops_mid_batch_acks_none_of_it() -> None:
    async def run() -> tuple[list[Any], list[Any]]:
        stream, seen = TwinStream(), []
        for item in (0, 1, END):  # the stop arrives with two events taken, none handed on
            stream.queue.put_nowait(item)
        async for batch in batches(stream, 64):
            seen.append(batch)
        return seen, stream.acked

    assert asyncio.run(run()) == ([], [])  # the next owner reads them again


def test_events_fetched_before_a_rebalance_are_left_for_their_owner() -> None:
    def event(n: int, generation: int) -> SimpleNamespace:
        return SimpleNamespace(n=n, message=SimpleNamespace(generation_id=generation))

    async def run() -> tuple[list[list[int]], list[int]]:
        stream = TwinStream()
        stream.app = SimpleNamespace(consumer_generation_id=2)  # type: ignore[attr-defined]
        for e in (event(0, 1), event(1, 2), event(2, 1)):
            stream.queue.put_nowait(e)
        seen = []
        async for batch in batches(stream, 64):
            seen.append([e.n for e in batch])
            stream.queue.put_nowait(END)
        return seen, [e.n for e in stream.acked]

    assert asyncio.run(run()) == ([[1]], [1])  # 0 and 2: not processed, not acknowledged
