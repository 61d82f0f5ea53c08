"""Scaling decisions: out at once, in after the hysteresis, never below the forecast."""

from __future__ import annotations

import numpy as np
import pytest

from scorer.services import (
    Action,
    ScaleState,
    decide,
    hpa_desired,
    lead_minutes,
    parse_service,
    replicas_for,
    seasonal_forecast,
)

# capacity_rps 100 per replica, headroom 0 so the arithmetic is plain: need = ceil(rate / 100)
SPEC = parse_service(
    {
        "name": "svc",
        "regions": ["r"],
        "capacity_rps": {"H100": 100},
        "min_replicas": 1,
        "max_replicas": 10,
        "headroom": 0,
        "scale_in_after_s": 300,
        "model_load_s": 90,
        "cold_start_s": 240,
    }
)
POOL = np.arange(11, dtype=np.float64) * 100.0


@pytest.mark.parametrize(
    ("rate", "want"),
    [(0, 1), (100, 1), (101, 2), (950, 10), (5000, 10)],  # min 1, max 10
)
def test_replicas_for(rate: float, want: int) -> None:
    assert replicas_for(rate, POOL, SPEC) == want


def test_lead_is_the_slowest_tier_plus_the_minute_it_lands() -> None:
    assert lead_minutes(SPEC) == 5  # ceil(240 / 60) + 1


@pytest.mark.parametrize(
    ("have", "observed", "forecast", "action", "target"),
    [
        (3, 450, [0] * 15, Action.SCALE_OUT, 5),  # observed 450 -> 5
        (3, 250, [250] * 3 + [650] + [0] * 11, Action.SCALE_OUT, 7),  # 650 within the lead
        (3, 250, [250] * 10 + [650] * 5, Action.HOLD, 3),  # 650 beyond the lead: wait for it
        (5, 450, [450] * 15, Action.HOLD, 5),
        (5, 150, [150] * 15, Action.HOLD, 5),  # below, but the hysteresis has not passed
    ],
)
def test_decide_table(
    have: int, observed: float, forecast: list[float], action: Action, target: int
) -> None:
    decision, _ = decide(SPEC, POOL, ScaleState(have), observed, forecast, now_s=0.0)
    assert (decision.action, decision.target) == (action, target)
    assert "observed" in decision.reason and "forecast" in decision.reason


def test_scale_in_waits_out_the_hysteresis_and_keeps_the_forecasts_need() -> None:
    state = ScaleState(6)
    forecast = [150.0] * 10 + [320.0] * 5  # the horizon's peak needs 4
    for now in (0.0, 120.0, 240.0):
        decision, state = decide(SPEC, POOL, state, 150.0, forecast, now)
        assert decision.action is Action.HOLD and state.replicas == 6
    decision, state = decide(SPEC, POOL, state, 150.0, forecast, 300.0)
    assert (decision.action, decision.target) == (Action.SCALE_IN, 4)  # not 2: the forecast
    assert (decision.need_observed, decision.need_forecast) == (2, 4)


def test_a_need_back_at_the_replicas_restarts_the_hysteresis() -> None:
    state = ScaleState(4)
    _, state = decide(SPEC, POOL, state, 150.0, [150.0], 0.0)
    _, state = decide(SPEC, POOL, state, 390.0, [390.0], 200.0)  # need 4 again
    decision, _ = decide(SPEC, POOL, state, 150.0, [150.0], 400.0)
    assert decision.action is Action.HOLD  # 200 s below since, not 400


def test_a_rise_is_assumed_to_go_on_one_more_look() -> None:
    # 300 after 200: plan for 300 + 100 = 400 -> 4 replicas
    decision, _ = decide(SPEC, POOL, ScaleState(3), 300.0, [300.0], 0.0, previous_rps=200.0)
    assert decision.target == 4


@pytest.mark.parametrize(
    ("rate", "want"),
    [(0, 1), (139, 1), (141, 2), (700, 5), (10_000, 10)],  # ceil(r / (0.7 x 200))
)
def test_hpa_desired(rate: float, want: int) -> None:
    assert hpa_desired(SPEC, rate, replica_max_rps=200.0, target_utilisation=0.7) == want


def test_seasonal_forecast_repeats_yesterday_at_todays_level() -> None:
    day = np.sin(np.arange(1440) / 1440 * 2 * np.pi) * 100 + 300
    history = np.concatenate([day, day[:600] * 1.2])  # a day, then today 20 % busier
    ahead = seasonal_forecast(history, horizon=15)
    assert ahead == pytest.approx(day[600:615] * 1.2)
    assert list(seasonal_forecast(history[:100], horizon=3)) == [history[99]] * 3  # too short
