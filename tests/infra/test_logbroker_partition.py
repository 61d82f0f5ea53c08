"""The log broker's partition log: offsets, reads, retention and compaction (no network)."""

from __future__ import annotations

import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from infra.logbroker.partition import BatchError, PartitionLog, split_batches
from infra.logbroker.state import BrokerSettings, BrokerState


def _batch(*records: tuple[bytes | None, bytes | None], ts: int = 1000, pid: int = -1) -> bytes:
    b = DefaultRecordBatchBuilder(
        2, 0, 0, pid, 0 if pid >= 0 else -1, 0 if pid >= 0 else -1, 1 << 20
    )
    for i, (key, value) in enumerate(records):
        b.append(i, ts, key, value, [])
    return bytes(b.build())


def _offsets(data: bytes) -> list[int]:
    return [r.offset for batch in split_batches(data) for r in DefaultRecordBatch(batch.data)]


def _fill(log: PartitionLog, batches: list[bytes], now: int = 0) -> list[int]:
    return [log.append(b, now) for data in batches for b in split_batches(data)]


def test_appends_number_batches_from_the_log_end_and_reads_from_any_offset() -> None:
    log = PartitionLog()
    bases = _fill(
        log, [_batch((b"a", b"1"), (b"b", b"2")), _batch((b"c", b"3")), _batch((b"d", b"4"))]
    )
    assert bases == [0, 2, 3]
    assert (log.start, log.end) == (0, 4)
    assert _offsets(log.read(0, 1 << 20)) == [0, 1, 2, 3]
    assert _offsets(log.read(1, 1 << 20)) == [0, 1, 2, 3]  # whole batches: the reader skips 0
    assert _offsets(log.read(3, 1 << 20)) == [3]
    assert log.read(4, 1 << 20) == b""


def test_a_read_returns_at_least_one_batch_and_stops_at_max_bytes() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"k", b"x" * 500)) for _ in range(5)])
    assert _offsets(log.read(0, 1)) == [0]  # one batch, however small the limit
    assert _offsets(log.read(0, 1200)) == [0, 1]


def test_record_sets_that_are_not_v2_batches_are_refused() -> None:
    good = _batch((b"k", b"v"))
    with pytest.raises(BatchError, match="overruns"):
        split_batches(good[:-3])
    with pytest.raises(BatchError, match="truncated"):
        split_batches(good[:20])
    legacy = bytearray(good)
    legacy[16] = 1  # magic
    with pytest.raises(BatchError, match="magic 1"):
        split_batches(bytes(legacy))
    assert len(split_batches(good + good)) == 2


def test_expire_trims_by_age_and_size_but_keeps_the_newest_batch() -> None:
    log = PartitionLog()
    for now in (0, 100, 200, 300):
        log.append(split_batches(_batch((b"k", b"v" * 100)))[0], now)
    log.expire(now_ms=350, retention_ms=200, retention_bytes=-1)  # older than 150 goes
    assert (log.start, log.end, log.bases) == (2, 4, [2, 3])
    log.expire(now_ms=10_000, retention_ms=1, retention_bytes=-1)
    assert log.bases == [3] and log.start == 3  # the newest stays, as Kafka's active segment
    assert log.read(3, 1 << 20) and not log.in_range(2)


def test_expire_by_bytes_keeps_the_newest_within_the_bound() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"k", b"v" * 100)) for _ in range(10)])
    one = len(log.data[0])
    log.expire(now_ms=0, retention_ms=-1, retention_bytes=3 * one)
    assert log.bases == [7, 8, 9] and log.size == 3 * one


def test_delete_before_moves_the_log_start_inside_a_batch() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"a", b"1"), (b"b", b"2")), _batch((b"c", b"3"))])
    log.delete_before(1)
    assert log.start == 1 and log.bases == [0, 2]  # the batch holding 1 stays
    assert not log.in_range(0)
    log.delete_before(3)
    assert log.start == 3 and log.bases == []  # up to the high watermark: all of it


