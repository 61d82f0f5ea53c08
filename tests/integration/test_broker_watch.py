"""The broker watch's checks on a healthy log whose last batch the broker undercounts.

The embedded broker reports a partition's end as the base offset of its last batch + 1, so a
log whose last batch holds several records looks shorter than what a consumer committed. The
broker watch confirms every such case by reading to the end with a fresh consumer: no loss is
reported there, and a real one (a commit past the true end) is.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from infra.config import Config
from infra.kafka import ensure_topics, producer
from infra.topics import TopicSpec
from streams.worker.broker_watch import BrokerWatch

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def _batch(config: Config, topic: str, partition: int, n: int) -> None:
    p = producer(config.kafka, **{"linger.ms": 200})  # one batch of n
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=partition)
    p.flush(10)


def test_the_watch_finds_no_loss_where_the_last_batch_is_undercounted(
    config: Config, unique: str
) -> None:
    topic = f"test-watch-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "JobEvent")])
    _batch(config, topic, 0, 10)
    watch = BrokerWatch(config.kafka)
    try:
        watch.remember({TopicPartition(topic, 0): 10})  # committed after the whole batch
        for _ in range(3):
            assert watch.check() == {}
        watch.remember({TopicPartition(topic, 0): 12})  # more than the log holds: lost
        assert watch.check() == {(topic, 0): (10, 12)}
    finally:
        watch.close()
