"""Which forecast the autoscaler scales on: the forecast processor's latest forecast of the
service (read by the worker's real ForecastBook) while it is fresh, its own in-worker seasonal
forecast otherwise; the decision and the `/services/` view name the source."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import load_config
from infra.servicespec import service_record
from infra.topics import SERVICES_SCALING
from schemas import SingleObjectCodec
from scorer.services import parse_service
from streams.scheduler.deferral import ForecastBook
from streams.services.autoscaler import IN_WORKER, Autoscaler

SPEC = {
    "name": "chat", "params_b": 1, "precision": "FP16", "batch": 8, "context": 1024,
    "capacity_rps": {"H100": 100}, "min_replicas": 1, "max_replicas": 8, "regions": ["eu"],
    "headroom": 0.15, "warm_pool": 0, "warm_share": 0, "scale_in_after_s": 30,
    "model_load_s": 0, "cold_start_s": 0,
}  # fmt: skip
NODE = {"node_id": "n1", "region": "eu", "zone": "z1", "gpu_model": "H100", "gpu_count": 8,
        "gpu_memory_mib": 81920, "rack": "r1", "price_per_gpu_hour": 2.0}  # fmt: skip
MIN = 60_000
PROCESSOR = "forecast processor, model HOLT_WINTERS"


def _forecast(service: str, issued_ms: int, points: list[float]) -> dict[str, Any]:
    """A DemandForecast of the service plan, as the processor publishes it (decoded)."""
    return {
        "event_id": f"f-{service}-{issued_ms}", "ts": issued_ms, "schema": 3, "region": "*",
        "gpu_model": "*", "issued_ts": issued_ms, "step_s": 60, "points": points,
        "lower": [], "upper": [], "interval": 0.8, "model": "HOLT_WINTERS",
        "series": "service_requests_per_s", "plan": "service", "selected": True,
        "service": service,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("issued_ago_ms", "points", "forecast_rps", "need_forecast", "source"),
    [
        # issued a minute ago: its 14 steps from the minute under way; 500 x 1.15 / 100 -> 6
        (MIN, [500.0] * 15, 500.0, 6, PROCESSOR),
        # five minutes (and a second) ago: the five steps gone are not looked at, 300 -> 4
        (5 * MIN + 1_000, [900.0] * 5 + [300.0] * 10, 300.0, 4, PROCESSOR),
        # ten minutes ago, past the 7-minute age limit: the in-worker forecast, flat 50 -> 1
        (10 * MIN, [500.0] * 15, 50.0, 1, IN_WORKER),
    ],
)
def test_the_processors_forecast_is_used_while_fresh(
    world: Any,
    issued_ago_ms: int,
    points: list[float],
    forecast_rps: float,
    need_forecast: int,
    source: str,
) -> None:
    w = world(NODE)
    book = ForecastBook(load_config(env={}), SingleObjectCodec(), clock=lambda: w.now)
    scaler = Autoscaler(w.s, stale=set, forecasts=book.service_curve, forecast_max_age_ms=7 * MIN)
    scaler.on_spec(service_record(parse_service(SPEC)))
    book.apply(_forecast("chat", w.now - issued_ago_ms, points))
    book.apply(_forecast("other", w.now, [5_000.0] * 15))  # another service's: not chat's
    scaler.on_load({"service": "chat", "ts": w.now, "requests_per_s": 50.0, "zone": ""})
    (decision,) = [dict(m.record) for m in scaler.tick(w.now) if m.topic == SERVICES_SCALING]
    assert decision["forecast_rps"] == forecast_rps
    assert decision["need_forecast"] == need_forecast
    assert decision["reason"].endswith(f"; forecast: {source}"), decision["reason"]
    assert scaler.view()["services"]["chat"]["forecast_source"] == source


def test_without_a_processor_forecast_the_in_worker_one_is_used(world: Any) -> None:
    w = world(NODE)
    scaler = Autoscaler(w.s, stale=set)  # no forecast book (forecasting off)
    scaler.on_spec(service_record(parse_service(SPEC)))
    scaler.on_load({"service": "chat", "ts": w.now, "requests_per_s": 120.0, "zone": ""})
    (decision,) = [dict(m.record) for m in scaler.tick(w.now) if m.topic == SERVICES_SCALING]
    assert decision["forecast_rps"] == 120.0  # under a day of history: the rate now, held
    assert decision["reason"].endswith(f"; forecast: {IN_WORKER}")
