"""The router's view of regions this worker does not own, from `gpuflow.region.state`.

With several workers each owns some region partitions; its own regions come exact from its
arrays, the others from the `RegionSummary` events their owners publish every window. A plain
consumer (no group) reads every partition from the end, in a thread, and keeps the latest
summary per region; summaries older than `max_age_s` are dropped (their owner went quiet).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_END, KafkaException, TopicPartition

from infra.config import Config
from infra.kafka import consumer
from infra.topics import REGION_STATE
from schemas import Codec, CodecError
from scorer import RegionView

__all__ = ["RemoteRegions"]

log = logging.getLogger(__name__)


class RemoteRegions:
    """Latest RegionSummary per region, read in a background thread."""

    def __init__(self, config: Config, codec: Codec, *, max_age_s: float = 10.0) -> None:
        self.config = config
        self.codec = codec
        self.max_age_s = max_age_s
        self._latest: dict[str, tuple[float, RegionView]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def views(self) -> Mapping[str, RegionView]:
        cutoff = time.monotonic() - self.max_age_s
        with self._lock:
            return {r: v for r, (at, v) in self._latest.items() if at >= cutoff}

    def apply(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._latest[record["region"]] = (time.monotonic(), RegionView.from_record(record))

    def start(self) -> RemoteRegions:
        self._thread = threading.Thread(target=self._run, name="remote-regions", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        c = consumer(self.config.kafka, group_id=f"{self.config.worker.app_id}-regions")
        try:
            meta = c.list_topics(REGION_STATE, timeout=10).topics[REGION_STATE]
            c.assign([TopicPartition(REGION_STATE, p, OFFSET_END) for p in meta.partitions])
            while not self._stop.is_set():
                for msg in c.consume(500, timeout=0.2):
                    if msg.error() is not None:
                        continue
                    try:
                        _, record = self.codec.decode(msg.value(), topic=REGION_STATE)
                    except CodecError as exc:  # the owner's own dead-letter path reports it
                        log.debug("skipped undecodable region summary: %s", exc)
                        continue
                    self.apply(record)
        except KafkaException as exc:
            log.error("remote region view stopped: %s", exc)
        finally:
            c.close()
