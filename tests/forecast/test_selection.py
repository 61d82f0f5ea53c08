"""Selection never sees the window it is scored on."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from forecast import BacktestConfig, SelectionConfig, Series, backtest, build
from forecast.backtesting import SELECTED
from forecast.selection import choose

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
