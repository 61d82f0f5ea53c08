"""Green deferral on the running worker: held until the low-carbon window, never past the deadline.

A carbon forecast for one region (4-second steps so the test runs in seconds; production
forecasts are hourly) goes onto `gpuflow.forecasts.demand`, as the forecast processor would
publish it. A deferrable job submitted while carbon is high must be QUEUED with the reason,
then PLACED once the low-carbon window opens and before its latest start; a job submitted
at the same moment without a deadline is placed at once and never held.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from harness import Running, TopicReader, submit_jobs, wait_for

from infra.kafka import producer
from infra.topics import DECISIONS_PLACEMENT, FORECASTS_DEMAND
from schemas import SingleObjectCodec

pytestmark = pytest.mark.integration

STEP_S = 4
CARBON = [450.0, 450.0, 450.0, 120.0, 120.0, 120.0, 450.0, 450.0, 450.0, 450.0]  # low: 12-24 s


def _publish_carbon(running: Running, region: str, issued_ms: int) -> None:
    record = {
        "event_id": str(uuid.uuid4()),
        "ts": issued_ms,
        "schema": 2,
        "region": region,
        "gpu_model": "*",
        "issued_ts": issued_ms,
        "step_s": STEP_S,
        "points": CARBON,
        "lower": [c * 0.9 for c in CARBON],
        "upper": [c * 1.1 for c in CARBON],
        "interval": 0.8,
        "model": "PROPHET",
        "series": "carbon_g_per_kwh",
        "plan": "medium",
        "selected": True,
    }
    p = producer(running.config.kafka)
    p.produce(FORECASTS_DEMAND, SingleObjectCodec().encode("DemandForecast", record), key=b"k")
    p.flush(10)


def _regions(running: Running) -> dict:
    try:
        return running.state().get("regions", {})
    except httpx.HTTPError:  # the worker's pages are not up yet
        return {}


def _job(job_id: str, region: str, **kw: object) -> dict[str, object]:
    return {
        "job_id": job_id,
        "kind": "TRAINING",
        "precision": "FP16",
        "gpu_count": 1,
        "gpu_milli": 1000,
        "allowed_regions": [region],
        "expected_duration_s": 2.0,
        **kw,
    }


def test_a_deferrable_job_runs_in_the_low_carbon_window(running: Running) -> None:
    region = running.fleet.spec.regions[0].name
    assert wait_for(lambda: region in _regions(running), 90), running.worker.log_tail()
    decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
    issued = int(time.time() * 1000)
    _publish_carbon(running, region, issued)
    time.sleep(2.0)  # the worker's forecast book reads it
    low_from, low_to = issued + 3 * STEP_S * 1000, issued + 6 * STEP_S * 1000
    deadline = issued + 9 * STEP_S * 1000
    green, plain = f"green-{uuid.uuid4().hex[:6]}", f"plain-{uuid.uuid4().hex[:6]}"
    submit_jobs(
        running.config,
        [_job(green, region, deferrable_until_ts=deadline), _job(plain, region)],
        rate_per_s=50,
    )

    def placed(job_id: str) -> dict | None:
        return next(
            (d for d in decisions.poll() if d["job_id"] == job_id and d["outcome"] == "PLACED"),
            None,
        )

    assert wait_for(lambda: placed(green) is not None and placed(plain) is not None, 60), (
        [d for d in decisions.records if d.get("job_id") in (green, plain)],
        running.worker.log_tail(),
    )
    mine = {j: [d for d in decisions.records if d["job_id"] == j] for j in (green, plain)}
    held = mine[green][0]
    assert held["outcome"] == "QUEUED" and "deferred until" in held["reasons"][0], held
    assert held["ts"] < low_from  # held while carbon was high ...
    green_placed = placed(green)
    assert green_placed is not None
    assert low_from <= green_placed["ts"] <= min(low_to, deadline)  # ... run in the window
    assert [d["outcome"] for d in mine[plain]] == ["PLACED"]  # never held
    plain_placed = placed(plain)
    assert plain_placed is not None and plain_placed["ts"] < low_from
    decisions.close()
