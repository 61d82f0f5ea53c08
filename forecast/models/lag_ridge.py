"""A lag-feature regressor for a daily and a weekly season: direct multi-step ridge, numpy only.

Each step k = 1..H ahead has its own linear map (fitted by ridge least squares on the history's
windows) of what is known at the origin: the last two points, the value one day and one week
before the step, the usual value of that time on the last days of the same kind (working day
or weekend, `forecast.features.profile`), the last day's mean and the change of the last point
over a day and over a week. Values are scaled by the history's level, so one map serves a
series whose level moves. Without a week of history before the training windows the weekly
lags are the daily ones. Intervals: empirical quantiles of the fit's own k-step residuals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast import features
from forecast.base import FitContext, Forecast, interval_offsets, offset_forecast
from forecast.errors import SeriesTooShortError
from forecast.series import Series

__all__ = ["NAME", "LagRidge"]

NAME = "lag_ridge"
_MIN_WINDOWS = 48  # training windows below this: too few to fit ~10 coefficients per step


def _design(
    y: np.ndarray, off: np.ndarray, origins: np.ndarray, steps: int, season: int, week: int
) -> np.ndarray:
    """(origins, steps, features); only values before each origin are read."""
    grid = (len(origins), steps)
    daily = features.naive(y, origins, steps, season)
    weekly = features.naive(y, origins, steps, week) if week else daily
    usual = features.profile(y, off, origins, steps, season, 7)
    last, before = y[origins - 1], y[origins - 2]
    day_ago = y[origins - 1 - season]
    week_ago = y[origins - 1 - week] if week else day_ago
    mean_day = np.stack([y[o - season : o].mean() for o in origins]) if len(origins) else last
    cols = [
        np.ones(grid),
        *(np.broadcast_to(c[:, None], grid) for c in (last, before, mean_day)),
        daily,
        weekly,
        usual,
        np.broadcast_to((last - day_ago)[:, None], grid),
        np.broadcast_to((last - week_ago)[:, None], grid),
    ]
    return np.stack(cols, axis=2)


@dataclass
class _Fitted:
    model: str
    start_s: int
    step_s: int
    level_pct: float
    season: int
    week: int
    scale: float
    coef: np.ndarray  # (steps, features)
    lo: np.ndarray
    hi: np.ndarray
    values: list[float]
    seen: int = field(default=0)

    def update(self, values: np.ndarray) -> None:
        self.values.extend(float(v) for v in np.asarray(values, dtype=float))
        self.seen = len(self.values)

    def forecast(self, steps: int) -> Forecast:
        n = len(self.values)
        k = min(steps, len(self.coef))
        y = np.concatenate([np.asarray(self.values), np.zeros(k)]) / self.scale
        ts = self.start_s + self.step_s * np.arange(len(y))
        x = _design(y, features.off_days(ts), np.array([n]), k, self.season, self.week)[0]
        point = (x * self.coef[:k]).sum(axis=1) * self.scale
        if steps > k:  # past the fitted steps: repeat the last season of the path
            point = np.concatenate(
                [point, point[k - self.season + np.arange(steps - k) % self.season]]
            )
        origin = self.start_s + n * self.step_s
        return offset_forecast(
            self.model, origin, self.step_s, point, self.lo, self.hi, self.level_pct
        )


class LagRidge:
    """Direct multi-step ridge on daily and weekly lags; refit once a season by default."""

    name = NAME

    def __init__(self, *, ridge: float = 0.01, refit_every_seasons: float = 1.0) -> None:
        if ridge < 0:
            raise ValueError("ridge must be >= 0")
        if refit_every_seasons < 0:
            raise ValueError("refit_every_seasons must be >= 0")
        self.ridge = ridge
        self.refit_every_seasons = refit_every_seasons

    def min_length(self, ctx: FitContext) -> int:
        return max(ctx.season + 2, 7) + ctx.horizon + _MIN_WINDOWS

    def fit(self, history: Series, ctx: FitContext, previous: Any = None) -> _Fitted:
        need = self.min_length(ctx)
        raw = history.values
        if len(raw) < need:
            raise SeriesTooShortError(NAME, need, len(raw), "a season and 48 training windows")
        season, steps = max(ctx.season, 1), ctx.horizon
        scale = float(np.mean(np.abs(raw))) or 1.0
        y = raw / scale
        week = 7 * season if len(y) >= 7 * season + 2 + steps + _MIN_WINDOWS else 0
        first = (week or season) + 2
        origins = np.arange(first, len(y) - steps + 1)
        off = features.off_days(history.timestamps())
        x = _design(y, off, origins, steps, season, week)
        target = y[origins[:, None] + np.arange(steps)[None, :]]
        coef = np.stack([_ridge(x[:, k], target[:, k], self.ridge) for k in range(steps)])
        resid = (target - (x * coef[None]).sum(axis=2)) * scale
        lo, hi = interval_offsets(resid, ctx.level)
        return _Fitted(
            NAME,
            history.start_s,
            history.step_s,
            ctx.level,
            season,
            week,
            scale,
            coef,
            lo,
            hi,
            list(raw),
            seen=len(raw),
        )


def _ridge(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin |x b - y|^2 + lam |b[1:]|^2 (the intercept, column 0, is not shrunk)."""
    penalty = lam * np.eye(x.shape[1])
    penalty[0, 0] = 0.0
    return np.linalg.solve(x.T @ x + penalty, x.T @ y)
