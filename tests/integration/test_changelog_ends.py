"""Table recovery reads a changelog to its true end on the real broker.

The embedded broker reports a partition's end as the base offset of its last batch + 1, and
Faust restores a table up to the reported end; the rest of the last batch was lost at every
restart. `_Consumer.highwaters` reads to the end instead.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka import TopicPartition as KafkaTP
from faust.types import TP

from infra.config import Config
from infra.kafka import ensure_topics, producer
from infra.topics import TopicSpec
from streams.worker.transport import _Consumer

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def test_recovery_targets_the_last_record_of_the_last_batch(config: Config, unique: str) -> None:
    topic = f"test-changelog-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "NodeInventory", compacted=True)])
    p = producer(config.kafka, **{"linger.ms": 200})  # one batch of ten
    for i in range(10):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=0)
    p.flush(10)

    async def ends() -> tuple[int, int]:
        kafka = AIOKafkaConsumer(bootstrap_servers=config.kafka.bootstrap_servers)
        await kafka.start()
        try:

            async def reported(*tps: TP) -> dict[TP, int]:
                return dict(await kafka.end_offsets([KafkaTP(t.topic, t.partition) for t in tps]))

            consumer = object.__new__(_Consumer)
            consumer.app = SimpleNamespace(kafka=config.kafka)  # type: ignore[assignment]
            consumer._thread = SimpleNamespace(highwaters=reported)  # type: ignore[assignment]
            tp = TP(topic, 0)
            return (await reported(tp))[tp], (await consumer.highwaters(tp))[tp]
        finally:
            await kafka.stop()

    as_reported, recovered_to = asyncio.run(ends())
    assert recovered_to == 10, f"the broker reported {as_reported}"
