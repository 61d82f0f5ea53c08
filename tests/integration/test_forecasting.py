"""Forecasts end to end: history through the sink -> the forecast processor -> SQL.

Five days of region summaries, ten of grid signals and a stream of training jobs go through
the real broker into chDB by the HistorySink; the ForecastProcessor (its real spawned pool)
forecasts from six hours before the end of that history, publishes DemandForecast events
that the same sink stores, and records backtest scores. The ready queries then read the
forecasts, their scores and their error against what happened in those six hours.
"""

from __future__ import annotations

import dataclasses
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.broker import EmbeddedBroker
from infra.config import Config, load_config
from infra.kafka import ensure_topics, producer
from infra.store import Store, open_store
from infra.store import queries as Q
from infra.store import samples as S
from infra.topics import topic_for_event
from schemas import SingleObjectCodec
from streams.forecasting.processor import ForecastProcessor, RunReport
from streams.history.sink import HistorySink

pytestmark = pytest.mark.integration

CODEC = SingleObjectCodec()
HOUR, DAY = 3600, 86_400
END = (int(time.time()) // HOUR) * HOUR  # history runs up to here
ORIGIN = END - 6 * HOUR  # the processor forecasts from here: six hours of truth follow
REGIONS = {"eu": 16.0, "us": 8.0}  # daily swing of GPUs in use
TOTAL = 64


def _busy(region: str, t: int) -> int:
    swing = REGIONS[region]
    return round(32 + swing * math.sin(2 * math.pi * (t % DAY) / DAY) + (t // 300) % 3 - 1)


def _summaries() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for region in REGIONS:
        for t in range(END - 5 * DAY, END, 300):  # one summary every 5 minutes
            busy = _busy(region, t)
            rec = S.region_summary(
                region, t * 1000 + 1000, total={"H100": TOTAL}, free={"H100": TOTAL - busy}
            )
            out.append(("RegionSummary", rec))
    return out


def _grid() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for region, base in (("eu", 300.0), ("us", 450.0)):
        for t in range(END - 10 * DAY, END, HOUR):
            carbon = base + 120 * math.sin(2 * math.pi * (t % DAY) / DAY)
            out.append(("GridSignal", S.grid_signal(region, t * 1000, carbon=carbon)))
    return out


def _training_jobs() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for hour in range(END - 5 * DAY, END, HOUR):
        count = 2 + round(2 * math.sin(2 * math.pi * (hour % DAY) / DAY))
        for k in range(count):
            ts = (hour + 600 * k) * 1000
            job = S.job_submitted(f"t{hour}-{k}", "a", ts, gpu_count=8)
            out.append(("JobSubmitted", job))
            out.append(("RoutedJob", S.routed_job(job, "eu", ts + 5)))
            out.append(("PlacementDecision", S.placement(job["job_id"], ts + 9, submitted_ts=ts)))
    return out


def _send(cfg: Config, events: list[tuple[str, dict[str, Any]]]) -> None:
    prod = producer(cfg.kafka)
    for name, rec in events:
        prod.produce(topic_for_event(name), CODEC.encode(name, rec), key=b"k")
        prod.poll(0)
    prod.flush(30)


def _wait_rows(store: Store, sql: str, want: int, sink: HistorySink, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    got = -1
    while time.monotonic() < deadline:
        sink.flush_now(5)
        got = int(store.query(sql).scalar())
        if got >= want:
            return got
        time.sleep(0.2)
    return got


@dataclasses.dataclass
class Run:
    store: Store
    report: RunReport
    summaries: list[dict[str, Any]]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp: Path = tmp_path_factory.mktemp("forecasting")
    base = load_config(env={}, data_dir=str(tmp / "data"))
    with EmbeddedBroker(base.broker, tmp / "broker") as broker:
        cfg = dataclasses.replace(
            base.with_bootstrap(broker.bootstrap_servers),
            worker=dataclasses.replace(base.worker, app_id=f"gpuflow-fc-{uuid.uuid4().hex[:8]}"),
            store=dataclasses.replace(base.store, batch_rows=2000, flush_s=0.3),
            forecast=dataclasses.replace(
                base.forecast,
                plans="short,medium",
                lstm_epochs=3,
                series="gpus_in_use,training_gpus_requested,carbon_g_per_kwh",
            ),
        )
        ensure_topics(cfg.kafka)
        store = open_store(cfg, database=f"fc_{uuid.uuid4().hex[:8]}")
        sink = HistorySink(cfg, store=store).start()
        events = _summaries() + _grid() + _training_jobs()
        _send(cfg, events)
        # every table the series read, not only the first: topics reach the sink at their pace
        jobs = len(_training_jobs()) // 3
        for table, want in (
            ("region_state", len(_summaries())),
            ("grid_signals", len(_grid())),
            ("jobs_submitted", jobs),
            ("jobs_routed", jobs),
            ("placement_decisions", jobs),
        ):
            assert _wait_rows(store, f"SELECT count() FROM {table}", want, sink) == want, table
        processor = ForecastProcessor(cfg, store)
        try:
            report = processor.run_once(now_s=ORIGIN)
        finally:
            processor.stop()
        _wait_rows(store, "SELECT count() FROM demand_forecasts", report.forecasts, sink)
        sink.stop()
        try:
            yield Run(store, report, [r for n, r in events if n == "RegionSummary"])
        finally:
            store.close()


def test_every_series_is_forecast(run: Run) -> None:
    # short (5 min): gpus_in_use eu + us, training eu; grid signals only hourly
    # medium (hourly): the same three, and carbon eu + us
    assert run.report.failed == []
    assert run.report.series == 3 + 5
    rows = run.store.query(
        "SELECT series, plan, region, countIf(selected) AS chosen, countIf(NOT selected) AS "
        "baseline, any(length(points)) AS steps, min(issued_ts) = max(issued_ts) AS one_origin, "
        "toUnixTimestamp(min(issued_ts)) AS issued FROM demand_forecasts FINAL "
        "GROUP BY series, plan, region ORDER BY series, plan, region"
    ).dicts()
    assert len(rows) == 8
    for row in rows:
        assert row["chosen"] == 1 and row["baseline"] <= 1
        assert row["steps"] == (12 if row["plan"] == "short" else 24)
        assert row["one_origin"] and row["issued"] == ORIGIN
    baselines = run.store.query(
        "SELECT DISTINCT model FROM demand_forecasts FINAL WHERE NOT selected"
    ).rows
    assert baselines in ((), (("SEASONAL_NAIVE",),))


def test_backtest_scores_are_recorded_with_the_choice(run: Run) -> None:
    rows = run.store.query(Q.FORECAST_SCORES).dicts()
    assert run.report.scores == len(run.store.query("SELECT * FROM forecast_scores FINAL").rows)
    by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_key[(row["series"], row["plan"], row["region"])].append(row)
    assert ("gpus_in_use", "short", "eu") in by_key
    for (series, plan, _), scored in by_key.items():
        models = {r["model"] for r in scored}
        assert {"seasonal_naive", "selected"} <= models, (series, plan)
        horizons = {r["horizon_steps"] for r in scored}
        assert horizons == {1, 12 if plan == "short" else 24}
        chosen = {r["model"] for r in scored if r["chosen"]}
        assert len(chosen) == 1 and "selected" not in chosen
    published = run.store.query(
        "SELECT series, plan, region, lower(toString(model)) FROM demand_forecasts FINAL "
        "WHERE selected"
    ).rows
    for series, plan, region, model in published:
        if (series, plan, region) in by_key:
            chosen = {r["model"] for r in by_key[(series, plan, region)] if r["chosen"]}
            assert chosen == {model}


def test_forecast_error_is_a_query(run: Run) -> None:
    """FORECAST_ERROR_BY_MODEL equals the error computed from the events themselves."""
    forecasts = run.store.query(
        "SELECT region, plan, lower(toString(model)) AS model, selected, step_s, "
        "toUnixTimestamp(issued_ts) AS issued, points FROM demand_forecasts FINAL "
        "WHERE series = 'gpus_in_use' AND gpu_model = '*'"
    ).dicts()
    by_region: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for rec in run.summaries:
        busy = rec["total_gpus_by_model"]["H100"] - rec["free_gpus_by_model"]["H100"]
        by_region[rec["region"]].append((rec["ts"] // 1000, busy))
    expected: dict[tuple[str, str, str], tuple[int, float]] = {}
    for f in forecasts:
        errors = []
        for i, predicted in enumerate(f["points"]):
            lo, hi = f["issued"] + i * f["step_s"], f["issued"] + (i + 1) * f["step_s"]
            seen = [b for t, b in by_region[f["region"]] if lo <= t < hi]
            if seen:  # the history ends 6 hours after the origin
                errors.append(abs(predicted - sum(seen) / len(seen)))
        expected[(f["region"], f["plan"], f["model"])] = (len(errors), sum(errors) / len(errors))
    got = run.store.query(Q.FORECAST_ERROR_BY_MODEL).dicts()
    got = [r for r in got if r["gpu_model"] == "*"]
    assert {(r["region"], r["plan"], r["model"].lower()) for r in got} == set(expected)
    for row in got:
        points, mae = expected[(row["region"], row["plan"], row["model"].lower())]
        assert row["points"] == points  # short: 12 of 12 realized, medium: 6 of 24
        assert row["mae"] == pytest.approx(mae, abs=1e-3)
    assert {r["points"] for r in got} == {12, 6}
