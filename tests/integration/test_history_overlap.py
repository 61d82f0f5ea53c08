"""The sink inserts a batch while it decodes the next: offsets still commit in order, and only
once the rows they cover are in the store, also when an insert fails mid-stream.

Real broker, real chDB; the one failure is injected in front of the real insert (the store
refuses the second insert once), so it lands while the next poll is being decoded."""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from infra.config import Config
from infra.kafka import consumer, producer
from infra.store import StoreError, open_store
from infra.store import samples as S
from infra.topics import NODE_TELEMETRY
from schemas import SingleObjectCodec
from streams.history.sink import HistorySink

pytestmark = pytest.mark.integration

EVENTS = 30_000


def test_failed_overlapped_insert_leaves_its_offsets_uncommitted(config: Config) -> None:
    # a batch per poll (a few hundred events' rows): many inserts, each overlapping a decode
    config = dataclasses.replace(config, store=dataclasses.replace(config.store, flush_s=0.2))
    store = open_store(config, database=f"ovl_{uuid.uuid4().hex[:8]}")
    real_insert = store.insert_arrow
    calls: list[int] = []
    overlapped = threading.Event()  # an insert ran while the sink thread kept working

    def flaky_insert(table: str, data: Any) -> int:
        calls.append(data.num_rows)
        if len(calls) == 2:
            raise StoreError("refused (injected): the store is failing")
        rows = real_insert(table, data)
        if sink.stats.consumed > consumed_at_submit[-1]:
            overlapped.set()
        return rows

    store.insert_arrow = flaky_insert  # type: ignore[method-assign]
    sink = HistorySink(config, store=store, topics=[NODE_TELEMETRY])
    commits: list[tuple[int, int]] = []  # (offsets committed in all, of them stored) per commit
    consumed_at_submit = [0]
    real_commit, real_submit = sink._commit, sink._inserts.submit
    committed: dict[tuple[str, int], int] = {}

    def checked_commit(batch: Any) -> None:
        stored = {r[0] for r in store.query("SELECT DISTINCT event_id FROM node_telemetry").rows}
        real_commit(batch)  # the rows were in before the commit went out
        committed.update(batch.offsets)
        covered = [ids[tp][:offset] for tp, offset in committed.items()]
        commits.append((sum(map(len, covered)), sum(e in stored for c in covered for e in c)))

    def watched_submit(*args: Any) -> None:
        consumed_at_submit.append(sink.stats.consumed)
        real_submit(*args)

    sink._commit = checked_commit  # type: ignore[method-assign]
    sink._inserts.submit = watched_submit  # type: ignore[method-assign,assignment]
    prod, codec, now = producer(config.kafka), SingleObjectCodec(), int(time.time() * 1000)
    for i in range(EVENTS):
        rec = S.node_telemetry(f"n{i % 500}", "eu", now + i, [50.0] * 8)
        prod.produce(NODE_TELEMETRY, codec.encode("NodeTelemetry", rec), key=rec["node_id"])
        if i % 5000 == 0:
            prod.poll(0)
    prod.flush(30)
    ids = _event_ids_by_partition(config, codec)
    sink.start()
    try:
        deadline = time.monotonic() + 120
        while sink.stats.events_written < EVENTS:
            assert time.monotonic() < deadline and sink.error is None, sink.status()
            time.sleep(0.05)
        sink.stop()
        # every commit covered only events already stored; offsets only moved forward
        assert all(covered == stored for covered, stored in commits), commits
        assert [c for c, _ in commits] == sorted(c for c, _ in commits)
        assert commits[-1][0] == EVENTS
        assert sink.stats.insert_failures == 1 and len(calls) >= 3
        assert overlapped.is_set()  # the sink read on while an insert was in flight
        count = store.query("SELECT count(), uniqExact(event_id) FROM node_telemetry").rows
        assert [tuple(r) for r in count] == [(EVENTS * 8, EVENTS)]  # every event once
    finally:
        sink.stop()
        store.close()


def _event_ids_by_partition(config: Config, codec: SingleObjectCodec) -> dict[Any, list[str]]:
    """The event id at each offset of each telemetry partition (offsets start at 0)."""
    reader = consumer(config.kafka, f"ovl-read-{uuid.uuid4().hex[:8]}")
    reader.assign([TopicPartition(NODE_TELEMETRY, p, 0) for p in range(config.kafka.partitions)])
    ids: dict[Any, list[str]] = {}
    deadline, seen = time.monotonic() + 60, 0
    while seen < EVENTS and time.monotonic() < deadline:
        for msg in reader.consume(10_000, timeout=1):
            if msg.error() is None:
                tp = (msg.topic(), msg.partition())
                assert len(ids.setdefault(tp, [])) == msg.offset()
                ids[tp].append(codec.decode(msg.value(), topic=NODE_TELEMETRY)[1]["event_id"])
                seen += 1
    reader.close()
    assert seen == EVENTS
    return ids
