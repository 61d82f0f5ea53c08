"""The worker's telemetry processor: NodeTelemetry -> the fleet's arrays, protection, activity.

Two ways in, one way to apply (`FleetTracker.on_reports`):
  * the lane (`worker.telemetry_lane`, default): `streams.telemetry.reader` polls the owned
    partitions on a thread and decodes each poll column by column; here the rows that
    `telemetry_reports.acceptable` passes are applied as one batch, and every other message
    (another framing or schema version, a body the columns cannot read, a value validation
    refuses, a report of a region not seen yet) goes the generic way, one at a time: decoded,
    validated, dead-lettered with its reason or applied. Order is kept: a run of batch rows,
    then a generic message, then the next run.
  * a Faust agent, one event at a time (the lane off).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from infra.topics import NODE_TELEMETRY
from streams.runtime.runtime import LOGIC_FAULTS
from streams.telemetry.reader import RawBatch, TelemetryReader
from streams.telemetry.reports import Reports, acceptable

if TYPE_CHECKING:
    from streams.runtime.runtime import Runtime

__all__ = ["apply_batch", "register_telemetry"]

log = logging.getLogger(__name__)

CONSUMER = "telemetry"


def register_telemetry(app: Any, rt: Runtime, topics: dict[str, Any]) -> None:
    """The telemetry processor of this worker: the lane, or the Faust agent."""
    if not rt.config.worker.telemetry_lane:
        _register_agent(app, rt, topics)
        return
    reader = TelemetryReader(rt.config, rt.codec)
    rt.telemetry_reader = reader

    from mode import Service

    class TelemetryLaneService(Service):
        async def on_start(self) -> None:
            reader.start()
            self.add_future(_apply_forever(rt, reader))

        async def on_stop(self) -> None:
            await asyncio.get_running_loop().run_in_executor(None, reader.stop)

    app.service(TelemetryLaneService)

    @app.timer(0.5)
    async def follow_ownership() -> None:
        """Read the telemetry of the regions this worker owns now (the first batch after a
        rebalance waits for the worker's state to be rebuilt, as every event does)."""
        if rt.ownership is not None:
            reader.assign(rt.ownership.partitions())


def _register_agent(app: Any, rt: Runtime, topics: dict[str, Any]) -> None:
    @app.agent(topics[NODE_TELEMETRY], name="gpuflow.telemetry")
    async def telemetry(stream: Any) -> None:
        async for event in stream.events():
            await apply_one(rt, event)


async def apply_one(rt: Runtime, event: Any) -> None:
    """One message the generic way: decode, validate (or dead-letter), apply."""
    async with rt.guard(event, CONSUMER):
        record = await rt.decode(event, "NodeTelemetry", CONSUMER)
        if record is not None:
            rt.metrics.telemetry(record["ts"])
            await rt.ensure_ready(fleet=False)
            await _apply(rt, Reports.from_records([record]))


async def _apply(rt: Runtime, reports: Reports) -> None:
    out = rt.fleet.on_reports(reports)
    rt.activity.on_telemetry(reports, rt.scheduler.state)
    await rt.send_all(out)


async def _apply_forever(rt: Runtime, reader: TelemetryReader) -> None:
    assert reader.batches is not None
    while True:
        batch = await reader.batches.get()
        while True:  # not applied, not committed: a rebuild that fails is tried again
            try:
                await rt.ensure_ready(fleet=False)
                break
            except Exception:
                log.exception("telemetry lane waits for the worker's state")
                await asyncio.sleep(1.0)
        try:
            await apply_batch(rt, batch, reader.assigned)
        except Exception as exc:  # e.g. the broker refused a decision: the lane goes on
            reader.error = f"applying a batch failed: {type(exc).__name__}: {exc}"
            log.exception("telemetry lane: a batch of %d messages failed", len(batch))
        finally:
            reader.done(batch)


class _Event:
    """What `Runtime.guard` and `Runtime.decode` read of an event."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        self.message = message


async def apply_batch(rt: Runtime, batch: RawBatch, owned: frozenset[int]) -> None:
    """Apply a poll in order: runs of rows the columns read and validation passes at once,
    every other message of an owned partition the generic way."""
    mine = np.isin(batch.partitions, list(owned))
    fast = np.zeros(len(batch), bool)
    if batch.columns is not None:
        passes = acceptable(batch.columns, rt.rules)
        fast[batch.taken] = passes
    fast &= mine
    row_of = np.cumsum(batch.taken) - 1  # message -> its row in the columns
    start = 0
    while start < len(batch):
        if not mine[start]:
            start += 1
        elif fast[start]:
            end = start + int(np.argmin(fast[start:])) if not fast[start:].all() else len(batch)
            await _apply_rows(rt, batch, row_of[start:end], range(start, end))
            start = end
        else:
            await apply_one(rt, _Event(batch.message(start)))
            start += 1


async def _apply_rows(rt: Runtime, batch: RawBatch, rows: Any, messages: range) -> None:
    assert batch.columns is not None
    keep = np.zeros(len(batch.columns.ok), bool)
    keep[rows] = True
    try:
        reports = Reports.from_columns(batch.columns, keep)
        await _apply(rt, reports)
    except LOGIC_FAULTS:  # a fault of our logic: find the message behind it, one at a time
        log.exception("telemetry batch failed; applying its messages one at a time")
        for i in messages:
            await apply_one(rt, _Event(batch.message(i)))
        return
    rt.consumed(CONSUMER, len(reports))
    rt.metrics.telemetry(*reports.ts.tolist())
