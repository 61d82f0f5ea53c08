"""The worker's timers: liveness of its partitions, the scheduler's tick, stale nodes and region
summaries, the saved ledger, and the watches on the history store and the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import faust
from faust.exceptions import ConsumerNotStarted
from faust.types import TP

from infra.kafka import ensure_topics
from infra.topics import NODE_TELEMETRY
from streams.history.process import HistoryProcess
from streams.runtime.consumer_state import consumer_state, forget_offsets, unread
from streams.runtime.runtime import Runtime
from streams.worker.broker_watch import BrokerWatch

__all__ = ["register_timers", "telemetry_behind", "watch_broker", "watch_history"]


def watch_history(app: faust.App, rt: Runtime, history: HistoryProcess) -> None:
    @app.timer(rt.config.worker.summary_interval_s)
    async def watch_history() -> None:  # at most a 1 s HTTP call; scheduling does not wait
        rt.dependencies["history"] = await history.poll()


def watch_broker(app: faust.App, rt: Runtime) -> None:
    """Detect a broker that lost its log under us (streams.worker.broker_watch) and act on it."""
    watch = BrokerWatch(rt.config.kafka)
    rt.dependencies["broker"] = watch.status()

    @app.timer(1.0)
    async def remember_commits() -> None:
        with contextlib.suppress(ConsumerNotStarted):
            watch.remember(app.consumer._committed_offset)  # type: ignore[attr-defined]

    @app.timer(5.0)
    async def check_broker() -> None:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, watch.check)
        if found:
            watch.mark_lost(found)
            await rt.storage_lost(found)
            await loop.run_in_executor(None, ensure_topics, rt.config.kafka)
            for table in app.tables.values():  # Faust's changelogs are gone too
                await table.changelog_topic.declare()
            await forget_offsets(app.consumer, {TP(t, p) for t, p in found})
        rt.dependencies["broker"] = watch.status()


def telemetry_behind(app: faust.App, rt: Runtime) -> bool:
    """Whether telemetry waits on the broker or in the lane, not yet applied."""
    reader = rt.telemetry_reader
    if reader is None:
        return unread(consumer_state(app)["partitions"], NODE_TELEMETRY) > 0
    waiting = reader.batches is not None and not reader.batches.empty()
    return waiting or sum(reader.lag().values()) > 0


def register_timers(app: faust.App, rt: Runtime) -> None:
    if rt.config.worker.ledger_snapshot_s > 0:

        @app.timer(rt.config.worker.ledger_snapshot_s)
        async def snapshot_ledger() -> None:  # in a child process; the loop goes on
            await rt.snapshot_ledger()

    @app.timer(rt.config.worker.summary_interval_s)
    async def watch_partitions() -> None:
        with contextlib.suppress(ConsumerNotStarted):  # before the first assignment
            rt.stalls.observe(consumer_state(app)["partitions"])

    @app.timer(rt.config.worker.replan_interval_s)
    async def replan_timer() -> None:
        """The timer runs as a tick per region this worker holds, through the region's
        partition, so its table writes land where the region's events do."""
        if not rt._ready.is_set():
            return
        rt.reload_policy()  # a changed policy file takes effect
        if rt.config.worker.clock == "wall":
            await rt.send_all(rt.scheduler.ticks(int(time.time() * 1000)))

    @app.timer(rt.config.worker.summary_interval_s)
    async def summarise() -> None:
        if rt._ready.is_set():
            behind = telemetry_behind(app, rt)
            await rt.send_all(rt.fleet.mark_stale(behind=behind))
            await rt.send_all(rt.fleet.summaries())
