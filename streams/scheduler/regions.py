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

from confluent_kafka import TopicPartition

from infra.config import Config
from infra.kafka import end_offsets
from infra.topics import REGION_STATE
from schemas import Codec
from scorer import RegionView
from streams.base.follower import TopicFollower

__all__ = ["RemoteRegions"]

log = logging.getLogger(__name__)


class RemoteRegions(TopicFollower):
    """Latest RegionSummary per region, read in a background thread."""

    topic = REGION_STATE
    name = "regions"
    backlog = 500  # records per partition read at start: several windows of every region

    def __init__(self, config: Config, codec: Codec, *, max_age_s: float = 60.0) -> None:
        super().__init__(config, codec)
        self.max_age_s = max_age_s
        self._latest: dict[str, tuple[float, RegionView]] = {}
        self._lock = threading.Lock()
        self._ends: dict[int, int] = {}

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

    def start_offsets(self, c: Any, partitions: list[int]) -> list[TopicPartition]:
        """A few hundred records before the true end of each partition (see `end_offsets`)."""
        self._ends = end_offsets(self.config.kafka, self.topic)
        return [
            TopicPartition(self.topic, p, max(0, self._ends.get(p, 0) - self.backlog))
            for p in partitions
        ]

    def catch_up(self, assigned: list[TopicPartition]) -> set[int]:
        """Every partition that holds summaries: the worker routes once it knows them all."""
        return {p for p, end in self._ends.items() if end > 0}
