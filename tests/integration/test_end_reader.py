"""True log ends through one reused reader, and the broker watch's checks on a healthy log.

The embedded broker reports a partition's end as the base offset of its last batch + 1, so a
log whose last batch holds several records looks shorter than what a consumer committed. The
broker watch confirms every such case by reading to the end; it now does so with one consumer
for all its checks, which must give the same ends as a fresh consumer every time.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from infra.config import Config
from infra.kafka import end_offsets, end_reader, ensure_topics, producer
from infra.topics import TopicSpec
from streams.broker_watch import BrokerWatch

pytestmark = pytest.mark.integration


def _batch(config: Config, topic: str, partition: int, n: int) -> None:
    p = producer(config.kafka, **{"linger.ms": 200})  # one batch of n
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=partition)
    p.flush(10)


def test_a_reused_reader_reads_true_ends_again_and_again(config: Config, unique: str) -> None:
    topic = f"test-ends-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "JobEvent")])
    reader = end_reader(config.kafka)
    try:
        empty = dict.fromkeys(range(config.kafka.partitions), 0)
        assert end_offsets(config.kafka, topic, reader=reader) == empty
        _batch(config, topic, 0, 10)
        assert end_offsets(config.kafka, topic, reader=reader) == {**empty, 0: 10}
        _batch(config, topic, 1, 7)
        _batch(config, topic, 0, 5)
        reported = reader.get_watermark_offsets(TopicPartition(topic, 0), 5.0)[1]
        assert reported < 15, "the broker no longer undercounts: the confirmation is moot"
        assert end_offsets(config.kafka, topic, reader=reader) == {**empty, 0: 15, 1: 7}
        assert end_offsets(config.kafka, topic) == {**empty, 0: 15, 1: 7}  # a fresh one agrees
        assert reader.assignment() == []  # left unassigned for the next caller
    finally:
        reader.close()


def test_the_watch_finds_no_loss_where_the_last_batch_is_undercounted(
    config: Config, unique: str
) -> None:
    topic = f"test-watch-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "JobEvent")])
    _batch(config, topic, 0, 10)
    watch = BrokerWatch(config.kafka)
    try:
        watch.remember({TopicPartition(topic, 0): 10})  # committed after the whole batch
        for _ in range(3):  # the same reader each time
            assert watch.check() == {}
        watch.remember({TopicPartition(topic, 0): 12})  # more than the log holds: lost
        assert watch.check() == {(topic, 0): (10, 12)}
    finally:
        watch.close()
