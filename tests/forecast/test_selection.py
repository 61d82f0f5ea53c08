"""Selection never sees the window it is scored on."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from forecast import BacktestConfig, SelectionConfig, Series, backtest, build
from forecast.backtesting import SELECTED
from forecast.selection import choose, combine

# scaled errors of two models at origins 0..9 (one step apart)
A = [0, 0, 0, 0, 0, 5, 5, 5, 5, 5]  # perfect, then bad from origin 5
B = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize(
    ("horizon", "expected"),
    [
        # h = 1: at origin i the record is origins j <= i - 1, the last 3, at least 2 of them
        #   i = 0, 1: fewer than 2 -> none (-1); i = 2..5: A averages 0 < 1 -> A (0), even at
        #   i = 5 where A's own error is 5: that error is not in its record yet;
        #   i = 6: (0 + 0 + 5) / 3 = 1.67 > 1 -> B; from then on A's record only grows worse
        (1, [-1, -1, 0, 0, 0, 0, 1, 1, 1, 1]),
        # h = 2: a target is seen two origins later, so everything shifts by one
        (2, [-1, -1, -1, 0, 0, 0, 0, 1, 1, 1]),
    ],
)
def test_choice_uses_only_targets_seen_before_the_origin(horizon: int, expected: list[int]) -> None:
    scaled = np.array([A, B], dtype=float)
    origins = np.arange(10)
    got = choose(scaled, origins, horizon, origins, window=3, min_count=2)
    assert got.tolist() == expected


def test_ties_go_to_the_earlier_candidate() -> None:
    scaled = np.ones((2, 4))
    assert choose(scaled, np.arange(4), 1, np.array([3]), window=3, min_count=1).tolist() == [0]


def _config() -> BacktestConfig:
    return BacktestConfig(horizons=(1, 6), selection=SelectionConfig(window=24, min_count=12))


def _models() -> dict[str, object]:
    return {
        "seasonal_naive": build("seasonal_naive"),
        "holt_winters": build("holt_winters"),
        "lstm": build("lstm", epochs=2, refit_every_seasons=3),
    }


def test_forecasts_and_choices_ignore_everything_from_the_origin_on(
    seasonal: Callable[..., Series],
) -> None:
    """Scramble the series from point k on: nothing decided at origins <= k may change."""
    series = seasonal(days=9)
    k = 170
    rng = np.random.default_rng(5)
    changed = series.values.copy()
    changed[k:] = changed[k:] * rng.uniform(0.2, 3.0, len(changed) - k)
    other = Series(series.start_s, series.step_s, changed)
    first = backtest(series, _models(), _config())  # type: ignore[arg-type]
    second = backtest(other, _models(), _config())  # type: ignore[arg-type]
    upto = first.origins <= k
    assert upto.sum() > 20 and (first.origins > k).sum() > 20
    for h in (1, 6):
        assert np.array_equal(first.picks[h][upto], second.picks[h][upto])
    for name in _models():
        run_a, run_b = first.runs[name], second.runs[name]
        for a, b in ((run_a.point, run_b.point), (run_a.lower, run_b.lower)):
            assert np.array_equal(a[upto], b[upto], equal_nan=True), name
            assert not np.array_equal(a, b, equal_nan=True), name  # later ones did change


def test_selected_is_scored_only_where_it_had_a_record(seasonal: Callable[..., Series]) -> None:
    series = seasonal(days=9)
    models = {"seasonal_naive": build("seasonal_naive"), "holt_winters": build("holt_winters")}
    result = backtest(series, models, _config())
    for h in (1, 6):
        picked = result.picks[h] >= 0
        in_range = result.origins + h - 1 < len(series)
        # the first origin with a record: 12 origins whose target was already seen
        assert np.flatnonzero(picked)[0] == 12 + h - 1
        rows = {r.model: r for r in result.rows if r.horizon_steps == h}
        assert rows[SELECTED].origins == int((picked & in_range).sum())
        assert {r.origins for r in rows.values()} == {rows[SELECTED].origins}  # like for like
    assert result.path_choice.model in models
    assert set(result.path_choice.window_mase) == set(models)


def _days(*daily: float, per_day: int = 4) -> list[float]:
    return [v for v in daily for _ in range(per_day)]


def test_the_default_stays_unless_the_gain_holds_across_days() -> None:
    """Model 1 beats the default (0) on average in both cases; only a steady gain moves it."""
    default = _days(1, 1, 1, 1, 1, 1)
    steady = _days(0.8, 0.8, 0.8, 0.8, 0.8, 0.8)  # 20 % better every day
    lucky = _days(1.1, 1.05, 1.1, 1.05, 1.1, 0.0)  # 10 % better on average, from one day
    origins, at = np.arange(24), np.array([24])
    rule = {"window": 24, "min_count": 8, "default": 0, "margin": 0.05, "block": 4}
    for confidence, other, expected in ((2.0, steady, 1), (2.0, lucky, 0), (0.0, lucky, 1)):
        scaled = np.array([default, other], dtype=float)
        got = choose(scaled, origins, 1, at, **rule, confidence=confidence)  # type: ignore[arg-type]
        assert got.tolist() == [expected], (confidence, other)


def test_a_gain_below_the_margin_keeps_the_default() -> None:
    scaled = np.array([_days(1, 1, 1, 1), _days(0.97, 0.97, 0.97, 0.97)])
    rule = {"window": 16, "min_count": 8, "default": 0, "block": 4, "confidence": 2.0}
    at = np.array([16])
    assert choose(scaled, np.arange(16), 1, at, **rule, margin=0.05).tolist() == [0]  # type: ignore[arg-type]
    assert choose(scaled, np.arange(16), 1, at, **rule, margin=0.0).tolist() == [1]  # type: ignore[arg-type]


def test_recent_origins_weigh_more() -> None:
    # model 0 was good long ago and bad lately, model 1 the other way round
    scaled = np.array([[0.0] * 8 + [1.0] * 4, [1.0] * 8 + [0.2] * 4])
    at, origins = np.array([12]), np.arange(12)
    flat = choose(scaled, origins, 1, at, window=12, min_count=4)
    recent = choose(scaled, origins, 1, at, window=12, min_count=4, half_life=2.0)
    assert flat.tolist() == [0] and recent.tolist() == [1]


def test_combinations_take_the_best_few_by_their_record_before_the_moment() -> None:
    # records at one moment: models 0..3 with 0.1, 0.2, 0.3, 0.9; points 10, 20, 30, 1000
    mean = np.array([[0.1], [0.2], [0.3], [0.9]])
    count = np.full((4, 1), 10)
    values = np.array([[[10.0], [20.0], [30.0], [1000.0]]])
    median, weighted = combine(values, mean, count, min_count=5, best=3)
    w = np.array([10.0, 5.0, 10.0 / 3.0])
    assert median.tolist() == [[20.0]]
    assert weighted[0, 0] == pytest.approx((w @ [10.0, 20.0, 30.0]) / w.sum())
    few = np.array([[10], [10], [2], [10]])  # model 2 has too short a record: 3 is in instead
    median, _ = combine(values, mean, few, min_count=5, best=3)
    assert median.tolist() == [[20.0]]  # median of 10, 20, 1000


def test_the_selected_forecast_ignores_everything_from_the_origin_on(
    seasonal: Callable[..., Series],
) -> None:
    """With combinations and the guard: the selected point at origins <= k never changes."""
    series = seasonal(days=9)
    k = 170
    changed = series.values.copy()
    changed[k:] = changed[k:] * np.random.default_rng(6).uniform(0.2, 3.0, len(changed) - k)
    other = Series(series.start_s, series.step_s, changed)
    config = BacktestConfig(
        horizons=(1, 6), selection=SelectionConfig(window=24, min_count=12, confidence=1.0)
    )
    first = backtest(series, _models(), config)  # type: ignore[arg-type]
    second = backtest(other, _models(), config)  # type: ignore[arg-type]
    assert first.candidates[-2:] == ("median_best", "weighted_best")
    upto = first.origins <= k
    for h in (1, 6):
        a, b = first.selected[h], second.selected[h]
        assert np.isfinite(a[upto]).sum() > 20
        assert np.array_equal(a[upto], b[upto], equal_nan=True)
        assert not np.array_equal(a, b, equal_nan=True)
