"""Kafka client factories (confluent-kafka) and idempotent topic creation."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from infra.config import BrokerConfig, KafkaConfig
from infra.errors import BrokerError, ConfigError
from infra.topics import TOPICS, TopicSpec

__all__ = [
    "SECURITY_KEYS",
    "admin",
    "committed_offsets",
    "consumer",
    "end_offsets",
    "ensure_topics",
    "held_fetch",
    "producer",
    "ssl_context",
    "topic_config",
    "topic_offsets",
]

# The librdkafka keys (`[kafka.client]`, GPUFLOW_KAFKA_CLIENT_*) that also configure the
# worker's aiokafka clients (streams.worker.app._credentials): one set of keys for both.
SECURITY_KEYS = (
    "security.protocol",
    "sasl.mechanism",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)

log = logging.getLogger(__name__)


def producer(kafka: KafkaConfig, **overrides: Any) -> Producer:
    conf: dict[str, Any] = {"linger.ms": 2, "enable.idempotence": True, **kafka.client_conf()}
    conf.update(overrides)
    return Producer(conf)


def consumer(kafka: KafkaConfig, group_id: str, **overrides: Any) -> Consumer:
    conf: dict[str, Any] = {
        "group.id": group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": int(kafka.session_timeout_s * 1000),
        "fetch.wait.max.ms": kafka.fetch_wait_ms,
        **kafka.client_conf(),
    }
    conf.update(overrides)
    return Consumer(conf)


def held_fetch(broker: BrokerConfig, wait_ms: int, min_bytes: int) -> dict[str, int]:
    """Settings of a bulk reader that would rather fetch less often and more at a time: each
    fetch is held up to `wait_ms` until `min_bytes` are there, as Kafka and the log broker do.
    Tansu 0.6 lists every stored batch again several times while it holds a fetch short of its
    minimum and answers no sooner (docs/performance/telemetry.md), so on Tansu the minimum is 1.
    """
    least = 1 if broker.engine == "tansu" else min_bytes
    return {"fetch.wait.max.ms": wait_ms, "fetch.min.bytes": least}


def admin(kafka: KafkaConfig) -> AdminClient:
    return AdminClient(dict(kafka.client_conf()))


def ensure_topics(
    kafka: KafkaConfig, specs: Iterable[TopicSpec] = TOPICS, timeout_s: float = 15.0
) -> list[str]:
    """Create missing topics with their partition counts and compaction; return those created."""
    client = admin(kafka)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            wait_s = min(5.0, max(0.1, deadline - time.monotonic()))  # never past the deadline
            existing = set(client.list_topics(timeout=wait_s).topics)
            break
        except KafkaException as exc:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"cannot list topics on {kafka.bootstrap_servers}: {exc}"
                ) from exc
            time.sleep(0.2)
    wanted = [s for s in specs if s.name not in existing]
    if not wanted:
        return []
    new = [
        NewTopic(
            s.name,
            num_partitions=kafka.partitions,
            replication_factor=kafka.replication_factor,
            config=topic_config(s),
        )
        for s in wanted
    ]
    created = []
    for name, fut in client.create_topics(new, operation_timeout=10).items():
        try:
            fut.result()
            created.append(name)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):  # another process won the race
                raise BrokerError(f"cannot create topic {name}: {exc}") from exc
    log.info("topics created n=%d", len(created))
    return created


def topic_config(spec: TopicSpec) -> dict[str, str]:
    conf = {"cleanup.policy": "compact" if spec.compacted else "delete"}
    if spec.retention_ms is not None:
        conf["retention.ms"] = str(spec.retention_ms)
    return conf


def end_offsets(kafka: KafkaConfig, topic: str, timeout_s: float = 10.0) -> dict[int, int]:
    """The true end offset of every partition of `topic` (the next offset to be written).

    The embedded broker reports the high watermark as the base offset of the last batch + 1,
    which undercounts when that batch holds several records. So we start reading just before
    the reported mark and take the offset at which the consumer reaches end-of-partition.
    """
    c = consumer(
        kafka, group_id=f"gpuflow-ends-{time.monotonic_ns()}", **{"enable.partition.eof": True}
    )
    try:
        meta = c.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        reported = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            for p in meta.partitions
        }
        ends = {p: high for p, (_, high) in reported.items()}
        pending = {p for p, (low, high) in reported.items() if high > low}
        c.assign([TopicPartition(topic, p, max(0, ends[p] - 1)) for p in pending])
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in c.consume(10_000, timeout=0.2):
                partition, offset = int(msg.partition() or 0), int(msg.offset() or 0)
                error = msg.error()
                if error is None:
                    ends[partition] = max(ends[partition], offset + 1)
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[partition] = max(ends[partition], offset)
                    pending.discard(partition)
        if pending:
            raise BrokerError(f"end of {topic} partitions {sorted(pending)} not reached")
        return ends
    finally:
        c.close()


def read_to_end(
    kafka: KafkaConfig,
    topic: str,
    decode: Callable[[bytes], dict[str, Any] | None],
    timeout_s: float = 10.0,
) -> list[tuple[int, str, dict[str, Any]]]:
    """Every record of `topic` from each partition's start to its end, as (partition, key,
    record), oldest first within a partition: what a compacted topic holds now. `decode` returns
    None for a value to skip (undecodable: its consumer dead-letters it)."""
    c = consumer(
        kafka, group_id=f"gpuflow-read-{time.monotonic_ns()}", **{"enable.partition.eof": True}
    )
    out: list[tuple[int, str, dict[str, Any]]] = []
    try:
        meta = c.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if meta is None or meta.error is not None:
            return out
        c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        pending, deadline = set(meta.partitions), time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for msg in c.consume(1000, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                record = decode(msg.value() or b"")
                if record is not None:
                    key = (msg.key() or b"").decode(errors="replace")
                    out.append((int(msg.partition() or 0), key, record))
    finally:
        c.close()
    return out


def committed_offsets(kafka: KafkaConfig, group_id: str, topic: str) -> dict[int, int]:
    """Offsets `group_id` has committed on each partition of `topic` (absent: none yet).

    Only reads the group's commits: the consumer never subscribes, so it does not join it.
    """
    c = consumer(kafka, group_id=group_id)
    try:
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return {}
        asked = [TopicPartition(topic, p) for p in meta.partitions]
        return {tp.partition: tp.offset for tp in c.committed(asked, timeout=10) if tp.offset >= 0}
    finally:
        c.close()


def topic_offsets(kafka: KafkaConfig, topics: Iterable[str]) -> Mapping[str, int]:
    """Messages in each existing topic (sum over partitions of end - low watermark)."""
    c = consumer(kafka, group_id=f"gpuflow-offsets-{time.monotonic_ns()}")
    try:
        meta = c.list_topics(timeout=5).topics
        lows = {
            topic: sum(
                c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[0]
                for p in meta[topic].partitions
            )
            for topic in topics
            if topic in meta
        }
    finally:
        c.close()
    return {topic: sum(end_offsets(kafka, topic).values()) - low for topic, low in lows.items()}


def ssl_context(client: Mapping[str, str]) -> ssl.SSLContext:
    """A TLS context from librdkafka's ssl.* keys, for clients that want one (aiokafka).

    Verifies the broker against `ssl.ca.location` (else the system store), presents
    `ssl.certificate.location` + `ssl.key.location` when given (mutual TLS), and skips the
    host-name check only when `ssl.endpoint.identification.algorithm` is "none".
    """
    try:
        context = ssl.create_default_context(cafile=client.get("ssl.ca.location") or None)
        if client.get("ssl.certificate.location"):
            context.load_cert_chain(
                client["ssl.certificate.location"],
                client.get("ssl.key.location") or None,
                client.get("ssl.key.password") or None,
            )
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"kafka.client ssl.*: {exc}") from None
    if str(client.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        context.check_hostname = False
    return context
