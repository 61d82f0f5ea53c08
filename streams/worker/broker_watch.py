"""Notices when the broker has lost its log under this worker.

A Kafka log never shrinks: a partition's end offset only grows. So if the broker reports an
end below an offset this worker itself committed there, the broker's storage was lost (the
embedded Tansu broker with `memory://` storage, restarted). Replaying that empty log would
tell the worker nothing was ever decided and nothing is running: rebuilding from it would
hand out GPUs that running jobs hold. The watch remembers the highest offset this worker
committed per partition (across rebalances) and compares it with the broker's ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from infra.config import KafkaConfig
from infra.errors import BrokerError
from infra.kafka import consumer, end_offsets

__all__ = ["BrokerWatch"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]


class BrokerWatch:
    """Our own commits per partition, checked against the broker's log ends."""

    def __init__(self, kafka: KafkaConfig) -> None:
        self.kafka = kafka
        self.own: dict[Partition, int] = {}
        self.lost: dict[str, dict[str, int]] = {}  # "topic/p" -> {"end", "committed"}
        self.lost_at: float | None = None
        self._consumer: Any = None

    def remember(self, committed: Mapping[Any, int | None]) -> None:
        """Fold in the consumer's committed offsets (TP -> next offset to read)."""
        for tp, offset in committed.items():
            if offset is not None and offset > 0:
                key = (str(tp.topic), int(tp.partition))
                self.own[key] = max(self.own.get(key, 0), int(offset))

    def check(self) -> dict[Partition, tuple[int, int]]:
        """Partitions whose log now ends before our commit: (end, committed). Blocking."""
        suspects: dict[str, dict[int, int]] = {}
        for (topic, partition), ours in sorted(self.own.items()):
            high = self._reported_end(topic, partition)
            if high is not None and high < ours:  # Tansu undercounts: confirm below
                suspects.setdefault(topic, {})[partition] = ours
        found: dict[Partition, tuple[int, int]] = {}
        for topic, ours_by_partition in suspects.items():
            try:
                ends = end_offsets(self.kafka, topic, timeout_s=5.0)
            except (BrokerError, KafkaException) as exc:
                log.warning("broker watch cannot read ends of %s: %s", topic, exc)
                continue
            for partition, ours in ours_by_partition.items():
                end = ends.get(partition, 0)
                if end < ours:
                    found[(topic, partition)] = (end, ours)
        return found

    def mark_lost(self, found: Mapping[Partition, tuple[int, int]]) -> None:
        """Record the loss (kept for /health/) and start counting from the new, empty log."""
        for (topic, partition), (end, ours) in found.items():
            self.lost[f"{topic}/{partition}"] = {"end": end, "committed": ours}
            self.own[(topic, partition)] = end
        if found and self.lost_at is None:
            self.lost_at = time.time()

    def status(self) -> dict[str, Any]:
        if not self.lost:
            return {"state": "ok"}
        return {
            "state": "storage_lost",
            "since_ms": int((self.lost_at or 0) * 1000),
            "partitions": dict(sorted(self.lost.items())),
            "action": "holding the reservations and decisions in memory; not rebuilding from "
            "the broker's log; restart agents and executors so they re-announce",
        }

    def _reported_end(self, topic: str, partition: int) -> int | None:
        if self._consumer is None:
            self._consumer = consumer(self.kafka, group_id=f"gpuflow-watch-{time.monotonic_ns()}")
        try:
            return int(
                self._consumer.get_watermark_offsets(TopicPartition(topic, partition), 2.0)[1]
            )
        except KafkaException as exc:  # the broker is away, or the topic is gone
            if "UNKNOWN_TOPIC" in str(exc) or "Unknown topic" in str(exc):
                return 0
            return None

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
