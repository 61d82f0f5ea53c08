"""Every panel of the Grafana dashboards in infra/deploy/grafana/ is tested against a running
worker: PromQL panels are parsed with a real PromQL parser and each series they select must be
on the worker's /metrics with the labels they group by; ClickHouse panels run, with Grafana's
macros expanded as the ClickHouse plugin does, on the worker's history store."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import promql_parser
import pytest
from harness import Running, TopicReader, final_decisions, submit_jobs, wait_for
from prometheus_client.parser import text_string_to_metric_families

from agents.jobgen import generate_jobs
from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, JOBS_SUBMITTED

pytestmark = pytest.mark.integration

GRAFANA = Path(__file__).resolve().parents[2] / "infra" / "deploy" / "grafana"
# labels Prometheus adds to every scraped series (target labels), not the exposition's own
TARGET_LABELS = {"instance", "job"}
# panels whose tables need data this test does not produce (no forecaster runs here; cost
# needs jobs that ended): they must run, and may be empty
MAY_BE_EMPTY = {"Forecast error (MAE, MAPE) by region and model", "Carbon by region (kg CO2)"}


def dashboard(name: str) -> dict[str, Any]:
    return json.loads((GRAFANA / name).read_text())


def targets(dash: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(p["title"], t) for p in dash["panels"] for t in p["targets"]]


def grafana_vars(expr: str) -> str:
    """Grafana's built-in range variables, as it substitutes them before querying."""
    return expr.replace("$__rate_interval", "1m").replace("$__interval", "15s")


def clickhouse_macros(sql: str, start: int, end: int, step_s: int = 60) -> str:
    """The ClickHouse plugin's macros (v4): time filter, interval bucket, range bounds."""
    sql = re.sub(
        r"\$__timeFilter\(([^)]+)\)",
        lambda m: f"{m[1]} >= toDateTime({start}) AND {m[1]} <= toDateTime({end})",
        sql,
    )
    sql = re.sub(
        r"\$__timeInterval\(([^)]+)\)",
        lambda m: f"toStartOfInterval(toDateTime({m[1]}), INTERVAL {step_s} second)",
        sql,
    )
    sql = sql.replace("$__fromTime", f"toDateTime({start})").replace(
        "$__toTime", f"toDateTime({end})"
    )
    assert "$__" not in sql, sql
    return sql


def selectors(expr: str) -> tuple[list[Any], set[str]]:
    """Vector selectors of a PromQL expression, and every label it groups by."""
    found: list[Any] = []
    grouped: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouped.update(node.modifier.labels)

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found, grouped


def matches(selector: Any, sample: Any) -> bool:
    if sample.name != selector.name:
        return False
    for m in selector.matchers.matchers:
        value = sample.labels.get(m.name, "")
        ok = {
            promql_parser.MatchOp.Equal: value == m.value,
            promql_parser.MatchOp.NotEqual: value != m.value,
            promql_parser.MatchOp.Re: re.fullmatch(m.value, value) is not None,
            promql_parser.MatchOp.NotRe: re.fullmatch(m.value, value) is None,
        }[m.op]
        if not ok:
            return False
    return True


def test_every_dashboard_panel_query_works_on_a_running_worker(running: Running) -> None:
    p = producer(running.config.kafka)
    p.produce(JOBS_SUBMITTED, key=b"garbage", value=b"\x00not avro")  # a dead letter to chart
    p.flush(10)
    regions = [r.name for r in running.fleet.spec.regions]
    jobs = generate_jobs(40, seed=5, regions=regions, mean_duration_s=1.0, prefix="dash")
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    submit_jobs(running.config, jobs, rate_per_s=20)
    want = {j["job_id"] for j in jobs}
    assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 90)
    decisions.close()
    w = running.config.worker
    base = f"http://{w.web_host}:{w.web_port}"

    def sql(query: str) -> dict[str, Any]:
        return httpx.post(f"{base}/sql/", json={"query": query}, timeout=60).json()

    for table, where in (("placement_decisions", "outcome = 'PLACED'"),
                         ("job_events", "type = 'FINISHED'")):  # fmt: skip
        count = f"SELECT count() FROM {table} FINAL WHERE {where}"
        assert wait_for(lambda q=count: sql(q).get("rows", [[0]])[0][0] > 0, 60), table
    # the dead letter crosses two hops (worker -> gpuflow.deadletter -> history child): wait for
    # it as for the rows above, and say which hop it stopped at if it never lands
    parked = f"SELECT count() FROM dead_letters FINAL WHERE source_topic = '{JOBS_SUBMITTED}'"
    if not wait_for(lambda: sql(parked).get("rows", [[0]])[0][0] > 0, 90):
        page = httpx.get(f"{base}/metrics", timeout=10).text
        seen = [ln for ln in page.splitlines() if "dead_letters" in ln and not ln.startswith("#")]
        pytest.fail(f"the dead letter never reached the history store; /metrics says {seen}")

    # Prometheus panels against the worker's scrape
    # the worker re-exports its history child's page when the child answers within 2 s; on a
    # loaded machine one scrape may miss it (the page then says gpuflow_history_up 0)
    scrape = {"text": ""}

    def with_history() -> bool:
        scrape["text"] = httpx.get(f"{base}/metrics", timeout=10).text
        return "gpuflow_history_batch_seconds_bucket" in scrape["text"]

    assert wait_for(with_history, 60), "the history child's metrics never came through"
    text = scrape["text"]
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    live = targets(dashboard("gpuflow-live.json"))
    assert len(live) >= 14
    for title, target in live:
        found, grouped = selectors(grafana_vars(target["expr"]))
        assert found, (title, target["expr"])
        for selector in found:
            hits = [s for s in samples if matches(selector, s)]
            assert hits, f"{title}: {selector.prettify()} selects nothing on /metrics"
            labels = set().union(*(s.labels for s in hits)) | TARGET_LABELS
            assert grouped <= labels, f"{title}: groups by {grouped - labels} it lacks"

    # ClickHouse panels against the history store, over the last hour
    end = int(time.time()) + 60
    history = targets(dashboard("gpuflow-history.json"))
    assert len(history) >= 9
    for title, target in history:
        answer = sql(clickhouse_macros(target["rawSql"], end - 3600, end))
        assert "error" not in answer, f"{title}: {answer.get('error')}"
        if title not in MAY_BE_EMPTY:
            assert answer["rows"], f"{title}: no rows"
        if target["queryType"] == "timeseries":
            assert answer["columns"][0] == "time", title