def test_compaction_keeps_the_latest_batch_of_every_key() -> None:
    log = PartitionLog()
    _fill(
        log,
        [_batch((b"a", b"1")), _batch((b"b", b"1")), _batch((b"a", b"2")), _batch((b"c", b"1"))],
    )
    log.compact(now_ms=0, delete_retention_ms=1000)
    assert log.bases == [1, 2, 3]  # a=1 was written again
    latest = {r.key: r.value for r in DefaultRecordBatch(log.read(0, 1 << 20)[: len(log.data[0])])}
    assert latest == {b"b": b"1"}
    assert _offsets(log.read(0, 1 << 20)) == [1, 2, 3]  # a read in the gap starts at the next
    assert log.start == 0  # compaction leaves gaps, not a new log start


def test_a_batch_stays_while_any_of_its_keys_is_the_latest() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"a", b"1"), (b"b", b"1")), _batch((b"a", b"2")), _batch((b"z", b"0"))])
    log.compact(now_ms=0, delete_retention_ms=1000)
    assert log.bases == [0, 2, 3]


def test_tombstones_go_after_the_delete_retention() -> None:
    log = PartitionLog()
    log.append(split_batches(_batch((b"a", b"1")))[0], 0)
    log.append(split_batches(_batch((b"a", None)))[0], 0)
    log.append(split_batches(_batch((b"b", b"1")))[0], 0)
    log.compact(now_ms=500, delete_retention_ms=1000)
    assert log.bases == [1, 2]  # the tombstone is kept while readers may still need it
    log.compact(now_ms=5000, delete_retention_ms=1000)
    assert log.bases == [2]


def test_compaction_leaves_batches_younger_than_the_lag() -> None:
    log = PartitionLog()
    for now, value in ((0, b"1"), (1000, b"2"), (2000, b"3"), (2500, b"4")):
        log.append(split_batches(_batch((b"a", value)))[0], now)
    log.compact(now_ms=3000, delete_retention_ms=10_000, min_lag_ms=1500)
    assert log.bases == [2, 3]  # 0 and 1 are older than the lag and written again
    log.compact(now_ms=3000, delete_retention_ms=10_000, min_lag_ms=5000)
    assert log.bases == [2, 3]


def test_compaction_runs_when_as_much_arrived_as_it_kept() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"k", str(i).encode())) for i in range(15)])
    assert not log.dirty()
    _fill(log, [_batch((b"k", b"last"))])
    assert log.dirty()
    log.compact(now_ms=0, delete_retention_ms=0)
    assert log.bases == [15] and not log.dirty()


def test_offset_for_time_finds_the_first_batch_at_or_after() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"a", b"1"), ts=100), _batch((b"b", b"1"), ts=200)])
    assert log.offset_for_time(150) == 1
    assert log.offset_for_time(50) == 0
    assert log.offset_for_time(999) == log.end


def test_the_broker_reports_what_it_stores_largest_first(caplog: pytest.LogCaptureFixture) -> None:
    state = BrokerState(BrokerSettings())
    big, small = state.create("big", 2), state.create("small", 1)
    _fill(big.partitions[0], [_batch((b"k", b"x" * 500)), _batch((b"k", b"y" * 500))])
    _fill(small.partitions[0], [_batch((b"k", b"z"))])
    state.create("empty", 1)
    with caplog.at_level("INFO", logger="infra.logbroker.state"):
        state.report(top=2)
    stored = sum(p.size for t in (big, small) for p in t.partitions)
    line = caplog.records[-1].getMessage()
    assert f"stored topics=3 bytes={stored} batches=3 largest=big:" in line
    assert line.endswith(f"small:{small.partitions[0].size}/1")
    assert BrokerState(BrokerSettings()).cluster_id != state.cluster_id  # new storage, new id


def test_pending_counts_what_a_read_would_return_without_reading_it() -> None:
    log = PartitionLog()
    _fill(log, [_batch((b"a", b"1" * 100)), _batch((b"b", b"2" * 100)), _batch((b"c", b"3"))])
    for offset in range(4):
        for cap in (1, 150, 1 << 20):
            assert log.pending(offset, cap) == len(log.read(offset, cap)), (offset, cap)
    assert log.pending(3, 1 << 20) == 0
