"""Generated series with known seasonality, small enough for seconds-long tests.

Handed to tests as the `seasonal` fixture (the suite imports test modules by path).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from forecast import Series

START = 1_741_564_800  # 2025-03-10T00:00:00Z, a Monday


def make_seasonal(days: int = 14, step_s: int = 3600, noise: float = 2.0, seed: int = 0) -> Series:
    """100 + a daily swing of 20 + a weekend dip of 15 + 0.5 a day of trend + N(0, noise)."""
    rng = np.random.default_rng(seed)
    ts = START + step_s * np.arange(days * 86_400 // step_s)
    day = (ts % 86_400) / 86_400
    weekend = ((ts - START) // 86_400) % 7 >= 5
    values = (
        100.0
        + 20.0 * np.sin(2 * np.pi * (day - 0.3))
        - 15.0 * weekend
        + 0.5 * (ts - START) / 86_400
        + rng.normal(0.0, noise, len(ts))
    )
    return Series(START, step_s, values, name="seasonal")


@pytest.fixture
def seasonal() -> Callable[..., Series]:
    return make_seasonal


@pytest.fixture(scope="session")
def four_weeks_backtest() -> tuple[Series, object]:
    """Every model backtested on four weeks of hourly points (origins from day 14, every 3 h).

    Refits once a week and 10 LSTM epochs keep it to seconds; shared by the accuracy and
    interval tests.
    """
    from forecast import BacktestConfig, backtest, build

    series = make_seasonal(days=28, seed=0)
    models = {
        "seasonal_naive": build("seasonal_naive"),
        "holt_winters": build("holt_winters", refit_every_seasons=7),
        "lstm": build("lstm", epochs=10),
        "prophet": build("prophet", refit_every_seasons=7),
        "mstl": build("mstl", refit_every_seasons=7),
        "lag_ridge": build("lag_ridge", refit_every_seasons=7),
    }
    return series, backtest(series, models, BacktestConfig(horizons=(1, 24), stride=3))
