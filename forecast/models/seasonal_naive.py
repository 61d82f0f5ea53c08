"""Seasonal naive: the value one season earlier (the baseline every model must beat).

Point k steps ahead = y[t + k - m * ceil(k / m)], m the season. Intervals come from the
same forecast's errors over the history (no parameters, so in-sample errors are honest).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast.base import FitContext, Forecast, interval_offsets, offset_forecast
from forecast.errors import SeriesTooShortError
from forecast.series import Series

__all__ = ["NAME", "SeasonalNaive"]

NAME = "seasonal_naive"


def _lags(steps: int, season: int) -> np.ndarray:
    k = np.arange(1, steps + 1)
    return season * np.ceil(k / season).astype(np.int64)


@dataclass
class _Fitted:
    model: str
    start_s: int
    step_s: int
    season: int
    level: float
    values: list[float]
    lo: np.ndarray
    hi: np.ndarray
    seen: int = field(init=False)

    def __post_init__(self) -> None:
        self.seen = len(self.values)

    def update(self, values: np.ndarray) -> None:
        self.values.extend(float(v) for v in np.asarray(values, dtype=float))
        self.seen = len(self.values)

    def forecast(self, steps: int) -> Forecast:
        last = np.asarray(self.values[-self.season :])  # every step copies from these
        point = last[self.season + np.arange(steps) - _lags(steps, self.season)]
        origin = self.start_s + self.seen * self.step_s
        return offset_forecast(self.model, origin, self.step_s, point, self.lo, self.hi, self.level)


class SeasonalNaive:
    """The seasonal-naive baseline; no parameters, so it never needs a refit."""

    name = NAME
    refit_every_seasons = 7.0  # only to refresh the interval widths

    def min_length(self, ctx: FitContext) -> int:
        return 2 * ctx.season + 1  # a season to copy, and a season of errors for intervals

    def fit(self, history: Series, ctx: FitContext, previous: Any = None) -> _Fitted:
        y = history.values
        need = self.min_length(ctx)
        if len(y) < need:
            raise SeriesTooShortError(NAME, need, len(y), f"two seasons of {ctx.season}")
        lags = _lags(ctx.horizon, ctx.season)
        errors = np.full((len(y), ctx.horizon), np.nan)
        for k, lag in enumerate(lags):
            if lag < len(y):
                errors[lag:, k] = y[lag:] - y[:-lag]
        lo, hi = interval_offsets(errors, ctx.level)
        return _Fitted(
            NAME, history.start_s, history.step_s, ctx.season, ctx.level, list(y), lo, hi
        )
