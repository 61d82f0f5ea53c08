"""Forecasts in the scheduler: deferral holds, headroom refusals, the forecast book.

The scheduler runs against plain dicts; the ForecastBook is the real one, fed with decoded
DemandForecast records by `apply` instead of its Kafka reader thread.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from infra.config import load_config
from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.base.outbox import Outgoing, now_ms
from streams.scheduler.core import Scheduler
from streams.scheduler.deferral import ForecastBook, ForecastUse

HOUR_MS = 3_600_000


def node(node_id: str, region: str, gpus: int = 8) -> dict[str, Any]:
    return {
        "node_id": node_id,
        "region": region,
        "gpu_model": "A100-80",
        "gpu_count": gpus,
        "gpu_memory_mib": 81920,
        "zone": "z1",
        "rack": "r1",
        "price_per_gpu_hour": 2.0,
    }


def job(job_id: str, **kw: Any) -> dict[str, Any]:
    return {
        "event_id": f"e-{job_id}",
        "ts": now_ms(),
        "job_id": job_id,
        "gpu_count": 1,
        "gpu_milli": 1000,
        "kind": "TRAINING",
        "precision": "FP16",
        **kw,
    }


def forecast(region: str, series: str, step_s: int, points: list[float], **kw: Any) -> dict:
    return {
        "region": region,
        "gpu_model": "*",
        "series": series,
        "plan": "medium",
        "issued_ts": now_ms() - 60_000,
        "step_s": step_s,
        "points": points,
        "selected": True,
        **kw,
    }


def make(*nodes: dict[str, Any], **forecast_settings: Any) -> tuple[Scheduler, ForecastBook]:
    base = load_config(env={})
    config = dataclasses.replace(
        base, forecast=dataclasses.replace(base.forecast, **forecast_settings)
    )
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    for n in nodes:
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    book = ForecastBook(config, SingleObjectCodec())
    s.forecasts = ForecastUse.from_config(config, book)
    return s, book


def decide(s: Scheduler, record: dict[str, Any]) -> list[Outgoing]:
    """Route a job and follow it through every placer hop, as the broker would."""
    out = s.route(record, started_ns=time.perf_counter_ns())
    decisions = []
    while out:
        msg = out.pop(0)
        if msg.topic == JOBS_ROUTED:
            out.extend(s.place(dict(msg.record), started_ns=time.perf_counter_ns()))
        else:
            decisions.append(msg)
    return decisions


def test_a_deferrable_job_waits_for_the_low_carbon_window() -> None:
    s, book = make(node("n1", "eu"), deferral_carbon_weight=1.0)
    # hourly carbon from a minute ago: high now, low from the third hour on
    book.apply(forecast("eu", "carbon_g_per_kwh", 3600, [450, 450, 120, 120, 450]))
    deadline = now_ms() + 4 * HOUR_MS
    [held] = decide(s, job("green", deferrable_until_ts=deadline))
    assert held.topic == DECISIONS_PLACEMENT and held.record["outcome"] == "QUEUED"
    assert "deferred until" in held.record["reasons"][0]
    until = s.queue["green"]["hold_until"]
    issued = book.curve("eu", "carbon_g_per_kwh", ("medium",))
    assert issued is not None and until == issued.issued_ms + 2 * HOUR_MS  # the third hour
    assert s.retry_queue("eu") == []  # capacity is free, but the hold is not over
    assert s.on_job_event({"job_id": "other", "type": "FINISHED", "region": "eu"}) == []
    s.queue["green"] = {**s.queue["green"], "hold_until": now_ms() - 1}  # the window opens
    [placed] = s.retry_queue("eu")
    assert placed.record["outcome"] == "PLACED" and "green" not in s.queue


def test_a_job_that_is_not_deferrable_is_never_held() -> None:
    s, book = make(node("n1", "eu"), deferral_carbon_weight=1.0)
    book.apply(forecast("eu", "carbon_g_per_kwh", 3600, [450, 450, 120, 120, 450]))
    [d] = decide(s, job("now"))
    assert d.record["outcome"] == "PLACED" and "now" not in s.queue


def test_without_a_fresh_forecast_nothing_is_held() -> None:
    s, book = make(node("n1", "eu"), deferral_carbon_weight=1.0, max_age_s=600.0)
    stale = forecast("eu", "carbon_g_per_kwh", 3600, [450, 120], issued_ts=now_ms() - HOUR_MS)
    book.apply(stale)
    [d] = decide(s, job("j", deferrable_until_ts=now_ms() + 3 * HOUR_MS))
    assert d.record["outcome"] == "PLACED"


def test_low_priority_work_stays_out_of_the_headroom() -> None:
    s, book = make(node("n1", "eu", gpus=8), node("n2", "us", gpus=8))
    # eu expects 5 GPUs of training requests in the next hour: 1.2 x 5 = 6 kept free
    book.apply(forecast("eu", "training_gpus_requested", 300, [5 / 12] * 12, plan="short"))
    [batch] = decide(s, job("b", kind="BATCH", gpu_count=4, allowed_regions=["eu", "us"]))
    assert batch.record["outcome"] == "PLACED" and batch.record["region"] == "us"
    [only_eu] = decide(s, job("b2", kind="BATCH", gpu_count=4, allowed_regions=["eu"]))
    assert only_eu.record["outcome"] == "QUEUED"  # waits: never placed into the headroom
    assert only_eu.record["refusals"] == {"headroom": 1}
    [training] = decide(s, job("t", kind="TRAINING", gpu_count=4, allowed_regions=["eu"]))
    assert training.record["outcome"] == "PLACED" and training.record["region"] == "eu"
    [urgent] = decide(s, job("u", kind="BATCH", priority=5, gpu_count=2, allowed_regions=["eu"]))
    assert urgent.record["outcome"] == "PLACED"  # priority above the line may use it


def test_the_region_views_carry_the_headroom() -> None:
    s, book = make(node("n1", "eu"))
    book.apply(forecast("eu", "inference_gpus_requested", 300, [1, 3, 2], plan="short"))
    assert s.region_views()["eu"].headroom_gpus == 5  # 1.5 x the peak 3 = 4.5 -> 5


def test_the_book_keeps_the_newest_chosen_forecast() -> None:
    _, book = make()
    book.apply(forecast("eu", "gpus_in_use", 300, [1.0], issued_ts=now_ms() - 1000))
    book.apply(forecast("eu", "gpus_in_use", 300, [2.0], issued_ts=now_ms() - 5000))  # older
    book.apply(forecast("eu", "gpus_in_use", 300, [3.0], selected=False))  # the baseline
    curve = book.curve("eu", "gpus_in_use", ("medium",))
    assert curve is not None and curve.points == (1.0,)
    assert book.curve("eu", "gpus_in_use", ("short",)) is None
