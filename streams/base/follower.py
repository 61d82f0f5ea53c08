"""Following a whole topic in a thread: every partition, no consumer group, latest state kept.

The worker's views of what other processes publish (region summaries of regions it does not
own, the latest demand forecasts) are read this way: a plain confluent-kafka consumer assigned
every partition, decoding each record and handing it to `apply`; undecodable records are
skipped (the history sink dead-letters them), and the thread ends with the worker.

A subclass picks where to begin (`start_offsets`) and, when it must know what the topic
already holds before the worker acts, which partitions to read to their end first
(`catch_up`); `wait_caught_up` blocks on that, bounded, and never on a broken reader.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_END, KafkaError, KafkaException, Message, TopicPartition

from infra.config import Config
from infra.kafka import consumer
from schemas import Codec, CodecError

__all__ = ["TopicFollower"]

log = logging.getLogger(__name__)


class TopicFollower:
    """Subclasses name the `topic` and implement `apply`; `start_offsets` picks where to begin."""

    topic = ""
    name = "follower"  # thread name and consumer group suffix

    def __init__(self, config: Config, codec: Codec) -> None:
        self.config = config
        self.codec = codec
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._thread: threading.Thread | None = None

    def apply(self, record: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def start_offsets(self, c: Any, partitions: list[int]) -> list[TopicPartition]:
        """Where to begin reading: by default at the end (only what comes next)."""
        return [TopicPartition(self.topic, p, OFFSET_END) for p in partitions]

    def catch_up(self, assigned: list[TopicPartition]) -> set[int]:
        """Partitions to read to their end before `wait_caught_up` returns (default: none)."""
        return set()

    def wait_caught_up(self, timeout_s: float) -> bool:
        """Block until the records already in the topic have been read (bounded)."""
        done = self._caught_up.wait(timeout_s)
        if not done:
            log.warning("%s not caught up after %.0fs", self.name, timeout_s)
        return done

    def start(self) -> TopicFollower:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        c = consumer(
            self.config.kafka,
            group_id=f"{self.config.worker.app_id}-{self.name}",
            **{"enable.partition.eof": True},
        )
        try:
            meta = c.list_topics(self.topic, timeout=10).topics[self.topic]
            assigned = self.start_offsets(c, sorted(meta.partitions))
            c.assign(assigned)
            pending = self.catch_up(assigned)
            if not pending:
                self._caught_up.set()
            while not self._stop.is_set():
                for msg in c.consume(500, timeout=0.2):
                    self._handle(msg, pending)
        except KafkaException as exc:
            log.error("%s stopped: %s", self.name, exc)
        finally:
            self._caught_up.set()  # never hold the worker back on a broken reader
            c.close()

    def _handle(self, msg: Message, pending: set[int]) -> None:
        error = msg.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF and pending:
                pending.discard(int(msg.partition() or 0))
                if not pending:
                    self._caught_up.set()
            return
        try:
            _, record = self.codec.decode(msg.value(), topic=self.topic)
        except CodecError as exc:  # the history sink dead-letters it
            log.debug("%s skipped an undecodable record: %s", self.name, exc)
            return
        self.apply(record)
