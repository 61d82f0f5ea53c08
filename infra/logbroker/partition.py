"""One partition's log: record batches as the producer sent them, indexed by offset.

A batch is kept as bytes with its base offset rewritten (the CRC covers neither the base offset
nor the leader epoch, so nothing else changes). Reads start at the batch that holds the fetch
offset (a bisect, not a listing of everything stored), which keeps a fetch's cost independent of
how long the log has run. Retention trims the head by age or size; compaction drops whole
batches whose every key was written again later (batch-granular, like a cleaner whose segments
are single batches), so a changelog keeps the latest value of each key.
"""

from __future__ import annotations

import asyncio
import struct
from bisect import bisect_right
from dataclasses import dataclass, field

from aiokafka.record.default_records import DefaultRecordBatch

__all__ = ["BatchError", "PartitionLog", "split_batches"]

_HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. record count: 61 bytes
_BASE = struct.Struct(">q")
_COLUMNS = ("bases", "lasts", "data", "appended_ms", "max_ts", "keys")  # one entry per batch


class BatchError(ValueError):
    """A produced record set that is not a sequence of v2 record batches."""


@dataclass(frozen=True, slots=True)
class Batch:
    """What the log needs from a produced batch header."""

    data: bytes
    last_delta: int
    max_timestamp: int
    producer_id: int
    base_sequence: int


def split_batches(records: bytes) -> list[Batch]:
    """The v2 record batches in a Produce request's record set, checked for framing only."""
    out: list[Batch] = []
    view, pos, end = memoryview(records), 0, len(records)
    while pos < end:
        if end - pos < _HEADER.size:
            raise BatchError(f"truncated batch header at byte {pos}")
        (_, length, _, magic, _, _, last_delta, _, max_ts, pid, _, seq, _) = _HEADER.unpack_from(
            view, pos
        )
        size = length + 12
        if magic != 2:
            raise BatchError(f"record batch magic {magic}: only v2 batches are supported")
        if length < _HEADER.size - 12 or pos + size > end:
            raise BatchError(f"batch length {length} at byte {pos} overruns the record set")
        out.append(Batch(bytes(view[pos : pos + size]), last_delta, max_ts, pid, seq))
        pos += size
    return out


