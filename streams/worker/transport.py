"""Faust's Kafka transport: a short fetch wait, two rebalance races closed, exact recovery ends.

Fetch wait: Faust hard-codes aiokafka's `fetch_max_wait_ms=1500`. A broker that holds a fetch
for its whole wait when no new data arrives (the embedded Tansu does) then adds up to 1.5 s per
hop. We keep Faust's driver and only shorten that wait, to `kafka.fetch_wait_ms` (50 ms).

Recovery race: at the end of table recovery Faust 0.15 (`Recovery.on_recovery_completed` and
`_resume_streams`) resumes the stream partitions *before* it seeks them back to their committed
offsets, while the consumer's flow is already running for the changelogs. Records fetched in
that gap reach streams that are still suspended, so they are skipped, yet the consumer's read
offset moves past them. After the seek the fetcher returns the same records again and the
consumer drops every one as already read (`DROPPED MESSAGE ROFF` at debug level). The partition
then makes no progress until the next restart. This happened in a third to a half of
kill-and-restart runs here. `_Consumer` holds stream partitions paused during a rebalance until
the seek has happened and flow resumes, so the first records they fetch are at the committed
offsets.

Stray records: aiokafka can hand out records of partitions Faust does not want right now (an
empty active set reads as "all"; a partition paused during the fetch). Faust drops them, but
aiokafka has moved past them, and a seek to an unchanged committed offset does not bring them
back. `_ConsumerThread` keeps only records of active partitions and seeks the others back.

Recovery ends: Faust restores a table up to the end offset the broker reports, and the embedded
broker reports the base offset of the last batch + 1; `_Consumer.highwaters` reads to the end.

Hand-off and pacing: `_Consumer._drain_messages` hands fetched records to the streams without
Faust's per-record `wait_first`, so a backlog reaches the streams' queues and the agents can
take it in batches (`streams.worker.batching`); `_pace` sends the consumer's fetches at most every
`kafka.fetch_interval_ms`, since on the embedded broker each fetch with data lists every stored
batch of the partitions it returns.

Leaving the group: on stop aiokafka sends LeaveGroup only from generation 1 on (Kafka's first),
but the embedded broker numbers generations from 0, so a stopping worker never left and its
partitions waited a session timeout. `_ConsumerThread` leaves from generation 0 too.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Iterable, Mapping
from typing import Any, cast

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as driver
from faust.types import TP

from infra.config import KafkaConfig
from infra.kafka import end_offsets

__all__ = ["GpuflowApp"]

log = logging.getLogger(__name__)


def _pace(consumer: Any, interval_s: float) -> None:
    """Send the consumer's fetches at most once per `interval_s` per broker.

    aiokafka sends the next fetch as soon as the last one returns, so while records keep
    arriving a consumer fetches as fast as they come, and on the embedded broker every fetch
    that returns data lists each returned partition's stored batches. The wait is taken before
    the request, so records already fetched reach the streams at once. A request built before
    a seek or a rebalance is discarded by aiokafka as usual (its offsets no longer match).
    """
    fetcher: Any = getattr(consumer, "_fetcher", None)
    fetch = getattr(fetcher, "_proc_fetch_request", None)
    if fetch is None or getattr(fetcher, "_gpuflow_paced", False):
        return  # not started yet (no fetcher), or paced already
    sent: dict[int, float] = {}

    async def paced(assignment: Any, node_id: int, request: Any) -> Any:
        loop = asyncio.get_running_loop()
        wait = sent.get(node_id, float("-inf")) + interval_s - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        sent[node_id] = loop.time()
        return await fetch(assignment, node_id, request)

    fetcher._proc_fetch_request = paced
    fetcher._gpuflow_paced = True


class _ConsumerThread(driver.AIOKafkaConsumerThread):
    fetch_max_wait_ms = 10
    fetch_interval_s = 0.0

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = self.fetch_max_wait_ms  # read when its Fetcher starts
        return consumer

    async def _fetch_records(
        self,
        consumer: Any,
        active_partitions: set[TP] | None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> Any:
        """Only records of partitions still active; any other is left to be fetched again.

        Faust passes its live set of active partitions (None: a client-only app takes all).
        aiokafka reads an empty set as "every partition", and hands out records of a partition
        paused while the fetch waited; Faust then drops both kinds, although aiokafka has
        already moved past them.
        """
        if self.fetch_interval_s > 0:
            _pace(consumer, self.fetch_interval_s)  # once its fetcher exists (after start)
        if active_partitions is not None and not active_partitions:
            await asyncio.sleep(min(timeout or 0.0, 0.05))
            return {}
        records = dict(
            await super()._fetch_records(
                consumer,
                active_partitions,  # type: ignore[arg-type]  # Faust passes None too
                timeout=timeout,
                max_records=max_records,
            )
        )
        if active_partitions is None:
            return records
        for tp in [tp for tp in records if tp not in active_partitions]:
            consumer.seek(tp, records.pop(tp)[0].offset)
        return records

    async def on_thread_stop(self) -> None:
        coordinator = getattr(self._consumer, "_coordinator", None)
        if coordinator is not None and coordinator.generation == 0:
            coordinator._maybe_leave_group = functools.partial(_leave_group, coordinator)
        await super().on_thread_stop()


async def _leave_group(coordinator: Any) -> None:
    """aiokafka's `_maybe_leave_group`, for a member of generation 0 (see module docs)."""
    from aiokafka.errors import KafkaError
    from aiokafka.protocol.group import LeaveGroupRequest

    if coordinator.generation >= 0 and coordinator._group_instance_id is None:
        try:
            await coordinator._send_req(
                LeaveGroupRequest(coordinator.group_id, coordinator.member_id)
            )
        except KafkaError as err:
            log.error("LeaveGroup request failed: %s", err)
        else:
            log.info("LeaveGroup request succeeded")
    coordinator.reset_generation()


