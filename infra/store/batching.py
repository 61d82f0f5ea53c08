"""Size- and time-bounded batches per table, with the offsets they cover. Pure logic.

The sink adds rows as messages arrive (or, for telemetry, ready columnar chunks of many
events, `add_chunk`); when `due()` it drains one batch per table, inserts
each as one columnar insert, and only then commits `drain().offsets` (next offset to read per
topic-partition). Event ids already written by this process are dropped, so a replayed batch
does not reach the rollups twice (raw tables also deduplicate on merge / FINAL); so are those
of the drained batch still being inserted (one at a time) until `written` or `restore`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from typing import Any

from infra.store.errors import RowError

__all__ = ["Batch", "Batcher", "RecentIds", "split_bad_rows"]

Row = dict[str, Any]


class RecentIds:
    """Event ids written recently, to drop a replayed event: every id of the last `window_s`
    while they number `capacity` or fewer, none older than 2 x `window_s` once more come, and
    never more than 1.25 x `capacity` (the oldest forgotten first).

    A replay repeats what came after the sink's last commit, which follows every flush: seconds
    of events after a rebalance or a restart. Bounding by age as well as by count makes a quiet
    stack's memory level off within minutes: by count alone, 200k ids (~30 MB) took 12 minutes
    to fill at 300 events/s, and the history child grew all that time. 200k ids still bound a
    burst: ~18 s of 10,000 nodes at full telemetry.
    """

    def __init__(
        self,
        capacity: int = 200_000,
        window_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity = capacity
        self.window_s = window_s
        self._clock = clock
        # two generations of plain dicts (insertion-ordered, C-speed updates): ids go into the
        # newer; once it is `window_s` old it becomes the older, and the older is dropped whole
        self._old: dict[str, None] = {}
        self._new: dict[str, None] = {}
        self._since = clock()

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._new or event_id in self._old

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def isdisjoint(self, event_ids: Iterable[str]) -> bool:
        ids = event_ids if isinstance(event_ids, (set, frozenset)) else set(event_ids)
        return self._new.keys().isdisjoint(ids) and self._old.keys().isdisjoint(ids)

    def add(self, event_id: str) -> None:
        self.update((event_id,))

    def update(self, event_ids: Iterable[str]) -> None:
        now = self._clock()
        age = now - self._since
        if age >= self.window_s:  # after a quiet spell longer than two windows: both go
            self._old = self._new if age < 2 * self.window_s else {}
            self._new, self._since = {}, now
        self._new.update(dict.fromkeys(event_ids))
        if len(self) > self.capacity + self.capacity // 4:  # a burst: keep the newest
            keep = [*self._old, *self._new][-self.capacity :]
            self._old, self._new = {}, dict.fromkeys(keep)


@dataclass
class Batch:
    """Rows per table and the offsets to commit once every table is written."""

    rows: dict[str, list[Row]] = field(default_factory=dict)
    # per table: (first row, end row, source) for each event, to dead-letter rows that do not fit
    sources: dict[str, list[tuple[int, int, Any]]] = field(default_factory=dict)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    event_ids: list[str] = field(default_factory=list)
    # per table: columnar chunks built elsewhere (Arrow tables of checked rows), inserted with rows
    chunks: dict[str, list[Sized]] = field(default_factory=dict)

    @property
    def row_count(self) -> int:
        return sum(map(self.table_rows, self.tables()))

    def tables(self) -> list[str]:
        return list(dict.fromkeys([*self.rows, *self.chunks]))

    def table_rows(self, table: str) -> int:
        return len(self.rows.get(table, ())) + sum(map(len, self.chunks.get(table, ())))

    def pop(self, table: str) -> None:
        """Forget a table's rows and chunks (written already)."""
        self.rows.pop(table, None)
        self.sources.pop(table, None)
        self.chunks.pop(table, None)

    def __bool__(self) -> bool:
        return bool(self.rows) or bool(self.chunks) or bool(self.offsets)


