"""History end to end: Avro events on the real broker -> HistorySink -> real ClickHouse.

One scenario per module (a broker, a sink run, a replay, garbage bytes); each ready query is
checked against numbers computed here from the events produced. Runs on the embedded chDB
engine always, and on a ClickHouse server too when CLICKHOUSE_URL is set.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest

from infra.broker import EmbeddedBroker
from infra.config import Config, load_config
from infra.kafka import consumer, ensure_topics, producer
from infra.store import Store, open_store
from infra.store import queries as Q
from infra.store import samples as S
from infra.topics import DEADLETTER, JOBS_SUBMITTED, NODE_TELEMETRY, topic_for_event
from schemas import SingleObjectCodec
from streams.history import HistorySink

pytestmark = pytest.mark.integration

CLICKHOUSE_URL = os.environ.get("CLICKHOUSE_URL", "")
REPO = Path(__file__).resolve().parents[2]
CODEC = SingleObjectCodec()
HOUR = 3_600_000
H = (int(time.time() * 1000) // HOUR - 3) * HOUR  # three hours ago, hour-aligned: within TTL


def _send(prod: Any, events: list[tuple[str, dict[str, Any]]]) -> None:
    for name, rec in events:
        prod.produce(topic_for_event(name), CODEC.encode(name, rec), key=b"k")
    prod.flush(10)


def _wait(sink: HistorySink, events: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while sink.stats.events_written + sink.stats.duplicates < events:
        assert time.monotonic() < deadline, f"sink stalled: {sink.stats}"
        sink.flush_now(5)
        time.sleep(0.05)


def _inventory() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("NodeInventory", S.node_inventory(n, r, m, H - 60_000))
        for n, r, m in (("n1", "eu", "H100"), ("n2", "eu", "A100"), ("n3", "us", "H100"))
    ]


def _telemetry() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for minute in range(5):
        for k, sec in enumerate((10, 40)):
            for j, (node, region) in enumerate((("n1", "eu"), ("n2", "eu"), ("n3", "us"))):
                utils = [float((minute * 7 + k * 3 + j * 11 + g * 5) % 100) for g in range(2)]
                rec = S.node_telemetry(node, region, H + minute * 60_000 + sec * 1000, utils)
                for g, gpu in enumerate(rec["gpus"]):
                    gpu["power_w"] = 300.0 + 10 * minute + 20 * g + k
                out.append(("NodeTelemetry", rec))
    return out


def _jobs() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(10):
        sub = H + i * 1000
        wait = (i * 137) % 900 + 10
        kwargs: dict[str, Any] = {
            "submitted_ts": sub,
            "priority": 5 if i % 3 == 0 else 0,
            "tenant": "a" if i % 2 else "b",
            "worker_us": 100 + i * 37,
            "nodes": ("n1",) if i % 4 else ("n1", "n2"),
            "gpus_per_node": 1 + i % 2,
            "price_per_hour": 2.0 + i,
        }
        if i == 9:
            out.append(
                ("PlacementDecision", S.placement(f"j{i}", sub + 5, outcome="QUEUED", **kwargs))
            )
        out.append(("PlacementDecision", S.placement(f"j{i}", sub + wait, **kwargs)))
        out.append(("JobEvent", S.job_event(f"j{i}", "eu", "STARTED", sub + wait + 100)))
        if i != 8:  # j8 still runs: no GPU-hours yet
            out.append(
                (
                    "JobEvent",
                    S.job_event(f"j{i}", "eu", "FINISHED", sub + wait + 100 + (i + 1) * 60_000),
                )
            )
    out.append(
        (
            "PlacementDecision",
            S.placement(
                "jx", H + 50, submitted_ts=H, outcome="REJECTED", region=None, worker_us=9000
            ),
        )
    )
    return out


def _others() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("GridSignal", S.grid_signal("eu", H, carbon=200.0)),
        ("GridSignal", S.grid_signal("eu", H + 1_800_000, carbon=300.0)),
        ("GridSignal", S.grid_signal("us", H, carbon=400.0)),
        ("PreemptionDecision", S.preemption("v1", "j1", "eu", H, gpus=2)),
        ("PreemptionDecision", S.preemption("v2", "j2", "eu", H, gpus=3)),
        ("PreemptionDecision", S.preemption("v3", "j3", "us", H, gpus=1)),
        ("MigrationDecision", S.migration("m1", "eu", "us", H)),
        ("MigrationDecision", S.migration("m2", "eu", "eu", H)),
        ("DemandForecast", S.demand_forecast("eu", "H100", H, 600, [3.0, 5.0, 4.0])),
        ("DemandForecast", S.demand_forecast("eu", "*", H, 600, [10.0, 6.0])),
        ("BandwidthQuota", S.bandwidth_quota("j1", "eu>us", H)),
        ("LinkTelemetry", S.link_telemetry("eu", "us", H)),
        ("RoutedJob", S.routed_job(S.job_submitted("j1", "a", H), "eu", H)),
        ("JobSubmitted", S.job_submitted("j1", "a", H)),
    ]
    for step, free in enumerate(((5, 2), (3, 1), (1, 0))):
        for k in range(2):  # two summaries per 10-minute step
            ts = H + step * 600_000 + k * 240_000 + 1000
            out.append(
                (
                    "RegionSummary",
                    S.region_summary(
                        "eu",
                        ts,
                        total={"H100": 8, "A100": 4},
                        free={"H100": free[0] + k, "A100": free[1]},
                        queue_depth=step + k,
                    ),
                )
            )
    return out


@dataclasses.dataclass
class Scenario:
    store: Store
    events: dict[str, list[dict[str, Any]]]
    sink_stats: Any
    dead_letters: list[Any]


def _config(tmp: Path, servers: str, backend: str) -> Config:
    base = load_config(env={}, data_dir=str(tmp / "data"))
    cfg = dataclasses.replace(
        base.with_bootstrap(servers),
        worker=dataclasses.replace(base.worker, app_id=f"gpuflow-hist-{uuid.uuid4().hex[:8]}"),
    )
    store = dataclasses.replace(cfg.store, batch_rows=500, flush_s=0.3)
    if backend == "server":
        store = dataclasses.replace(store, dsn=CLICKHOUSE_URL)
    return dataclasses.replace(cfg, store=store)


def _run_sink(cfg: Config, database: str) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    prod = producer(cfg.kafka)
    store = open_store(cfg, database=database)
    sink = HistorySink(cfg, store=store).start()
    inv, tel, jobs, others = _inventory(), _telemetry(), _jobs(), _others()
    _send(prod, inv)
    _wait(sink, len(inv))
    unfit = ("JobSubmitted", S.job_submitted("j-unfit", "a", H, gpu_count=-1))  # UInt16 column
    _send(prod, [*tel, *jobs, *others, unfit])
    prod.produce(NODE_TELEMETRY, b"\x00garbage", key=b"bad-key")
    _send(prod, [])
    total = len(inv) + len(tel) + len(jobs) + len(others) + 1
    _wait(sink, total)
    replay = [e for e in jobs if e[0] == "PlacementDecision"] + tel[:6]
    _send(prod, replay)  # at-least-once: the same event ids again
    _wait(sink, total + len(replay) + 2)  # + the two dead letters, stored too
    sink.stop()
    stats = sink.stats
    store.close()
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, rec in inv + tel + jobs + others:
        events[name].append(rec)
    return stats, events


def _dead_letters(cfg: Config) -> list[Any]:
    c = consumer(cfg.kafka, f"dl-{uuid.uuid4().hex[:6]}")
    c.subscribe([DEADLETTER])
    found: list[Any] = []
    deadline = time.monotonic() + 15
    while len(found) < 2 and time.monotonic() < deadline:
        found += [m for m in c.consume(100, timeout=0.5) if m.error() is None]
    c.close()
    return [CODEC.decode(m.value())[1] for m in found]


def _count_in_new_process(cfg: Config, database: str) -> int:
    code = (
        "import sys; from infra.config import load_config; from infra.store import open_store;"
        f"s = open_store(load_config(env={{}}, data_dir={str(cfg.data_dir)!r}),"
        f" database={database!r}, migrate=False);"
        "print(s.query('SELECT count() FROM node_telemetry FINAL').scalar()); s.close()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


BACKENDS = [
    "chdb",
    pytest.param(
        "server",
        marks=pytest.mark.skipif(
            not CLICKHOUSE_URL,
            reason="opt-in: set CLICKHOUSE_URL=http://user:pass@host:8123 to "
            "run the history suite against a ClickHouse server",
        ),
    ),
]


@pytest.fixture(scope="module", params=BACKENDS)
def scenario(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    tmp = tmp_path_factory.mktemp("history")
    base = load_config(env={})
    database = f"hist_{uuid.uuid4().hex[:8]}"
    with EmbeddedBroker(base.broker, tmp / "broker") as broker:
        cfg = _config(tmp, broker.bootstrap_servers, request.param)
        ensure_topics(cfg.kafka)
        stats, events = _run_sink(cfg, database)
        dead = _dead_letters(cfg)
        if request.param == "chdb":  # the directory outlives this process's client
            assert _count_in_new_process(cfg, database) == 5 * 2 * 3 * 2
        store = open_store(cfg, database=database)  # a fresh client on the same data
        try:
            yield Scenario(store, events, stats, dead)
        finally:
            if request.param == "server":
                store.command(f"DROP DATABASE IF EXISTS {database}")
            store.close()


def _rows(scn: Scenario, sql: str) -> list[dict[str, Any]]:
    return scn.store.query(sql).dicts()


def _q(values: list[float], level: float) -> float:
    """ClickHouse quantileExact: the element at floor(level * n) of the sorted values."""
    return sorted(values)[int(level * len(values))]


def test_sink_counts_replays_and_dead_letters(scenario: Scenario) -> None:
    stats = scenario.sink_stats
    assert stats.dead_lettered == 2  # garbage bytes + an event whose row does not fit
    assert stats.duplicates == 12 + 6  # placements replayed + telemetry replayed
    assert stats.insert_failures == 0
    dead = {d["source_topic"]: d for d in scenario.dead_letters}
    assert dead[NODE_TELEMETRY]["value"] == b"\x00garbage"
    assert dead[NODE_TELEMETRY]["key"] == b"bad-key"
    assert "gpu_count" in dead[JOBS_SUBMITTED]["error"]
    assert CODEC.decode(dead[JOBS_SUBMITTED]["value"])[1]["job_id"] == "j-unfit"
    stored = _rows(scenario, "SELECT source_topic FROM dead_letters FINAL ORDER BY 1")
    assert [r["source_topic"] for r in stored] == sorted([NODE_TELEMETRY, JOBS_SUBMITTED])


def test_every_event_type_is_stored_once(scenario: Scenario) -> None:
    counts = {
        "node_inventory": 3,
        "node_telemetry": 60,
        "placement_decisions": 12,
        "job_events": 19,
        "grid_signals": 3,
        "preemption_decisions": 3,
        "migration_decisions": 2,
        "demand_forecasts": 2,
        "region_state": 6,
        "bandwidth_quotas": 1,
        "link_telemetry": 1,
        "jobs_routed": 1,
        "jobs_submitted": 1,
    }
    for table, n in counts.items():
        assert scenario.store.query(f"SELECT count() FROM {table} FINAL").scalar() == n, table
        assert scenario.store.query(f"SELECT count() FROM {table}").scalar() == n, table


def test_utilisation_by_region_model(scenario: Scenario) -> None:
    models = {r["node_id"]: r["gpu_model"] for r in scenario.events["NodeInventory"]}
    groups: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for rec in scenario.events["NodeTelemetry"]:
        key = ((rec["ts"] - H) // 60_000, rec["region"], models[rec["node_id"]])
        groups[key].extend(g["util_pct"] for g in rec["gpus"])
    got = _rows(scenario, Q.UTILISATION_BY_REGION_MODEL)
    assert len(got) == len(groups) == 15
    for row in got:
        minute = int(row["minute"].replace(tzinfo=UTC).timestamp() * 1000)
        key = ((minute - H) // 60_000, row["region"], row["gpu_model"])
        assert row["util_pct"] == pytest.approx(sum(groups[key]) / len(groups[key]), abs=0.01)
        assert row["util_max_pct"] == max(groups[key])
        assert row["samples"] == len(groups[key]) and row["gpus"] == 2


def test_free_capacity_and_queue(scenario: Scenario) -> None:
    got = {
        (r["minute"].minute, r["gpu_model"]): r
        for r in _rows(scenario, Q.FREE_CAPACITY_AND_QUEUE_1M)
    }
    per_minute: dict[tuple[int, str], list[tuple[int, int]]] = defaultdict(list)
    for rec in scenario.events["RegionSummary"]:
        for model in rec["total_gpus_by_model"]:
            minute = (rec["ts"] - H) // 60_000
            per_minute[(minute, model)].append(
                (rec["free_gpus_by_model"][model], rec["queue_depth"])
            )
    assert set(got) == set(per_minute)
    for key, vals in per_minute.items():
        assert got[key]["free_gpus"] == pytest.approx(sum(f for f, _ in vals) / len(vals))
        assert got[key]["queue_depth_max"] == max(q for _, q in vals)


def _placed(scn: Scenario) -> list[dict[str, Any]]:
    return [r for r in scn.events["PlacementDecision"] if r["outcome"] == "PLACED"]


def test_queue_wait_by_priority(scenario: Scenario) -> None:
    waits: dict[int, list[int]] = defaultdict(list)
    for rec in _placed(scenario):
        waits[rec["priority"]].append(rec["ts"] - rec["submitted_ts"])
    got = {r["priority"]: r for r in _rows(scenario, Q.QUEUE_WAIT_BY_PRIORITY)}
    assert set(got) == set(waits)
    for prio, vals in waits.items():
        assert got[prio]["placed"] == len(vals)  # replayed decisions not double counted
        assert got[prio]["p50_wait_ms"] == _q(vals, 0.5)
        assert got[prio]["p99_wait_ms"] == _q(vals, 0.99)


def test_decision_latency(scenario: Scenario) -> None:
    lat: dict[tuple[str, str], list[int]] = defaultdict(list)
    for rec in scenario.events["PlacementDecision"]:
        lat[(rec["region"] or "", rec["outcome"])].append(rec["worker_us"])
    got = {(r["region"], r["outcome"]): r for r in _rows(scenario, Q.DECISION_LATENCY)}
    assert set(got) == set(lat)
    for key, vals in lat.items():
        assert got[key]["decisions"] == len(vals)
        assert got[key]["p50_worker_us"] == _q(vals, 0.5)
        assert got[key]["p99_worker_us"] == _q(vals, 0.99)
    rollup = _rows(scenario, Q.DECISION_LATENCY_1M)
    assert sum(r["decisions"] for r in rollup) == 12  # the sink dropped the replay


def test_gpu_hours_and_cost_by_tenant(scenario: Scenario) -> None:
    placed = {r["job_id"]: r for r in _placed(scenario)}
    runs: dict[str, dict[str, int]] = defaultdict(dict)
    for ev in scenario.events["JobEvent"]:
        runs[ev["job_id"]][ev["type"]] = ev["ts"]
    hours: dict[str, float] = defaultdict(float)
    cost: dict[str, float] = defaultdict(float)
    jobs: dict[str, int] = defaultdict(int)
    for job_id, run in runs.items():
        if "FINISHED" not in run:
            continue
        dec, h = placed[job_id], (run["FINISHED"] - run["STARTED"]) / HOUR
        hours[dec["tenant"]] += dec["gpu_count"] * h
        cost[dec["tenant"]] += dec["price_per_hour"] * h
        jobs[dec["tenant"]] += 1
    got = {r["tenant"]: r for r in _rows(scenario, Q.GPU_HOURS_AND_COST_BY_TENANT)}
    assert set(got) == set(hours) == {"a", "b"}
    for tenant in hours:
        assert got[tenant]["jobs"] == jobs[tenant]
        assert got[tenant]["gpu_hours"] == pytest.approx(hours[tenant], abs=1e-4)
        assert got[tenant]["cost_usd"] == pytest.approx(cost[tenant], abs=1e-4)


def test_carbon_by_region(scenario: Scenario) -> None:
    per_gpu: dict[tuple[str, int, str, int], list[float]] = defaultdict(list)
    for rec in scenario.events["NodeTelemetry"]:
        for g in rec["gpus"]:
            key = (rec["region"], rec["ts"] // 60_000, rec["node_id"], g["index"])
            per_gpu[key].append(g["power_w"])
    kwh: dict[str, float] = defaultdict(float)
    for (region, *_), watts in per_gpu.items():
        kwh[region] += sum(watts) / len(watts) / 1000 / 60
    carbon = {"eu": 250.0, "us": 400.0}  # hour average of the grid signals
    got = {r["region"]: r for r in _rows(scenario, Q.CARBON_BY_REGION)}
    assert set(got) == {"eu", "us"}
    for region in got:
        assert got[region]["kwh"] == pytest.approx(kwh[region], abs=1e-4)
        assert got[region]["kg_co2"] == pytest.approx(kwh[region] * carbon[region] / 1000, abs=1e-4)


def test_preemptions_and_migrations(scenario: Scenario) -> None:
    got = {r["region"]: r for r in _rows(scenario, Q.PREEMPTIONS_AND_MIGRATIONS)}
    assert (got["eu"]["preemptions"], got["eu"]["preempted_gpus"]) == (2, 5)
    assert (got["eu"]["migrations"], got["eu"]["cross_region_migrations"]) == (2, 1)
    assert (got["us"]["preemptions"], got["us"]["preempted_gpus"], got["us"]["migrations"]) == (
        1,
        1,
        0,
    )


def test_forecast_error(scenario: Scenario) -> None:
    summaries = scenario.events["RegionSummary"]

    def busy(model: str, i: int) -> float:
        lo, hi = H + (i - 1) * 600_000, H + i * 600_000
        vals = [
            sum(
                s["total_gpus_by_model"][m] - s["free_gpus_by_model"][m]
                for m in s["total_gpus_by_model"]
                if model in ("*", m)
            )
            for s in summaries
            if lo <= s["ts"] < hi
        ]
        return sum(vals) / len(vals)

    got = {r["gpu_model"]: r for r in _rows(scenario, Q.FORECAST_ERROR)}
    for fc in scenario.events["DemandForecast"]:
        errors = [abs(p - busy(fc["gpu_model"], i)) for i, p in enumerate(fc["points"], 1)]
        pct = [
            abs(p - busy(fc["gpu_model"], i)) / busy(fc["gpu_model"], i)
            for i, p in enumerate(fc["points"], 1)
        ]
        row = got[fc["gpu_model"]]
        assert row["points"] == len(fc["points"])
        assert row["mae"] == pytest.approx(sum(errors) / len(errors), abs=1e-4)
        assert row["mape_pct"] == pytest.approx(100 * sum(pct) / len(pct), abs=0.01)