@dataclass(slots=True)
class PartitionLog:
    """Batches of one partition: parallel lists sorted by base offset."""

    start: int = 0  # log start offset (the low watermark)
    end: int = 0  # next offset to assign (the high watermark)
    size: int = 0  # bytes held
    bases: list[int] = field(default_factory=list)
    lasts: list[int] = field(default_factory=list)
    data: list[bytes] = field(default_factory=list)
    appended_ms: list[int] = field(default_factory=list)  # broker clock: retention by age
    max_ts: list[int] = field(default_factory=list)  # producer clock: ListOffsets by time
    keys: list[tuple[frozenset[bytes | None], frozenset[bytes | None]] | None] = field(
        default_factory=list
    )  # (keys, keys whose record is a tombstone) per batch, read on first compaction
    clean_batches: int = 0  # batches kept by the last compaction
    waiters: list[asyncio.Future[None]] = field(default_factory=list)

    def append(self, batch: Batch, now_ms: int) -> int:
        """Store `batch` at the log end; its base offset."""
        base = self.end
        data = bytearray(batch.data)
        _BASE.pack_into(data, 0, base)
        self.bases.append(base)
        self.lasts.append(base + batch.last_delta)
        self.data.append(bytes(data))
        self.appended_ms.append(now_ms)
        self.max_ts.append(batch.max_timestamp)
        self.keys.append(None)
        self.size += len(data)
        self.end = base + batch.last_delta + 1
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
        return base

    def in_range(self, offset: int) -> bool:
        return self.start <= offset <= self.end

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding `offset`, at least one, up to `max_bytes`."""
        first, end, _ = self._span(offset, max_bytes)
        return b"".join(self.data[first:end])

    def pending(self, offset: int, max_bytes: int) -> int:
        """Bytes that `read(offset, max_bytes)` would return, without joining them: what a
        fetch held for its `min_bytes` counts each time the log grows."""
        return self._span(offset, max_bytes)[2]

    def _span(self, offset: int, max_bytes: int) -> tuple[int, int, int]:
        """The batches a read from `offset` takes (indexes first..end) and their bytes."""
        first = max(0, bisect_right(self.bases, offset) - 1)
        while first < len(self.bases) and self.lasts[first] < offset:
            first += 1  # the batch that held `offset` was compacted away
        end, taken = first, 0
        while end < len(self.data):
            size = len(self.data[end])
            if taken and taken + size > max_bytes:
                break
            taken += size
            end += 1
        return first, end, taken

    def offset_for_time(self, timestamp_ms: int) -> int:
        """Base offset of the first batch holding a record at or after `timestamp_ms`."""
        for base, ts in zip(self.bases, self.max_ts, strict=True):
            if ts >= timestamp_ms:
                return max(base, self.start)
        return self.end

    def delete_before(self, offset: int) -> None:
        """Move the log start to `offset`, dropping batches wholly below it."""
        offset = min(max(offset, self.start), self.end)
        drop = 0
        while drop < len(self.lasts) and self.lasts[drop] < offset:
            drop += 1
        self._drop_head(drop)
        self.start = offset

    def expire(self, now_ms: int, retention_ms: int, retention_bytes: int) -> None:
        """Trim the head past `retention_ms` of age or `retention_bytes` of size (-1: no bound).

        The newest batch stays, as Kafka keeps its active segment: the high watermark and the
        committed offsets of readers stay meaningful.
        """
        drop, size, keep_last = 0, self.size, len(self.data) - 1
        while drop < keep_last and (
            (retention_ms >= 0 and self.appended_ms[drop] < now_ms - retention_ms)
            or (retention_bytes >= 0 and size > retention_bytes)
        ):
            size -= len(self.data[drop])
            drop += 1
        if drop:
            self._drop_head(drop)
            self.start = self.bases[0] if self.bases else self.end

    def dirty(self) -> bool:
        """Worth compacting: as many batches arrived since the last pass as it kept."""
        return len(self.data) - self.clean_batches >= max(self.clean_batches, 16)

    def compact(self, now_ms: int, delete_retention_ms: int, min_lag_ms: int = 0) -> None:
        """Drop each batch whose every key is written again later; tombstones older than
        `delete_retention_ms` count as written again. Batches younger than `min_lag_ms` stay
        (Kafka never cleans its active segment, so a reader a little behind still sees every
        record), and so does the newest."""
        seen: set[bytes | None] = set()
        keep = [False] * len(self.data)
        for i in range(len(self.data) - 1, -1, -1):
            keys, tombstones = self._keys(i)
            expired = self.appended_ms[i] < now_ms - delete_retention_ms
            young = self.appended_ms[i] > now_ms - min_lag_ms
            live = {k for k in keys - seen if not (expired and k in tombstones)}
            keep[i] = i == len(self.data) - 1 or young or None in keys or bool(live)
            seen |= keys
        if not all(keep):
            for name in _COLUMNS:
                column = getattr(self, name)
                setattr(self, name, [v for v, k in zip(column, keep, strict=True) if k])
            self.size = sum(map(len, self.data))  # the log start stays: reads skip the gaps
        self.clean_batches = len(self.data)

    def _keys(self, i: int) -> tuple[frozenset[bytes | None], frozenset[bytes | None]]:
        cached = self.keys[i]
        if cached is None:
            records = list(DefaultRecordBatch(self.data[i]))
            cached = (
                frozenset(r.key for r in records),
                frozenset(r.key for r in records if r.value is None),
            )
            self.keys[i] = cached
        return cached

    def _drop_head(self, n: int) -> None:
        if not n:
            return
        self.size -= sum(map(len, self.data[:n]))
        for name in _COLUMNS:
            del getattr(self, name)[:n]
        self.clean_batches = max(0, self.clean_batches - n)
