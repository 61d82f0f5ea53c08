"""The consumer fixes in streams/worker/transport.py, on twins of aiokafka's fetcher and Faust's
app.

The crash test (tests/integration/test_crash.py) is what proves them on the real broker; these
pin the two rules: stream partitions stay paused through a rebalance until they were sought,
and records of a partition that is not active are never handed out (they are sought back).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from streams.worker.transport import _Consumer, _ConsumerThread, _pace

JOBS = [TP("jobs", 0), TP("jobs", 1)]
CHANGELOG = TP("app-reservations-changelog", 0)


class FetcherTwin:
    """aiokafka's Fetcher as `_fetch_records` uses it: every buffered record, whatever asked."""

    _closed = False

    def __init__(self, records: dict[TP, list[Any]]) -> None:
        self.records = records
        self.asked: list[Any] = []
        self._subscriptions = SimpleNamespace(fetch_context=contextlib.nullcontext)

    async def fetched_records(self, partitions: Any, timeout: Any, max_records: Any) -> Any:
        self.asked.append(partitions)
        return dict(self.records)


class KafkaConsumerTwin:
    _closed = False

    def __init__(self, fetcher: FetcherTwin) -> None:
        self._fetcher = fetcher
        self.sought: dict[TP, int] = {}

    def seek(self, tp: TP, offset: int) -> None:
        self.sought[tp] = offset


def _thread() -> _ConsumerThread:
    thread = object.__new__(_ConsumerThread)
    thread.consumer = SimpleNamespace(flow_active=True)  # type: ignore[assignment]
    return thread


def _records(tp: TP, *offsets: int) -> list[Any]:
    return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=o) for o in offsets]


def test_records_of_inactive_partitions_are_sought_back_not_handed_out() -> None:
    fetcher = FetcherTwin({JOBS[0]: _records(JOBS[0], 5, 6), JOBS[1]: _records(JOBS[1], 35, 36)})
    kafka = KafkaConsumerTwin(fetcher)
    active = {JOBS[0]}
    got = asyncio.run(_thread()._fetch_records(kafka, active, timeout=0.1, max_records=10))
    assert list(got) == [JOBS[0]]
    assert kafka.sought == {JOBS[1]: 35}


def test_an_empty_active_set_fetches_nothing() -> None:
    fetcher = FetcherTwin({JOBS[1]: _records(JOBS[1], 35)})
    kafka = KafkaConsumerTwin(fetcher)
    got = asyncio.run(_thread()._fetch_records(kafka, set(), timeout=0.01, max_records=10))
    assert got == {}
    assert fetcher.asked == []  # aiokafka would have read the empty set as "everything"
    assert kafka.sought == {}


def test_a_client_only_app_takes_every_record() -> None:
    fetcher = FetcherTwin({JOBS[1]: _records(JOBS[1], 35)})
    kafka = KafkaConsumerTwin(fetcher)
    got = asyncio.run(_thread()._fetch_records(kafka, None, timeout=0.01, max_records=10))
    assert list(got) == [JOBS[1]]


@contextlib.contextmanager
def _consumer(rebalancing: bool) -> Iterator[_Consumer]:
    consumer = object.__new__(_Consumer)
    consumer.app = SimpleNamespace(  # type: ignore[assignment]
        rebalancing=rebalancing, tables=SimpleNamespace(changelog_topics={CHANGELOG.topic})
    )
    consumer._active_partitions = set()
    consumer._paused_partitions = {*JOBS, CHANGELOG}
    consumer._held = set()
    consumer._sought = False
    consumer._read_offset = {}
    consumer._committed_offset = {}
    consumer.can_resume_flow = asyncio.Event()
    consumer.suspend_flow = asyncio.Event()
    consumer.assignment = lambda: {*JOBS, CHANGELOG}  # type: ignore[method-assign]

    async def seek_to_committed() -> dict[TP, int]:
        return {JOBS[0]: 3, JOBS[1]: 35}

    consumer.seek_to_committed = seek_to_committed  # type: ignore[method-assign]
    yield consumer


def test_stream_partitions_wait_through_recovery_for_the_seek() -> None:
    with _consumer(rebalancing=True) as consumer:
        consumer.resume_partitions([CHANGELOG])  # recovery reads the changelog at once
        assert consumer._active_partitions == {CHANGELOG}
        consumer.resume_partitions(JOBS)  # Faust resumes streams before it seeks them
        consumer.resume_flow()
        assert consumer._active_partitions == {CHANGELOG}, "streams resumed before the seek"
        asyncio.run(consumer.perform_seek())
        assert consumer._read_offset == {JOBS[0]: 3, JOBS[1]: 35}
        consumer.resume_flow()
        assert consumer._active_partitions == {CHANGELOG, *JOBS}
        assert not consumer._paused_partitions & set(JOBS)


def test_outside_a_rebalance_partitions_resume_at_once() -> None:
    with _consumer(rebalancing=False) as consumer:
        consumer.resume_partitions(JOBS)
        assert consumer._active_partitions == set(JOBS)


class PacedFetcherTwin:
    """aiokafka's Fetcher as `_pace` wraps it: one fetch request per call, its start recorded."""

    def __init__(self) -> None:
        self.started: list[float] = []

    async def _proc_fetch_request(self, assignment: Any, node_id: int, request: Any) -> bool:
        self.started.append(asyncio.get_running_loop().time())
        return True


def test_fetches_are_sent_at_most_once_per_interval_and_records_are_not_held() -> None:
    async def run() -> list[float]:
        fetcher = PacedFetcherTwin()
        consumer = SimpleNamespace(_fetcher=fetcher)
        _pace(consumer, 0.05)
        _pace(consumer, 0.05)  # installed once, not wrapped twice
        for _ in range(3):  # back to back, as while records keep arriving
            assert await consumer._fetcher._proc_fetch_request(None, 1, None) is True
        await asyncio.sleep(0.12)  # a quiet spell: the next fetch goes at once
        quiet = asyncio.get_running_loop().time()
        await consumer._fetcher._proc_fetch_request(None, 1, None)
        starts = fetcher.started
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        return [*gaps, starts[-1] - quiet]

    gaps = asyncio.run(run())
    assert all(gap >= 0.045 for gap in gaps[:2]), gaps
    assert gaps[-1] < 0.02, gaps


def test_a_consumer_not_started_yet_is_paced_once_it_has_a_fetcher() -> None:
    consumer = SimpleNamespace(_fetcher=None)
    _pace(consumer, 0.05)  # nothing to wrap yet; the next call will
    consumer._fetcher = PacedFetcherTwin()
    _pace(consumer, 0.05)
    assert getattr(consumer._fetcher, "_gpuflow_paced", False)
