"""An agent's loop over its topic: each event decoded inside `Runtime.guard`, then handled.

The guard dead-letters an event whose handling trips our logic, and the agent goes on with the
next one; an event that is not the expected, valid record is dead-lettered by `Runtime.decode`
and never handled. Agents that batch, or that count events outside the guard, keep their own
loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams.runtime.runtime import Runtime

__all__ = ["Handler", "guarded"]

Handler = Callable[[Any, dict[str, Any]], Awaitable[None]]  # (event, record)


def guarded(
    rt: Runtime, consumer: str, expected: str, handle: Handler
) -> Callable[[Any], Coroutine[Any, Any, None]]:
    """The body of a Faust agent that hands each usable `expected` record to `handle`."""

    async def agent(stream: Any) -> None:
        async for event in stream.events():
            async with rt.guard(event, consumer):
                record = await rt.decode(event, expected, consumer)
                if record is not None:
                    await handle(event, record)

    return agent