class Batcher:
    """Collects rows until `max_rows` in one table or `max_age_s` since the first message."""

    def __init__(
        self,
        max_rows: int,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
        recent: RecentIds | None = None,
    ) -> None:
        self.max_rows = max(1, max_rows)
        self.max_age_s = max_age_s
        self._clock = clock
        self.recent = recent if recent is not None else RecentIds()
        self._batch = Batch()
        self._pending_ids: set[str] = set()
        self._inflight_ids: set[str] = set()  # of the drained batch, until written or restored
        self._started: float | None = None
        self.duplicates = 0

    def seen(self, topic: str, partition: int, offset: int) -> None:
        """Count a message as read: its offset commits with the batch."""
        self._touch(topic, partition, offset)

    def _touch(self, topic: str, partition: int, offset: int) -> None:
        if self._started is None:
            self._started = self._clock()
        key = (topic, partition)
        self._batch.offsets[key] = max(self._batch.offsets.get(key, 0), offset + 1)

    def add(
        self,
        topic: str,
        partition: int,
        offset: int,
        table: str,
        event_id: str,
        rows: list[Row],
        source: Any = None,
    ) -> bool:
        """Add one event's rows; False when the event id was already written (dropped).

        `source` (e.g. the Kafka message) comes back from `Batch.sources` if its rows are bad.
        """
        self._touch(topic, partition, offset)
        if self._known(event_id):
            self.duplicates += 1
            return False
        self._pending_ids.add(event_id)
        self._batch.event_ids.append(event_id)
        table_rows = self._batch.rows.setdefault(table, [])
        start = len(table_rows)
        table_rows.extend(rows)
        self._batch.sources.setdefault(table, []).append((start, len(table_rows), source))
        return True

    def claim(self, event_ids: Sequence[str]) -> list[bool]:
        """Which of these events are new (not written, not batched, not repeated in the list);
        the new ones join the batch, whose rows the caller adds as a chunk."""
        ids = set(event_ids)
        if (  # the usual case: all new, claimed at set speed
            len(ids) == len(event_ids)
            and ids.isdisjoint(self._pending_ids)
            and ids.isdisjoint(self._inflight_ids)
            and self.recent.isdisjoint(ids)
        ):
            self._pending_ids |= ids
            self._batch.event_ids.extend(event_ids)
            return [True] * len(event_ids)
        fresh = []
        for event_id in event_ids:
            new = not self._known(event_id)
            if new:
                self._pending_ids.add(event_id)
                self._batch.event_ids.append(event_id)
            else:
                self.duplicates += 1
            fresh.append(new)
        return fresh

    def _known(self, event_id: str) -> bool:
        return (
            event_id in self.recent
            or event_id in self._pending_ids
            or event_id in self._inflight_ids
        )

    def add_chunk(self, table: str, chunk: Sized) -> None:
        """Rows of claimed events, already columnar (their offsets are `seen` separately)."""
        if self._started is None:
            self._started = self._clock()
        if len(chunk):
            self._batch.chunks.setdefault(table, []).append(chunk)

    def skip(self, topic: str, partition: int, offset: int) -> None:
        """Count a message as handled without rows (dead-lettered): its offset still commits."""
        self._touch(topic, partition, offset)

    def due(self) -> bool:
        if not self._batch:
            return False
        if any(self._batch.table_rows(t) >= self.max_rows for t in self._batch.tables()):
            return True
        return self._started is not None and self._clock() - self._started >= self.max_age_s

    def drain(self) -> Batch:
        """Hand over the current batch and start a new one (call `written` after inserting)."""
        batch, self._batch = self._batch, Batch()
        self._inflight_ids, self._pending_ids = self._pending_ids, set()
        self._started = None
        return batch

    def written(self, batch: Batch) -> None:
        """Remember a batch's event ids once it is safely in the store."""
        self.recent.update(batch.event_ids)
        self._inflight_ids = set()

    def restore(self, batch: Batch) -> None:
        """Put a batch whose insert failed back in front, to be retried with what follows."""
        merged = Batch(offsets=dict(batch.offsets), event_ids=list(batch.event_ids))
        for table, rows in batch.rows.items():
            merged.rows[table] = list(rows)
            merged.sources[table] = list(batch.sources.get(table, []))
        for table, rows in self._batch.rows.items():
            shift = len(merged.rows.get(table, []))
            merged.rows.setdefault(table, []).extend(rows)
            merged.sources.setdefault(table, []).extend(
                (a + shift, b + shift, src) for a, b, src in self._batch.sources.get(table, [])
            )
        for source in (batch, self._batch):
            for table, chunks in source.chunks.items():
                merged.chunks.setdefault(table, []).extend(chunks)
        for key, offset in self._batch.offsets.items():
            merged.offsets[key] = max(merged.offsets.get(key, 0), offset)
        merged.event_ids.extend(self._batch.event_ids)
        self._pending_ids |= set(batch.event_ids)
        self._inflight_ids = set()
        self._batch = merged
        if self._started is None:
            self._started = self._clock()

    def pending_events(self) -> int:
        """Events batched and not yet written."""
        return len(self._batch.event_ids)

    def tables(self) -> Mapping[str, int]:
        return {table: self._batch.table_rows(table) for table in self._batch.tables()}


def split_bad_rows(
    rows: list[Row],
    sources: list[tuple[int, int, Any]],
    check: Callable[[list[Row]], object],
) -> tuple[list[Row], list[tuple[Any, str]]]:
    """Rows of events that pass `check`, and (source, error) of those it refuses (RowError)."""
    good: list[Row] = []
    bad: list[tuple[Any, str]] = []
    for start, end, source in sources:
        chunk = rows[start:end]
        try:
            check(chunk)
        except RowError as exc:
            bad.append((source, str(exc)))
            continue
        good.extend(chunk)
    return good, bad
