"""What the worker's Kafka consumer is doing, per assigned partition (the `/consumer/` page).

Faust keeps its own view (active/paused partitions, the last offset it handed to a stream, the
last offset it committed) on top of aiokafka's (position, highwater, paused). When a partition
stops making progress these two views are what tell why, so the page shows both side by side.
`StallWatch` turns them into the worker's liveness (the `/health/` page): records fetched but
not handed to their stream for `stall_after_s` mean the worker needs a restart.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["StallWatch", "consumer_state", "forget_offsets", "unread"]

log = logging.getLogger(__name__)


class StallWatch:
    """Partitions whose fetched records stopped reaching their stream.

    A partition is behind when aiokafka's position is past the next offset Faust handed on
    (`read_offset + 1 < position`, or nothing handed on at all). Being behind is normal while a
    stream works through its buffer; it is a stall when the handed-on offset has not moved
    for `after_s`.
    """

    def __init__(self, after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.after_s = after_s
        self._clock = clock
        self._since: dict[str, tuple[int | None, float]] = {}  # name -> (read_offset, since)
        self.stalled: list[str] = []

    def observe(self, partitions: Mapping[str, Mapping[str, Any]]) -> list[str]:
        """Feed one `consumer_state(...)["partitions"]`; the partitions stalled now."""
        now = self._clock()
        since: dict[str, tuple[int | None, float]] = {}
        for name, row in partitions.items():
            position, read = row.get("position"), row.get("read_offset")
            if not position or (read is not None and read + 1 >= position) or row.get("paused"):
                continue
            previous = self._since.get(name)
            since[name] = previous if previous and previous[0] == read else (read, now)
        self._since = since
        stalled = sorted(n for n, (_, t) in since.items() if now - t >= self.after_s)
        for name in set(stalled) - set(self.stalled):
            row = partitions[name]
            log.error(
                "partition %s stalled: records up to %s fetched, %s handed on, for %.0fs",
                name,
                row.get("position"),
                row.get("read_offset"),
                now - since[name][1],
            )
        self.stalled = stalled
        return stalled


def consumer_state(app: Any) -> dict[str, Any]:
    """{"flow_active", "partitions": {"topic/p": {...}}} for the worker's consumer."""
    consumer = app.consumer
    faust_active = consumer._active_partitions or set()
    inner = getattr(getattr(consumer, "_thread", None), "_consumer", None)
    assignment = None
    if inner is not None and inner._subscription.subscription is not None:
        assignment = inner._subscription.subscription.assignment
    out: dict[str, Any] = {}
    for tp in sorted(consumer.assignment()):
        row: dict[str, Any] = {
            "active": tp in faust_active,
            "paused": tp in consumer._paused_partitions,
            "read_offset": consumer._read_offset.get(tp),
            "committed": consumer._committed_offset.get(tp),
        }
        if assignment is not None and tp in assignment.tps:
            state = assignment.state_value(tp)
            row.update(
                kafka_paused=state.paused,
                position=state.position if state.has_valid_position else None,
                highwater=state.highwater,
            )
        out[f"{tp.topic}/{tp.partition}"] = row
    return {"flow_active": consumer.flow_active, "partitions": out}


def unread(partitions: Mapping[str, Mapping[str, Any]], topic: str) -> int:
    """Records of `topic` the broker holds past what the worker's streams were handed
    (`consumer_state(...)["partitions"]`; highwater as of the last fetch)."""
    total = 0
    for name, row in partitions.items():
        if name.rpartition("/")[0] != topic or row.get("highwater") is None:
            continue
        read = row.get("read_offset")
        done = read + 1 if read is not None else (row.get("committed") or 0)
        total += max(0, int(row["highwater"]) - int(done))
    return total


async def forget_offsets(consumer: Any, partitions: set[Any]) -> None:
    """Read `partitions` again from offset 0: the broker lost their log and starts anew.

    Faust skips records at or below the last offset it read and will not commit below the
    last offset it committed, so both are forgotten, with its acknowledgement bookkeeping.
    """
    for tp in partitions:
        for table in (consumer._gap, consumer._acked, consumer._acked_index):
            table.pop(tp, None)
        consumer._read_offset[tp] = None
        consumer._committed_offset[tp] = None
        if tp in consumer.assignment():
            await consumer.seek(tp, 0)
        log.warning("reading %s/%s again from offset 0", tp.topic, tp.partition)
