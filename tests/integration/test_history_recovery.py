"""The sink survives a failing store: it holds the batch, retries, and commits only after."""

from __future__ import annotations

import dataclasses
import time
import uuid

import pytest
from confluent_kafka import TopicPartition

from infra.config import Config
from infra.kafka import consumer, producer
from infra.store import open_store
from infra.store import samples as S
from infra.store.migrations import load_migrations, statements
from infra.topics import GRID_SIGNALS
from schemas import SingleObjectCodec
from streams.history.sink import HistorySink

pytestmark = pytest.mark.integration


def _committed(config: Config, group: str) -> int:
    c = consumer(config.kafka, group)
    parts = [TopicPartition(GRID_SIGNALS, p) for p in range(config.kafka.partitions)]
    offsets = c.committed(parts, timeout=10)
    c.close()
    return sum(max(tp.offset, 0) for tp in offsets)


def test_insert_failure_is_retried_and_offsets_wait(config: Config) -> None:
    config = dataclasses.replace(config, store=dataclasses.replace(config.store, flush_s=0.2))
    store = open_store(config, database=f"rec_{uuid.uuid4().hex[:8]}")
    store.query("DROP TABLE grid_signals", write=True)  # the store refuses these inserts
    sink = HistorySink(config, store=store, topics=[GRID_SIGNALS]).start()
    try:
        prod, codec, now = producer(config.kafka), SingleObjectCodec(), int(time.time() * 1000)
        for i in range(3):
            rec = S.grid_signal("eu", now + i, carbon=100.0 + i)
            prod.produce(GRID_SIGNALS, codec.encode("GridSignal", rec), key=b"eu")
        prod.flush(10)
        deadline = time.monotonic() + 30
        while sink.stats.insert_failures < 2:
            assert time.monotonic() < deadline, sink.stats
            time.sleep(0.05)
        assert _committed(config, sink.group_id) == 0  # nothing committed while failing
        for stmt in statements(load_migrations()[0].sql):  # the table is back
            store.query(stmt, write=True)
        while sink.stats.events_written < 3:
            assert time.monotonic() < deadline, sink.stats
            time.sleep(0.05)
        assert store.query("SELECT count() FROM grid_signals").scalar() == 3
        assert _committed(config, sink.group_id) == 3
    finally:
        sink.stop()
        store.close()


def test_attach_history_runs_with_the_app_service(config: Config) -> None:
    """The service attach_history registers starts and stops the sink like the worker would."""
    import asyncio

    import faust

    from streams.history.attach import attach_history

    app = faust.App(f"{config.worker.app_id}-attach", broker="kafka://127.0.0.1:9")
    sink = attach_history(app, config)
    [service_cls] = app._extra_services

    async def lifecycle() -> None:
        service = service_cls()
        await service.start()
        prod, now = producer(config.kafka), int(time.time() * 1000)
        prod.produce(
            GRID_SIGNALS,
            SingleObjectCodec().encode("GridSignal", S.grid_signal("eu", now, carbon=1.0)),
            key=b"eu",
        )
        prod.flush(10)
        deadline = time.monotonic() + 30
        while sink.stats.events_written < 1:
            assert time.monotonic() < deadline, sink.stats
            await asyncio.sleep(0.05)
        assert sink.store.query("SELECT count() FROM grid_signals").scalar() == 1
        await service.stop()

    asyncio.run(lifecycle())
    with pytest.raises(Exception, match="not started"):
        _ = sink.store  # stopped: the store is closed and released
