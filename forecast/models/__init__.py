"""The forecasters, one per file, and the registry from name to builder.

| name | horizon it serves | library |
| --- | --- | --- |
| seasonal_naive | the baseline beside every model | numpy |
| holt_winters | short: the next hour in 5-minute steps | statsmodels |
| lstm | medium: the next day, hourly | torch (CPU) |
| prophet | long: the next week, hourly, with holidays | prophet |
| mstl | a daily and a weekly season (MSTL), damped Holt on the rest | statsmodels |
| lag_ridge | direct multi-step ridge on daily and weekly lags | numpy |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from forecast.base import Forecaster
from forecast.errors import ForecastError
from forecast.models.holt_winters import HoltWinters
from forecast.models.lag_ridge import LagRidge
from forecast.models.lstm import Lstm
from forecast.models.mstl import Mstl
from forecast.models.prophet import ProphetModel
from forecast.models.seasonal_naive import SeasonalNaive

__all__ = [
    "BASELINE",
    "MODELS",
    "HoltWinters",
    "LagRidge",
    "Lstm",
    "Mstl",
    "ProphetModel",
    "SeasonalNaive",
    "build",
]

BASELINE = "seasonal_naive"

MODELS: dict[str, Callable[..., Forecaster]] = {
    "seasonal_naive": SeasonalNaive,
    "holt_winters": HoltWinters,
    "lstm": Lstm,
    "prophet": ProphetModel,
    "mstl": Mstl,
    "lag_ridge": LagRidge,
}


def build(name: str, **kwargs: Any) -> Forecaster:
    """A configured forecaster by registry name."""
    try:
        builder = MODELS[name]
    except KeyError:
        known = ", ".join(MODELS)
        raise ForecastError(f"unknown forecaster {name!r} (known: {known})") from None
    return builder(**kwargs)
