"""ClickHouse failing under a running worker: the history sink backs off, keeps its place (no
commit past what is stored), says so on /health/ and /metrics/, and catches up with every event
stored exactly once; scheduling carries on meanwhile.

Two real failures of the real engine (chDB, in the worker's history child):
  - inserts refused for 30 s mid-stream: every history table gets a CHECK constraint that
    no row meets (ClickHouse answers VIOLATED_CONSTRAINT), then it is dropped;
  - the store unavailable at start: another process holds the chDB directory (one process
    per directory), so the sink cannot open it until that process exits.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import httpx
import pytest
from harness import Running, TopicReader, final_decisions, run_stack, submit_jobs, wait_for

from infra.config import Config
from infra.kafka import committed_offsets, end_offsets
from infra.process import ChildProcess
from infra.store.rows import TABLE_FOR_EVENT, RowContext, to_rows
from infra.topics import (
    DECISIONS_PLACEMENT,
    JOBS_EVENTS,
    JOBS_ROUTED,
    JOBS_SUBMITTED,
    NODE_INVENTORY,
    NODE_TELEMETRY,
    TOPICS,
)

pytestmark = pytest.mark.integration

# topics that go quiet once the fleet and the job load stop (region summaries never do)
CHECKED = {
    NODE_TELEMETRY: "node_telemetry",
    NODE_INVENTORY: "node_inventory",
    JOBS_SUBMITTED: "jobs_submitted",
    JOBS_ROUTED: "jobs_routed",
    DECISIONS_PLACEMENT: "placement_decisions",
    JOBS_EVENTS: "job_events",
}
OUTAGE_S = 30.0
TOPIC_EVENT = {t.name: t.event for t in TOPICS}


def _web(run: Running, page: str) -> httpx.Response:
    base = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
    return httpx.get(f"{base}{page}", timeout=5)


def _sql(run: Running, query: str, *, write: bool = False) -> list[list[Any]]:
    base = f"http://{run.config.worker.web_host}:{run.config.worker.web_port}"
    answer = httpx.post(f"{base}/sql/", json={"query": query, "write": write}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["rows"]


def _history(run: Running) -> dict[str, Any]:
    try:
        return _web(run, "/health/").json().get("dependencies", {}).get("history", {})
    except (httpx.HTTPError, ValueError):
        return {}


def _group(run: Running) -> str:
    return f"{run.config.worker.app_id}-history"


def _committed(run: Running) -> dict[str, dict[int, int]]:
    return {t: committed_offsets(run.config.kafka, _group(run), t) for t in CHECKED}


def _jobs(prefix: str, n: int) -> list[dict[str, Any]]:
    return [
        {"job_id": f"{prefix}-{i:03d}", "gpu_count": 1, "expected_duration_s": 2.0}
        for i in range(n)
    ]


def _stop_load(run: Running) -> None:
    run.stop.set()
    for thread in run.threads:
        thread.join(15)


def _caught_up(run: Running) -> bool:
    ends = {t: end_offsets(run.config.kafka, t) for t in CHECKED}
    done = _committed(run)
    return all(done[t].get(p, 0) >= end for t in CHECKED for p, end in ends[t].items() if end)


def _assert_stored_exactly_once(run: Running) -> None:
    """Every decodable event of the quiet topics is in its table once: none lost, none doubled."""
    for topic, table in CHECKED.items():
        reader = TopicReader(run.config, topic)
        reader.poll(3.0)
        reader.close()
        ids = {  # events that make rows (a telemetry heartbeat names no GPU: no row)
            record["event_id"]
            for record in reader.records
            if "event_id" in record and to_rows(TOPIC_EVENT[topic], record, RowContext())[1]
        }
        stored, rows = _sql(run, f"SELECT uniqExact(event_id), count() FROM {table}")[0]
        final_rows = _sql(run, f"SELECT count() FROM {table} FINAL")[0][0]
        assert stored == len(ids), f"{table}: {stored} events stored of {len(ids)}"
        assert rows == final_rows, f"{table}: {rows - final_rows} rows doubled"


def test_clickhouse_refusing_inserts_for_30s_then_back(config: Config) -> None:
    with run_stack(config) as run:
        assert wait_for(lambda: _history(run).get("state") == "ok", 90), run.worker.log_tail()
        assert wait_for(lambda: _sql(run, "SELECT count() FROM node_telemetry")[0][0] > 0, 60)
        tables = sorted(set(TABLE_FOR_EVENT.values()))
        for table in tables:
            _sql(run, f"ALTER TABLE {table} ADD CONSTRAINT gpuflow_outage CHECK 0", write=True)
        outage_started = time.monotonic()
        load = threading.Thread(
            target=submit_jobs, args=(run.config, _jobs("during", 60), 4.0), daemon=True
        )
        load.start()
        assert wait_for(lambda: _history(run).get("state") == "backing_off", 20), _history(run)
        held = _committed(run)  # from here on nothing may be committed: nothing is stored

        time.sleep(max(0.0, outage_started + OUTAGE_S / 2 - time.monotonic()))
        health = _web(run, "/health/")
        assert health.status_code == 200 and health.json()["live"] is True
        assert "history" in health.json()["degraded"]
        status = _web(run, "/metrics/").json()["dependencies"]["history"]
        assert status["insert_failures"] > 0 and "VIOLATED_CONSTRAINT" in status["last_error"]

        time.sleep(max(0.0, outage_started + OUTAGE_S - time.monotonic()))
        assert _committed(run) == held, "the sink committed offsets it had not stored"
        load.join(30)
        decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
        decided = final_decisions(decisions.poll(3.0))
        assert sum(j["job_id"] in decided for j in _jobs("during", 60)) == 60  # scheduling went on
        decisions.close()

        for table in tables:
            _sql(run, f"ALTER TABLE {table} DROP CONSTRAINT gpuflow_outage", write=True)
        assert wait_for(lambda: _history(run).get("state") == "ok", 30), _history(run)
        _stop_load(run)
        assert wait_for(lambda: _caught_up(run), 90), _history(run)
        _assert_stored_exactly_once(run)


def test_store_unavailable_at_start_then_opened(config: Config) -> None:
    directory = config.data_dir / "history"
    directory.mkdir(parents=True, exist_ok=True)
    holder = ChildProcess("chdb holder", config.data_dir / "holder.log")
    hold = (
        "import sys, time, clickhouse_connect; "
        "c = clickhouse_connect.get_client(dsn='chdb://' + sys.argv[1]); c.query('SELECT 1'); "
        "print('held', flush=True); "
        "time.sleep(600)"
    )
    holder.start([sys.executable, "-c", hold, str(directory.resolve())])
    try:
        assert wait_for(lambda: "held" in holder.log_tail(), 60), holder.log_tail()
        with run_stack(config) as run:
            assert wait_for(lambda: _history(run).get("state") == "store_unavailable", 90), (
                _history(run),
                run.worker.log_tail(),
            )
            submit_jobs(run.config, _jobs("closed", 10), 5.0)
            decisions = TopicReader(run.config, DECISIONS_PLACEMENT)
            assert wait_for(lambda: len(final_decisions(decisions.poll(0.5))) >= 10, 60)
            decisions.close()
            assert all(not offsets for offsets in _committed(run).values())
            holder.stop()  # the directory is free: the sink opens it and catches up
            assert wait_for(lambda: _history(run).get("state") == "ok", 60), _history(run)
            _stop_load(run)
            assert wait_for(lambda: _caught_up(run), 90), _history(run)
            _assert_stored_exactly_once(run)
    finally:
        holder.stop()
