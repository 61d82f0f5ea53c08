"""Pure parts of the history store: batching, conversion, Arrow types, guards, DDL splitting."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from infra.store import is_read_only
from infra.store import queries as Q
from infra.store import samples as S
from infra.store._arrow import arrow_type
from infra.store._client import redact_dsn
from infra.store.batching import Batcher, RecentIds
from infra.store.migrations import load_migrations, statements
from infra.store.rows import ConversionError, RowContext, to_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "queries.md"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_batch_is_due_by_size_or_age_and_carries_offsets() -> None:
    clock = Clock()
    b = Batcher(max_rows=3, max_age_s=1.0, clock=clock)
    assert not b.due()
    b.add("t", 0, 10, "tbl", "e1", [{"x": 1}])
    b.add("t", 0, 11, "tbl", "e2", [{"x": 2}])
    assert not b.due()
    clock.now = 1.0  # age bound
    assert b.due()
    b.add("t", 1, 5, "tbl", "e3", [{"x": 3}])  # size bound too (3 rows)
    batch = b.drain()
    assert batch.offsets == {("t", 0): 12, ("t", 1): 6}  # next offset to read
    assert batch.row_count == 3 and not b.due()


def test_replayed_event_ids_are_dropped_after_write() -> None:
    b = Batcher(max_rows=10, max_age_s=1.0, clock=Clock())
    assert b.add("t", 0, 0, "tbl", "e1", [{}])
    assert not b.add("t", 0, 1, "tbl", "e1", [{}])  # same batch
    b.written(b.drain())
    assert not b.add("t", 0, 2, "tbl", "e1", [{}])  # already in the store
    assert b.drain().offsets == {("t", 0): 3}  # the duplicate's offset still commits


def test_restore_puts_a_failed_batch_back_in_front() -> None:
    b = Batcher(max_rows=10, max_age_s=1.0, clock=Clock())
    b.add("t", 0, 0, "a", "e1", [{"x": 1}])
    failed = b.drain()
    b.add("t", 0, 1, "a", "e2", [{"x": 2}])
    b.restore(failed)
    again = b.drain()
    assert again.rows["a"] == [{"x": 1}, {"x": 2}] and again.offsets == {("t", 0): 2}


def test_claimed_events_and_chunks_batch_like_rows() -> None:
    clock = Clock()
    b = Batcher(max_rows=5, max_age_s=1.0, clock=clock)
    b.add("t", 0, 1, "tbl", "e1", [{"x": 1}])
    # e1 is batched already and e3 comes twice in the list: only e2 and the first e3 are new
    assert b.claim(["e1", "e2", "e3", "e3"]) == [False, True, True, False]
    b.seen("t", 0, 4)
    b.add_chunk("tbl", [{"x": 2}, {"x": 3}, {"x": 3}])
    assert b.tables() == {"tbl": 4} and not b.due()
    b.add_chunk("tbl", [{"x": 4}])  # 5 rows: due by size
    assert b.due() and b.pending_events() == 3
    batch = b.drain()
    assert batch.offsets == {("t", 0): 5} and batch.row_count == 5
    b.claim(["e4"])
    b.add_chunk("tbl", [{"x": 5}])
    b.restore(batch)  # the failed batch's chunks first, then what came since
    assert [len(c) for c in b.drain().chunks["tbl"]] == [3, 1, 1]
    b.written(batch)
    assert b.claim(["e2", "e5"]) == [False, True]


def test_recent_ids_forget_oldest() -> None:
    ids = RecentIds(capacity=2)
    for e in ("a", "b", "c"):
        ids.add(e)
    assert "a" not in ids and "c" in ids and len(ids) == 2


def test_telemetry_is_one_row_per_gpu_with_the_nodes_model() -> None:
    ctx = RowContext()
    to_rows("NodeInventory", S.node_inventory("n1", "eu", "H100", 0), ctx)
    table, rows = to_rows("NodeTelemetry", S.node_telemetry("n1", "eu", 5, [1.0, 2.0, 3.0]), ctx)
    assert table == "node_telemetry"
    assert [(r["gpu_index"], r["util_pct"], r["gpu_model"]) for r in rows] == [
        (0, 1.0, "H100"),
        (1, 2.0, "H100"),
        (2, 3.0, "H100"),
    ]


def test_decision_keeps_arrays_and_derives_columns() -> None:
    rec = S.placement("j", 1500, submitted_ts=1000, nodes=("n1", "n2"), gpus_per_node=2)
    _, [row] = to_rows("PlacementDecision", rec, RowContext())
    assert row["nodes"] == ["n1", "n2"] and row["assignment_gpu_indices"] == [[0, 1], [0, 1]]
    assert (row["node_count"], row["queue_wait_ms"], row["gpu_count"]) == (2, 500, 4)


def test_unconvertible_events_raise_conversion_error() -> None:
    with pytest.raises(ConversionError):
        to_rows("NoSuchEvent", {}, RowContext())
    with pytest.raises(ConversionError):
        to_rows("GridSignal", {"event_id": "e", "ts": 1, "schema": 1}, RowContext())


@pytest.mark.parametrize(
    ("ch", "arrow"),
    [
        ("LowCardinality(String)", pa.string()),
        ("Nullable(Float64)", pa.float64()),
        ("DateTime64(3, 'UTC')", pa.timestamp("ms", tz="UTC")),
        ("Array(Array(UInt16))", pa.list_(pa.list_(pa.uint16()))),
        ("Map(LowCardinality(String), Int32)", pa.map_(pa.string(), pa.int32())),
    ],
)
def test_arrow_types(ch: str, arrow: pa.DataType) -> None:
    assert arrow_type(ch) == arrow


@pytest.mark.parametrize(
    ("sql", "ok"),
    [
        ("SELECT 1", True),
        ("  -- note\n with x AS (SELECT 1) SELECT * FROM x", True),
        ("(SELECT 1)", True),
        ("show tables", True),
        ("DESCRIBE node_telemetry", True),
        ("INSERT INTO t VALUES (1)", False),
        ("DROP TABLE t", False),
        ("/* SELECT */ DELETE FROM t WHERE 1", False),
        ("SELECT 1 INTO OUTFILE 'x'", False),
        ("", False),
    ],
)
def test_read_only_guard(sql: str, ok: bool) -> None:
    assert is_read_only(sql) is ok


def test_dsn_redaction() -> None:
    assert redact_dsn("https://u:p@host:8443/db") == "https://***@host:8443/db"
    assert redact_dsn("chdb:///data/history") == "chdb:///data/history"


def test_ddl_files_split_into_statements() -> None:
    migrations = load_migrations()
    assert [m.version for m in migrations] == [1, 2, 3, 11, 13, 32, 33]
    for mig in migrations:
        for stmt in statements(mig.sql):
            # idempotent statements only: a half-applied migration is simply applied again
            assert stmt.startswith(("CREATE", "ALTER TABLE")) and "IF NOT EXISTS" in stmt
            assert not stmt.endswith(";")


def test_doc_lists_exactly_the_ready_queries() -> None:
    text = DOC.read_text()
    blocks = dict(re.findall(r"<!-- query: (\w+) -->\n```sql\n(.*?)\n```", text, re.S))
    assert blocks == Q.QUERIES


def test_ids_of_the_batch_in_flight_still_count_as_batched() -> None:
    b = Batcher(max_rows=10, max_age_s=60)
    assert b.claim(["e1", "e2"]) == [True, True]
    batch = b.drain()  # being inserted while the next poll is read
    assert b.claim(["e2", "e3", "e3"]) == [False, True, False]
    b.restore(batch)  # its insert failed: back in front, still not claimable twice
    assert b.claim(["e1"]) == [False]
    batch = b.drain()
    b.written(batch)
    assert b.claim(["e1", "e3", "e4"]) == [False, False, True]


def test_recent_ids_trim_in_one_go_to_the_newest() -> None:
    ids = RecentIds(capacity=8)
    ids.update(str(i) for i in range(10))  # up to 1.25 x capacity kept
    assert len(ids) == 10 and "0" in ids
    ids.add("10")
    assert len(ids) == 8 and "2" not in ids and "3" in ids and "10" in ids
    assert ids.isdisjoint(["a", "b"]) and not ids.isdisjoint(["a", "5"])


def test_recent_ids_forget_by_age_as_well_as_by_count() -> None:
    now = [0.0]
    ids = RecentIds(capacity=1000, window_s=60, clock=lambda: now[0])
    ids.update(["a", "b"])
    now[0] = 59.0
    ids.add("c")
    assert {"a", "b", "c"} <= {e for e in "abc" if e in ids}  # all within the window
    now[0] = 61.0
    ids.add("d")  # a, b, c now the older generation: still known
    assert "a" in ids and "d" in ids and len(ids) == 4
    now[0] = 122.0
    ids.add("e")  # the generation holding a, b, c is dropped whole
    assert "a" not in ids and "c" not in ids and "d" in ids and "e" in ids
    assert not ids.isdisjoint({"d"}) and ids.isdisjoint({"a", "b", "c"})
    now[0] = 500.0
    ids.add("f")  # after a quiet spell of more than two windows nothing old is kept
    assert "d" not in ids and "e" not in ids and len(ids) == 1
