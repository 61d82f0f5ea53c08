"""Following a whole topic in a thread: every partition, no consumer group, latest state kept.

The worker's views of what other processes publish (region summaries of regions it does not
own, the latest demand forecasts) are read this way: a plain confluent-kafka consumer assigned
every partition, decoding each record and handing it to `apply`; undecodable records are
skipped (the history sink dead-letters them), and the thread ends with the worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

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
        self._thread: threading.Thread | None = None

    def apply(self, record: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def start_offsets(self, c: Any, partitions: list[int]) -> list[TopicPartition]:
        """Where to begin reading: by default at the end (only what comes next)."""
        return [TopicPartition(self.topic, p, OFFSET_END) for p in partitions]

    def start(self) -> TopicFollower:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        c = consumer(self.config.kafka, group_id=f"{self.config.worker.app_id}-{self.name}")
        try:
            meta = c.list_topics(self.topic, timeout=10).topics[self.topic]
            c.assign(self.start_offsets(c, sorted(meta.partitions)))
            while not self._stop.is_set():
                for msg in c.consume(500, timeout=0.2):
                    if msg.error() is not None:
                        continue
                    try:
                        _, record = self.codec.decode(msg.value(), topic=self.topic)
                    except CodecError as exc:  # the history sink dead-letters it
                        log.debug("%s skipped an undecodable record: %s", self.name, exc)
                        continue
                    self.apply(record)
        except KafkaException as exc:
            log.error("%s stopped: %s", self.name, exc)
        finally:
            c.close()
