"""gpuflow's own log broker with real clients: librdkafka (confluent-kafka) and aiokafka.

The rest of the integration suite runs on it with GPUFLOW_TEST_BROKER_ENGINE=logbroker; these
tests check what Tansu 0.6 `memory://` lacks: retention, compaction, DeleteRecords, an offset
out of range answered as one, and a bad record set refused without stopping the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.protocol.produce import ProduceRequest_v3
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.broker import EmbeddedBroker
from infra.config import BrokerConfig, KafkaConfig
from infra.kafka import consumer, producer

pytestmark = pytest.mark.integration


@pytest.fixture
def logbroker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(BrokerConfig(engine="logbroker"), tmp_path) as b:
        yield b


@pytest.fixture
def kafka(logbroker: EmbeddedBroker) -> KafkaConfig:
    return dataclasses.replace(KafkaConfig(), bootstrap_servers=logbroker.bootstrap_servers)


def _topic(kafka: KafkaConfig, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    name = f"lb-{uuid.uuid4().hex[:8]}"
    client = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    client.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result(10)
    return name


def _send(kafka: KafkaConfig, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
    """One batch per record: each its own produce request."""
    p = producer(kafka, **{"linger.ms": 0})
    for key, value in records:
        p.produce(topic, key=key, value=value)
        assert p.flush(10) == 0


Row = tuple[int | None, bytes | None, bytes | None]  # offset, key, value


def _read_all(kafka: KafkaConfig, topic: str, expect: int, timeout_s: float = 15) -> list[Row]:
    c = consumer(kafka, group_id=f"lb-{uuid.uuid4().hex[:8]}")
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    out: list[Row] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < expect and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                out.append((m.offset(), m.key(), m.value()))
        time.sleep(0.3)  # nothing more arrives after the expected ones
        while (m := c.poll(0.2)) is not None:
            if not m.error():
                out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def _until(check: Callable[[], bool], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.2)


def _low_watermark(kafka: KafkaConfig, topic: str) -> int:
    c = consumer(kafka, group_id=f"lb-{uuid.uuid4().hex[:8]}")
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[0])
    finally:
        c.close()


def test_a_compacted_topic_keeps_the_latest_value_of_each_key(kafka: KafkaConfig) -> None:
    # no lag: by default a record is safe from compaction for a minute, as behind Kafka's
    # active segment (tests/infra/test_logbroker_partition.py)
    topic = _topic(kafka, configs={"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
    records = [(f"k{i % 4}".encode(), f"v{i}".encode()) for i in range(40)]
    _send(kafka, topic, records)
    _send(kafka, topic, [(b"k9", b"only")])
    # compaction drops the batches of keys written again; the newest batch always stays
    _until(lambda: len(_read_all(kafka, topic, expect=5, timeout_s=2)) == 5)
    got = _read_all(kafka, topic, expect=5)
    assert {k: v for _, k, v in got} == {
        b"k0": b"v36",
        b"k1": b"v37",
        b"k2": b"v38",
        b"k3": b"v39",
        b"k9": b"only",
    }
    assert [o for o, _, _ in got] == [36, 37, 38, 39, 40]  # offsets keep their gaps


def test_retention_trims_the_head_and_a_stale_reader_starts_again_from_the_log_start(
    kafka: KafkaConfig,
) -> None:
    topic = _topic(kafka, configs={"retention.ms": "300"})
    _send(kafka, topic, [(b"k", b"old")] * 5)
    group = f"lb-{uuid.uuid4().hex[:8]}"
    reader = consumer(kafka, group_id=group)
    reader.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)  # behind
    reader.close()
    time.sleep(0.5)
    _send(kafka, topic, [(b"k", b"new")])
    _until(lambda: _low_watermark(kafka, topic) == 5)
    reader = consumer(kafka, group_id=group)  # its committed offset 1 is gone
    reader.subscribe([topic])
    try:
        deadline, seen = time.monotonic() + 15, list[tuple[int | None, bytes | None]]()
        while not seen and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and not m.error():
                seen.append((m.offset(), m.value()))
        assert seen == [(5, b"new")]  # OFFSET_OUT_OF_RANGE -> auto.offset.reset earliest
    finally:
        reader.close()


def test_delete_records_moves_the_log_start(kafka: KafkaConfig) -> None:
    topic = _topic(kafka)
    _send(kafka, topic, [(b"k", str(i).encode()) for i in range(6)])
    client = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    futures = client.delete_records([TopicPartition(topic, 0, 4)])
    [done] = futures.values()
    assert done.result(10).low_watermark == 4
    assert [o for o, _, _ in _read_all(kafka, topic, expect=2)] == [4, 5]


def test_a_group_of_two_librdkafka_consumers_splits_and_takes_over(kafka: KafkaConfig) -> None:
    topic = _topic(kafka, partitions=4)
    group = f"lb-{uuid.uuid4().hex[:8]}"
    members = [consumer(kafka, group_id=group) for _ in range(2)]
    assigned: list[set[int]] = [set(), set()]

    def track(i: int) -> tuple[Callable[..., None], Callable[..., None]]:
        def add(_: object, parts: list[TopicPartition]) -> None:
            assigned[i].update(p.partition for p in parts)

        def drop(_: object, parts: list[TopicPartition]) -> None:
            assigned[i].difference_update(p.partition for p in parts)

        return add, drop

    for i, c in enumerate(members):
        on_assign, on_revoke = track(i)
        c.subscribe(
            [topic],
            on_assign=on_assign,
            on_revoke=on_revoke,
        )
    try:
        deadline = time.monotonic() + 30
        while not (assigned[0] and assigned[1]) and time.monotonic() < deadline:
            for c in members:
                c.poll(0.1)
        assert assigned[0] | assigned[1] == {0, 1, 2, 3} and not assigned[0] & assigned[1]
        members[1].close()
        deadline = time.monotonic() + 30
        while assigned[0] != {0, 1, 2, 3} and time.monotonic() < deadline:
            members[0].poll(0.1)
        assert assigned[0] == {0, 1, 2, 3}
    finally:
        members[0].close()


def test_aiokafka_produces_and_consumes_in_a_group(kafka: KafkaConfig) -> None:
    topic = _topic(kafka, partitions=2)

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers, enable_idempotence=True)
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait(topic, str(i).encode(), key=str(i).encode())
        finally:
            await p.stop()
        c = AIOKafkaConsumer(
            topic,
            bootstrap_servers=kafka.bootstrap_servers,
            group_id=f"lb-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
        )
        await c.start()
        try:
            got: list[bytes] = []
            while len(got) < 20:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=200), 15)
                got += [m.value for msgs in batch.values() for m in msgs if m.value]
            await c.commit()
            return got
        finally:
            await c.stop()

    assert sorted(asyncio.run(run()), key=int) == [str(i).encode() for i in range(20)]


def test_a_malformed_record_set_is_refused_and_the_broker_goes_on(
    kafka: KafkaConfig, logbroker: EmbeddedBroker
) -> None:
    topic = _topic(kafka)
    request = ProduceRequest_v3(None, 1, 1000, [(topic, [(0, b"\x00" * 70)])])
    header = struct.pack(">hhih", 0, 3, 7, 4) + b"test"
    body = header + request.encode()
    with socket.create_connection(("127.0.0.1", logbroker.port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", s.recv(4))[0]
        reply = b""
        while len(reply) < size:
            reply += s.recv(size - len(reply))
    response = ProduceRequest_v3.RESPONSE_TYPE.decode(reply[4:])
    [(_, [(partition, error, *_)])] = response.topics
    assert (partition, error) == (0, KafkaError.INVALID_MSG)  # 2: CORRUPT_MESSAGE
    _send(kafka, topic, [(b"k", b"fine")])
    assert [v for _, _, v in _read_all(kafka, topic, expect=1)] == [b"fine"]


def test_a_fetch_is_held_until_its_min_bytes_are_there_or_its_wait_is_over(
    kafka: KafkaConfig,
) -> None:
    topic = _topic(kafka)
    c = consumer(
        kafka, group_id=f"lb-{uuid.uuid4().hex[:8]}",
        **{"fetch.min.bytes": 20_000, "fetch.wait.max.ms": 5000},
    )  # fmt: skip
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:

        def arrival(expect: int) -> tuple[float, int]:
            """Seconds until `expect` records are polled, and how many came."""
            t0, got = time.monotonic(), 0
            while got < expect and time.monotonic() - t0 < 12:
                m = c.poll(0.1)
                got += m is not None and not m.error()
            return time.monotonic() - t0, got

        c.poll(1.0)  # assigned; its first fetch is held at the log end
        _send(kafka, topic, [(b"small", b"x")])
        seconds, got = arrival(1)
        assert got == 1 and seconds >= 1.5, seconds  # held for its wait: 1 byte is not 20,000
        _send(kafka, topic, [(b"big", b"y" * 30_000)])
        seconds, got = arrival(1)
        assert got == 1 and seconds < 4.0, seconds  # answered once 20,000 bytes were there
    finally:
        c.close()
