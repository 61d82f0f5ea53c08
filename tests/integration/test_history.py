"""History end to end: Avro events on the real broker -> HistorySink -> real ClickHouse.

Each ready query is checked against numbers computed from the events the scenario produced
(`history_scenario.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC
from typing import Any

import pytest
from history_scenario import CODEC, HOUR, H, Scenario, scenario

from infra.store import queries as Q
from infra.topics import JOBS_SUBMITTED, NODE_TELEMETRY

pytestmark = pytest.mark.integration

__all__ = ["scenario"]  # the module-scoped fixture every test here takes


def _rows(scn: Scenario, sql: str) -> list[dict[str, Any]]:
    return scn.store.query(sql).dicts()


def _q(values: Sequence[float], level: float) -> float:
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
