"""`streams.worker.guarded` on a real runtime and codec, over a twin of a Faust stream: usable
records are handled in order; undecodable or unexpected ones are dead-lettered unhandled; a
handler that trips our logic dead-letters that event and the agent goes on."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from infra.config import load_config
from infra.topics import DEADLETTER, GRID_SIGNALS
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.runtime.runtime import Runtime
from streams.scheduler.core import Scheduler
from streams.worker.guarded import guarded

CODEC = SingleObjectCodec()


class Letters:
    """The dead-letter topic's `send`, kept."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def send(self, key: bytes | None, value: bytes) -> None:
        self.sent.append(CODEC.decode(value)[1])


class Stream:
    """What the loop uses of a Faust stream: `events()`, each with a `message`."""

    def __init__(self, values: list[bytes]) -> None:
        self.values = values

    async def events(self) -> AsyncIterator[Any]:
        for offset, value in enumerate(self.values):
            message = SimpleNamespace(
                topic=GRID_SIGNALS, partition=0, offset=offset, key=b"eu", value=value
            )
            yield SimpleNamespace(message=message)


def grid(event_id: str, price: float) -> bytes:
    return CODEC.encode("GridSignal", {
        "event_id": event_id, "ts": 1, "region": "eu", "price_per_kwh": price,
        "carbon_g_per_kwh": 1.0,
    })  # fmt: skip


def test_records_are_handled_and_faults_dead_lettered_without_stopping(tmp_path: Path) -> None:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    rt = Runtime(load_config(env={}, data_dir=str(tmp_path)), CODEC, s)
    letters = Letters()
    rt.topics = {DEADLETTER: letters}
    handled: list[str] = []

    async def handle(event: Any, record: dict[str, Any]) -> None:
        if record["price_per_kwh"] < 0:
            raise ValueError("a negative price")
        handled.append(record["event_id"])

    values = [grid("g1", 0.1), b"\x00not avro", grid("bad", -1.0), grid("g2", 0.2)]
    asyncio.run(guarded(rt, "grid", "GridSignal", handle)(Stream(values)))

    assert handled == ["g1", "g2"]
    assert [(r["offset"], r["consumer"]) for r in letters.sent] == [(1, "grid"), (2, "grid")]
    assert "processing failed: ValueError: a negative price" in letters.sent[1]["error"]
    assert rt.metrics.consumed["grid"] == 4
