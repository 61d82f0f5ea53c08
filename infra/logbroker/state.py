"""The broker's topics and settings: what every request handler reads and changes."""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, field

from infra.logbroker.groups import GroupCoordinator
from infra.logbroker.partition import PartitionLog

__all__ = ["BrokerSettings", "BrokerState", "Topic"]

log = logging.getLogger(__name__)

PRODUCER_IDLE_MS = 15 * 60 * 1000
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    host: str = "127.0.0.1"
    port: int = 9092
    node_id: int = 0
    partitions: int = 4  # for a topic created on first use (as Tansu)
    auto_create: bool = True
    retention_ms: int = 10 * 60 * 1000  # -1: keep everything
    retention_bytes: int = -1  # per partition
    delete_retention_ms: int = 10 * 60 * 1000  # how long a compacted topic keeps a tombstone
    # how long a record of a compacted topic is safe from compaction (Kafka's active segment
    # gives readers that much and more): a reader this far behind still reads every record
    min_compaction_lag_ms: int = 60 * 1000
    cleanup_interval_ms: int = 2000


@dataclass(slots=True)
class Topic:
    name: str
    partitions: list[PartitionLog]
    configs: dict[str, str] = field(default_factory=dict)

    def setting(self, name: str, default: int) -> int:
        value = self.configs.get(name)
        return int(value) if value is not None else default

    @property
    def compacted(self) -> bool:
        return "compact" in self.configs.get("cleanup.policy", "delete")

    @property
    def deletes(self) -> bool:
        return "delete" in self.configs.get("cleanup.policy", "delete")


class BrokerState:
    """Topics, groups and idempotent-producer bookkeeping of one broker."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        # a Kafka cluster id names its storage; this broker's storage is new at each start, so
        # a client that remembers positions (the worker's ledger) sees the log was replaced
        self.cluster_id = f"gpuflow-embedded-{uuid.uuid4().hex[:12]}"
        self.topics: dict[str, Topic] = {}
        self.groups = GroupCoordinator()
        self.next_producer_id = 1000
        # (producer id, topic, partition) -> recent (base sequence, base offset), newest last;
        # dropped once the producer has not written there for PRODUCER_IDLE_MS (Kafka's
        # producer.id.expiration.ms, shorter: every `gpuflow submit` is a new producer)
        self.sequences: dict[tuple[int, str, int], list[tuple[int, int]]] = {}
        self.sequence_used_ms: dict[tuple[int, str, int], int] = {}

    @staticmethod
    def legal_name(name: str) -> bool:
        return bool(_LEGAL.match(name)) and name not in (".", "..")

    def create(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> Topic:
        topic = Topic(name, [PartitionLog() for _ in range(partitions)], dict(configs or {}))
        self.topics[name] = topic
        return topic

    def delete(self, name: str) -> None:
        del self.topics[name]
        self.groups.forget_topic(name)
        for key in [k for k in self.sequences if k[1] == name]:
            del self.sequences[key], self.sequence_used_ms[key]

    def report(self, top: int = 5) -> None:
        """Log what is stored: all topics, then the `top` largest (what memory is spent on)."""
        sizes = {
            name: (sum(p.size for p in t.partitions), sum(len(p.data) for p in t.partitions))
            for name, t in self.topics.items()
        }
        largest = sorted(sizes.items(), key=lambda kv: -kv[1][0])[:top]
        log.info(
            "stored topics=%d bytes=%d batches=%d largest=%s",
            len(sizes),
            sum(b for b, _ in sizes.values()),
            sum(n for _, n in sizes.values()),
            " ".join(f"{name}:{b}/{n}" for name, (b, n) in largest),
        )

    def clean(self) -> None:
        """Retention and compaction over every partition, and idle producers' sequences;
        called every cleanup interval."""
        now = int(time.time() * 1000)
        s = self.settings
        for key in [
            k for k, used in self.sequence_used_ms.items() if used < now - PRODUCER_IDLE_MS
        ]:
            del self.sequences[key], self.sequence_used_ms[key]
        for topic in self.topics.values():
            for log in topic.partitions:
                if topic.compacted and log.dirty():
                    log.compact(
                        now,
                        topic.setting("delete.retention.ms", s.delete_retention_ms),
                        topic.setting("min.compaction.lag.ms", s.min_compaction_lag_ms),
                    )
                if topic.deletes:
                    log.expire(
                        now,
                        topic.setting("retention.ms", s.retention_ms),
                        topic.setting("retention.bytes", s.retention_bytes),
                    )
