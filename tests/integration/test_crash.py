"""SIGKILL the worker mid-stream, restart it: no decision lost, none duplicated, no GPU booked
twice — at-least-once delivery made idempotent by the decision log."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from harness import (
    Running,
    TopicReader,
    duplicated,
    final_decisions,
    logged_overbooking,
    submit_jobs,
    wait_for,
)

from agents.jobgen import generate_jobs
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_ROUTED, JOBS_SUBMITTED

pytestmark = [pytest.mark.integration, pytest.mark.engines("logbroker", "tansu")]


def _lost(running: Running, want: set[str], decisions: TopicReader) -> str:
    """What became of the jobs without a final decision (for the failure message)."""
    lost = sorted(want - set(final_decisions(decisions.records)))
    seen = {d["job_id"]: d["outcome"] for d in decisions.records if d["job_id"] in lost}
    routed = TopicReader(running.config, JOBS_ROUTED)
    hops = {r["job"]["job_id"]: r["region"] for r in routed.poll(2.0) if r["job"]["job_id"] in lost}
    routed.close()
    return (
        f"{len(lost)} lost, e.g. {lost[:5]}; "
        f"their other decisions {dict(list(seen.items())[:10])}; "
        f"routed {len(hops)} of them {dict(list(hops.items())[:5])}; state {running.state()}\n"
        + running.worker.log_tail(4000)
    )


def _unhanded(running: Running, topics: tuple[str, ...]) -> dict[str, Any]:
    """Partitions whose fetched records did not all reach a stream (the restart-stall sign)."""
    cfg = running.config.worker
    page = httpx.get(f"http://{cfg.web_host}:{cfg.web_port}/consumer/", timeout=10).json()
    return {
        name: row
        for name, row in page["partitions"].items()
        if name.split("/")[0] in topics
        and row["position"]
        and row["read_offset"] != row["position"] - 1
    }


def _history_count(running: Running) -> int | None:
    cfg = running.config.worker
    query = {"query": "SELECT uniqExact(job_id) FROM placement_decisions WHERE outcome = 'PLACED'"}
    try:
        answer = httpx.post(f"http://{cfg.web_host}:{cfg.web_port}/sql/", json=query, timeout=10)
        return int(answer.json()["rows"][0][0]) if answer.status_code == 200 else None
    except (httpx.HTTPError, KeyError, ValueError):
        return None


def test_sigkill_mid_stream_loses_and_duplicates_nothing(running: Running) -> None:
    regions = [r.name for r in running.fleet.spec.regions]
    jobs = generate_jobs(300, seed=11, regions=regions, mean_duration_s=2.0, prefix="crash")
    for i, job in enumerate(jobs):
        job["allowed_regions"] = [regions[i % len(regions)]]
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    events = TopicReader(running.config, JOBS_EVENTS)
    sender = threading.Thread(target=submit_jobs, args=(running.config, jobs, 25.0))
    sender.start()

    # kill once decisions are flowing, with submissions still arriving
    assert wait_for(lambda: len(final_decisions(decisions.poll())) >= 60, 60), (
        running.worker.log_tail()
    )
    running.worker.kill()
    killed_at = len(final_decisions(decisions.poll()))
    time.sleep(1.0)
    running.restart_worker()
    sender.join(60)

    want = {j["job_id"] for j in jobs}
    # no second restart: a worker that stops fetching after recovery is the bug this catches
    # (streams/worker/transport.py: Faust resumed stream partitions before seeking them)
    assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 90), _lost(
        running, want, decisions
    )
    assert killed_at < len(jobs), "the kill must happen mid-stream"
    # every record the restarted worker fetched was handed to its stream, and it says it is live
    assert _unhanded(running, (JOBS_SUBMITTED, JOBS_ROUTED)) == {}
    cfg = running.config.worker
    health = httpx.get(f"http://{cfg.web_host}:{cfg.web_port}/health/", timeout=10)
    body = health.json()
    assert (health.status_code, body["live"], body["ready"], body["stalled"]) == (
        200,
        True,
        True,
        [],
    )
    decisions.poll(3.0)  # let any late duplicate arrive before judging
    assert duplicated(decisions.records) == {}  # once per job and placement epoch
    placed = [d for d in decisions.records if d.get("outcome") == "PLACED"]
    placed_ids = {d["job_id"] for d in placed}
    finished = lambda: {e["job_id"] for e in events.poll() if e["type"] == "FINISHED"}  # noqa: E731
    assert wait_for(lambda: placed_ids <= finished(), 90)
    assert logged_overbooking(decisions, events) == []
    # the restarted worker's history process owns the store again (the killed one let go)
    assert wait_for(lambda: _history_count(running) == len(placed_ids), 60)
    decisions.close()
    events.close()
