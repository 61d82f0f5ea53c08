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

from infra.config import Config
from infra.topics import REGION_STATE
from schemas import Codec
from scorer import RegionView
from streams.follower import TopicFollower

__all__ = ["RemoteRegions"]

log = logging.getLogger(__name__)


class RemoteRegions(TopicFollower):
    """Latest RegionSummary per region, read in a background thread."""

    topic = REGION_STATE
    name = "regions"

    def __init__(self, config: Config, codec: Codec, *, max_age_s: float = 10.0) -> None:
        super().__init__(config, codec)
        self.max_age_s = max_age_s
        self._latest: dict[str, tuple[float, RegionView]] = {}
        self._lock = threading.Lock()

    def views(self) -> Mapping[str, RegionView]:
        cutoff = time.monotonic() - self.max_age_s
        with self._lock:
            return {r: v for r, (at, v) in self._latest.items() if at >= cutoff}

    def apply(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._latest[record["region"]] = (time.monotonic(), RegionView.from_record(record))
