"""The store on the real chDB engine: migrations, read-only guard, binding, errors, redaction."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from infra.config import load_config
from infra.store import (
    QueryError,
    ReadOnlyError,
    Store,
    applied_versions,
    apply_migrations,
    load_migrations,
)
from infra.store import samples as S
from infra.store.queries import QUERIES, QUERY_PARAMS
from infra.store.rows import RowContext, to_rows

REPO = Path(__file__).resolve().parents[2]
NOW = int(time.time() * 1000)


def test_migrations_are_recorded_and_idempotent(store: Store) -> None:
    versions = {m.version for m in load_migrations()}
    assert applied_versions(store) == versions == {1, 2, 3, 11, 13, 32, 33}
    assert apply_migrations(store) == []  # second start: nothing to do
    assert apply_migrations(store) == []
    rows = store.query("SELECT version, name FROM schema_migrations FINAL ORDER BY version")
    assert rows.rows == (
        (1, "events"),
        (2, "rollups"),
        (3, "forecasts"),
        (11, "tenancy"),
        (13, "network"),
        (32, "job_epochs"),
        (33, "service_load"),
    )


def test_every_event_converts_and_inserts(store: Store) -> None:
    job = S.job_submitted("j1", "a", NOW)
    records = {
        "NodeInventory": S.node_inventory("n1", "eu", "H100", NOW),
        "NodeTelemetry": S.node_telemetry("n1", "eu", NOW, [10.0, 90.0]),
        "LinkTelemetry": S.link_telemetry("eu", "us", NOW),
        "GridSignal": S.grid_signal("eu", NOW, carbon=1.0),
        "JobSubmitted": job,
        "JobEvent": S.job_event("j1", "eu", "STARTED", NOW),
        "RegionSummary": S.region_summary("eu", NOW, total={"H100": 8}, free={"H100": 1}),
        "RoutedJob": S.routed_job(job, "eu", NOW),
        "PlacementDecision": S.placement("j1", NOW, submitted_ts=NOW - 5),
        "PreemptionDecision": S.preemption("j0", "j1", "eu", NOW),
        "MigrationDecision": S.migration("j1", "eu", "us", NOW),
        "NodeAdvisory": S.node_advisory("n1", "eu", NOW),
        "BandwidthQuota": S.bandwidth_quota("j1", "eu>us", NOW),
        "DemandForecast": S.demand_forecast("eu", "H100", NOW, 60, [1.0]),
        "ServiceLoad": S.service_load("chat", NOW, 12.5, zone="eu/a"),
    }
    ctx = RowContext()
    for event, rec in records.items():
        table, rows = to_rows(event, rec, ctx)
        assert store.insert_rows(table, rows) == len(rows)
        assert store.query(f"SELECT count() FROM {table}").scalar() >= 1, table
    got = store.query("SELECT gpu_model, gpu_index, util_pct FROM node_telemetry ORDER BY 2")
    assert got.rows == (("H100", 0, 10.0), ("H100", 1, 90.0))  # model from the inventory
    dec = store.query("SELECT nodes, node_count, queue_wait_ms FROM placement_decisions")
    assert dec.rows == ((["n1"], 1, 5),)
    load = store.query("SELECT service, zone, window_s, requests_per_s, p99_ms FROM service_load")
    assert load.rows == (("chat", "eu/a", 60, 12.5, None),)


def test_ready_queries_run_on_the_schema(store: Store) -> None:
    for name, sql in QUERIES.items():
        store.query(sql, QUERY_PARAMS.get(name, {}))  # raises on a syntax or schema error
        assert name


def test_read_only_unless_write(store: Store) -> None:
    with pytest.raises(ReadOnlyError):
        store.query("DROP TABLE node_telemetry")
    with pytest.raises(ReadOnlyError):  # a second statement hidden behind a SELECT
        store.query("SELECT 1; DROP TABLE node_telemetry")
    with pytest.raises(ReadOnlyError):  # chDB's readonly=2 would let this write a file
        store.query("SELECT * FROM numbers(1) INTO OUTFILE 'never-written.csv'")
    store.query("CREATE TABLE scratch (x UInt8) ENGINE = Memory", write=True)
    store.query("INSERT INTO scratch VALUES (1)", write=True)
    assert store.query("SELECT sum(x) FROM scratch").scalar() == 1


def test_parameters_are_bound_not_formatted(store: Store) -> None:
    evil = "eu' OR 1=1 --"
    res = store.query("SELECT {r:String} AS r, {n:UInt32} + 1 AS n", {"r": evil, "n": "41"})
    assert res.rows == ((evil, 42),)
    assert res.columns == ("r", "n")


def test_bad_query_is_one_line_error(store: Store) -> None:
    with pytest.raises(QueryError) as err:
        store.query("SELECT * FROM no_such_table")
    assert "\\n" not in str(err.value) and "UNKNOWN_TABLE" in str(err.value)


def test_credentials_never_in_repr() -> None:
    cfg = load_config(
        env={
            "GPUFLOW_STORE_DSN": "http://bob:s3cret@ch:8123/db",
            "GPUFLOW_STORE_PASSWORD": "s3cret",
        }
    )
    assert "s3cret" not in repr(cfg.store)
    store = Store(client=None, database="db", dsn=cfg.store.dsn)
    assert "s3cret" not in repr(store) and "bob" not in repr(store)
