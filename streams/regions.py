"""The router's view of regions this worker does not own, from `gpuflow.region.state`.

With several workers each owns some region partitions; its own regions come exact from its
arrays, the others from the `RegionSummary` events their owners publish every window. A plain
consumer (no group) reads every partition in a thread, starting a few hundred records before
the end so a worker that just started knows every region at once, and keeps the latest summary
per region. Ages come from the summaries' own timestamps; older than `max_age_s` are dropped
(their owner went quiet for longer than a fail-over takes: a region whose owner just died keeps
its last summary, so jobs are still routed there and wait in its partition for the new owner).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from infra.config import Config
from infra.kafka import consumer, end_offsets
from infra.topics import REGION_STATE
from schemas import Codec, CodecError
from scorer import RegionView

__all__ = ["RemoteRegions"]

log = logging.getLogger(__name__)


class RemoteRegions:
    """Latest RegionSummary per region, read in a background thread."""

    backlog = 500  # records per partition read at start: several windows of every region

    def __init__(self, config: Config, codec: Codec, *, max_age_s: float = 60.0) -> None:
        self.config = config
        self.codec = codec
        self.max_age_s = max_age_s
        self._latest: dict[str, tuple[float, RegionView]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._caught_up = threading.Event()
        self._thread: threading.Thread | None = None

    def views(self) -> Mapping[str, RegionView]:
        cutoff = time.time() - self.max_age_s
        with self._lock:
            return {r: v for r, (at, v) in self._latest.items() if at >= cutoff}

    def apply(self, record: Mapping[str, Any]) -> None:
        at = int(record.get("window_end") or record["ts"]) / 1000
        with self._lock:
            known = self._latest.get(record["region"])
            if known is None or known[0] <= at:
                self._latest[record["region"]] = (at, RegionView.from_record(record))

    def wait_caught_up(self, timeout_s: float) -> bool:
        """Block until the summaries already in the topic have been read (bounded)."""
        done = self._caught_up.wait(timeout_s)
        if not done:
            log.warning("region summaries not caught up after %.0fs", timeout_s)
        return done

    def start(self) -> RemoteRegions:
        self._thread = threading.Thread(target=self._run, name="remote-regions", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        c = consumer(
            self.config.kafka,
            group_id=f"{self.config.worker.app_id}-regions",
            **{"enable.partition.eof": True},
        )
        try:
            ends = end_offsets(self.config.kafka, REGION_STATE)
            c.assign(
                [TopicPartition(REGION_STATE, p, max(0, e - self.backlog)) for p, e in ends.items()]
            )
            pending = {p for p, e in ends.items() if e > 0}
            if not pending:
                self._caught_up.set()
            while not self._stop.is_set():
                for msg in c.consume(500, timeout=0.2):
                    error = msg.error()
                    if error is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            pending.discard(int(msg.partition() or 0))
                            if not pending:
                                self._caught_up.set()
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
            self._caught_up.set()  # never hold the worker back on a broken reader
            c.close()
