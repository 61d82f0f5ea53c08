"""Regional state has one owner: changelog writes by region, revoked regions leave memory.

Each region's events share one partition number on every region-keyed topic, and Faust gives
all partitions with that number to one worker, which thereby owns the region. Two things keep
that true for the tables too:

- `RegionTable` writes each entry to the changelog partition of the entry's region, not of the
  event being processed. Faust's default takes the current event's partition, which is wrong
  for writes made while rebuilding after a rebalance (the rebuild task inherits whichever event
  woke it, often a `jobs.submitted` record keyed by job id), so an entry could land in a
  partition another worker recovers, and a tombstone miss the entry it was meant to delete.
- `Ownership` knows which partitions this worker was assigned in the last rebalance; after
  recovery the scheduler drops every node, reservation and queued job of a region it no longer
  owns, so a revoked region leaves memory and the router stops treating a stale copy as exact.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

from faust.tables.table import Table

from infra.topics import JOBS_ROUTED, RegionPartitioner

__all__ = ["Ownership", "RegionTable", "region_of", "region_table"]

log = logging.getLogger(__name__)


def region_of(value: Any) -> str | None:
    """The region a table entry belongs to (every gpuflow table value names it)."""
    if isinstance(value, Mapping):
        region = value.get("region")
        return str(region) if region is not None else None
    return None


class RegionTable(Table):
    """A Faust table whose changelog partition is the entry's region's partition."""

    def __init__(self, *args: Any, partition_of: RegionPartitioner, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.partition_of = partition_of

    def _partition(self, key: Any, value: Any) -> int | None:
        region = region_of(value)
        if region is None:  # not region data: Faust's rule (the current event's partition)
            return self.partition_for_key(key)
        return self.partition_of(region)

    def on_key_set(self, key: Any, value: Any) -> None:
        partition = self._partition(key, value)
        self.send_changelog(partition, key, value)
        self._remember(key, partition)
        self._sensor_on_set(self, key, value)

    def on_key_del(self, key: Any) -> None:
        # called before the store forgets the value, so the old entry still names its region
        partition = self._partition(key, self.data.get(key))
        self.send_changelog(partition, key, value=None, value_serializer="raw")
        self._forget(key)
        self._sensor_on_del(self, key)

    def forget_local(self, keys: Collection[Any]) -> None:
        """Drop entries from memory only (their owner keeps them in the changelog)."""
        for key in keys:
            self.data.data.pop(key, None)
            self._forget(key)

    def _remember(self, key: Any, partition: int | None) -> None:
        # the in-memory store drops keys of unassigned partitions after recovery, but only
        # those it learnt from the changelog; record local writes the same way
        parts = getattr(self.data, "_key_partition", None)
        if parts is not None and partition is not None:
            parts[key] = partition

    def _forget(self, key: Any) -> None:
        parts = getattr(self.data, "_key_partition", None)
        if parts is not None:
            parts.pop(key, None)


class Ownership:
    """The region partitions this worker owns since the last rebalance."""

    def __init__(self, partition_of: RegionPartitioner, assigned: Callable[[], Collection[Any]]):
        self.partition_of = partition_of
        self._assigned = assigned  # the app's active topic-partitions

    def partitions(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self._assigned() if tp.topic == JOBS_ROUTED)

    def owns(self, region: str, partitions: Collection[int] | None = None) -> bool:
        parts = self.partitions() if partitions is None else partitions
        return self.partition_of(region) in parts


def region_table(app: Any, name: str, partitions: int, partition_of: RegionPartitioner) -> Any:
    """Declare a `RegionTable` on `app` (what `app.Table` does, with our table class)."""
    table = RegionTable(
        app,
        name=name,
        default=None,
        beacon=app.tables.beacon,
        partitions=partitions,
        partition_of=partition_of,
    )
    return app.tables.add(table)