class _Consumer(driver.Consumer):
    """Faust's consumer, with stream partitions held until recovery has sought them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._held: set[TP] = set()
        self._sought = False

    def _new_consumer_thread(self) -> driver.AIOKafkaConsumerThread:
        thread = _ConsumerThread(self, loop=self.loop, beacon=self.beacon)
        kafka = cast("GpuflowApp", self.app).kafka  # per thread: nothing leaks to other apps
        thread.fetch_max_wait_ms = kafka.fetch_wait_ms
        thread.fetch_interval_s = kafka.fetch_interval_ms / 1000
        return thread

    def resume_partitions(self, tps: Iterable[TP]) -> None:
        """During a rebalance (recovery included), only changelog partitions resume now."""
        tpset = set(tps)
        if self.app.rebalancing:
            streams = {tp for tp in tpset if not self._is_changelog_tp(tp)}
            if streams:
                self._held |= streams
                self._sought = False
                tpset -= streams
        super().resume_partitions(tpset)

    async def highwaters(self, *partitions: TP) -> Mapping[TP, int]:
        """End offsets to recover changelogs up to: read to the end, not just as reported.

        Faust restores a table until the reported end. The embedded broker reports the base
        offset of the last batch + 1, so a table lost the rest of that batch at every restart.
        """
        reported = dict(await super().highwaters(*partitions))
        kafka, loop = cast("GpuflowApp", self.app).kafka, asyncio.get_running_loop()
        for topic in sorted({tp.topic for tp in partitions}):
            ends = await loop.run_in_executor(None, end_offsets, kafka, topic)
            for tp in partitions:
                if tp.topic == topic and tp.partition in ends:
                    reported[tp] = max(reported.get(tp) or 0, ends[tp.partition])
        return reported

    async def perform_seek(self) -> None:
        await super().perform_seek()
        self._sought = True

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover
        """Faust 0.15's loop handing fetched records to the streams, one change: while flow
        is active, each record's callback is awaited directly.

        Faust races every record's callback against the flow's suspension with `wait_first`:
        four futures and an `asyncio.wait` per record, and a pass of the event loop between
        records, so a stream's queue never held more than the one record its agent was about
        to take, and `streams.worker.batching` found nothing waiting. The callback (flow control,
        producer back-pressure, decode, queue put) finishes without suspending unless a queue
        is full or the producer is backed up, where awaiting it is the back-pressure wanted.
        Once a rebalance has suspended the flow, records go Faust's way again.
        """
        callback, getmany = self.callback, self.getmany
        consumer_stopped, fetcher_stopped = self._stopped.is_set, fetcher._stopped.is_set
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        acks_enabled_for = self.app.topics.acks_enabled_for
        suspended = self.suspend_flow.is_set
        since_yield = 0
        try:
            while not (consumer_stopped() or fetcher_stopped()):
                self.diag.set_flag(CONSUMER_FETCHING)
                records = getmany(timeout=1.0)
                await self.sleep(0)
                if not self.should_stop:
                    async for tp, message in records:
                        since_yield += 1
                        if since_yield > 100:
                            await asyncio.sleep(0)
                            since_yield = 0
                        offset, read = message.offset, get_read_offset(tp)
                        if read is not None and offset < read:
                            continue  # read already (Faust logs it at dev level)
                        gap = offset - (read or 0)
                        if gap > 1 and read and acks_enabled_for(message.topic):
                            await self._add_gap(tp, read + 1, offset)
                        if self._commit_every is not None and self._n_acked >= self._commit_every:
                            self._n_acked = 0
                            await self.commit()
                        if suspended():
                            await self.wait_first(callback(message), self.suspend_flow.wait())
                        else:
                            await callback(message)
                        set_read_offset(tp, offset)
                    self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                return
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    def resume_flow(self) -> None:
        """Flow resumes; held stream partitions follow once they have been sought."""
        super().resume_flow()
        if self._held and self._sought:
            held, self._held = self._held & set(self.assignment()), set()
            super().resume_partitions(held)


class _Transport(driver.Transport):
    Consumer = _Consumer


class GpuflowApp(faust.App):
    """faust.App whose consumers wait at most `kafka.fetch_wait_ms` for new data, and whose
    table recovery reads changelogs to their true end (see `_Consumer`)."""

    def __init__(self, *args: Any, kafka: KafkaConfig, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kafka = kafka

    def _new_transport(self) -> Any:
        return _Transport(self.conf.broker_consumer, self, loop=self.loop)
