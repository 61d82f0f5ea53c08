"""The live forecaster: refit with a backtest when due, update in between."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from forecast import ForecastError, Plan, Series
from forecast.pipeline import LiveForecaster, forget, run_keyed

PLAN = Plan("test", 3600, 6, ("holt_winters",), history_s=30 * 86_400, refit_s=12 * 3600)


def test_refit_then_update_then_refit_when_due(seasonal: Callable[..., Series]) -> None:
    full = seasonal(days=10)
    live = LiveForecaster(PLAN)
    first = live.run(full.head(200))
    assert first.backtest is not None and first.chosen in ("seasonal_naive", "holt_winters")
    assert first.forecast.start_s == full.head(200).end_s and len(first.forecast) == 6
    assert first.baseline.model == "seasonal_naive"
    # 3 more hours: updated, not refit; forecasts start after the new points
    second = live.run(full.head(203))
    assert second.backtest is None and second.forecast.start_s == full.head(203).end_s
    # seasonal naive after the update: the value 24 steps before each target
    assert second.baseline.point.tolist() == full.values[203 - 24 : 203 - 24 + 6].tolist()
    # 12 hours after the refit it is due again
    third = live.run(full.head(212))
    assert third.backtest is not None


def test_a_history_that_skips_ahead_refits(seasonal: Callable[..., Series]) -> None:
    full = seasonal(days=10)
    live = LiveForecaster(PLAN)
    live.run(full.head(200))
    later = Series(full.start_s + 205 * 3600, 3600, full.values[205:210])  # 5 points missing
    # it refits (rather than forecasting from stale state), and 5 points are too few for that
    with pytest.raises(ForecastError, match="too short"):
        live.run(later)


def test_run_keyed_keeps_one_forecaster_per_key(seasonal: Callable[..., Series]) -> None:
    full = seasonal(days=10)
    forget(["a", "b"])
    first = run_keyed("a", PLAN, full.head(200))
    again = run_keyed("a", PLAN, full.head(201))
    other = run_keyed("b", PLAN, full.head(201))
    assert first.backtest is not None and again.backtest is None  # kept: updated
    assert other.backtest is not None  # a new key starts with a refit
    forget(["a", "b"])
