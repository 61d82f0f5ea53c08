"""MSTL: a daily and a weekly season taken out by statsmodels' MSTL, damped Holt on the rest.

MSTL (Bandara, Hyndman & Bergmeir 2021) splits the history into a trend, one seasonal
component per period (a day, and a week once the history holds two) and a remainder. The
forecast repeats each component's last cycle and adds a damped-trend exponential smoothing
forecast of the seasonally adjusted series (trend + remainder), as STL forecasting does.
Between refits the seasonal cycles stay as fitted and the smoothing is updated with the new
points' adjusted values. Intervals: quantiles of the smoothing's own in-sample k-step errors.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast.base import FitContext, Forecast, interval_offsets, offset_forecast
from forecast.errors import ModelUnavailableError, SeriesTooShortError
from forecast.models.holt_winters import damped_sums
from forecast.series import Series

__all__ = ["NAME", "Mstl"]

NAME = "mstl"


@dataclass
class _Fitted:
    model: str
    start_s: int
    step_s: int
    level_pct: float
    cycles: list[np.ndarray]  # each period's last fitted cycle; index `anchor` reads cycle[0]
    anchor: int
    alpha: float
    beta: float
    phi: float
    level: float
    trend: float
    lo: np.ndarray
    hi: np.ndarray
    seen: int = field(default=0)

    def seasonal(self, index: np.ndarray) -> np.ndarray:
        out = np.zeros(len(index))
        for cycle in self.cycles:
            out += cycle[(index - self.anchor) % len(cycle)]
        return out

    def update(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=float)
        adjusted = values - self.seasonal(self.seen + np.arange(len(values)))
        a, b, phi = self.alpha, self.beta, self.phi
        level, trend = self.level, self.trend
        for d in adjusted:
            new_level = a * d + (1 - a) * (level + phi * trend)
            trend = b * (new_level - level) + (1 - b) * phi * trend
            level = new_level
        self.level, self.trend = level, trend
        self.seen += len(values)

    def forecast(self, steps: int) -> Forecast:
        point = self.level + damped_sums(self.phi, steps) * self.trend
        point = point + self.seasonal(self.seen + np.arange(steps))
        origin = self.start_s + self.seen * self.step_s
        return offset_forecast(
            self.model, origin, self.step_s, point, self.lo, self.hi, self.level_pct
        )


class Mstl:
    """Daily and weekly MSTL plus damped Holt; refit once a season by default."""

    name = NAME

    def __init__(self, *, weeks: bool = True, refit_every_seasons: float = 1.0) -> None:
        if refit_every_seasons < 0:
            raise ValueError("refit_every_seasons must be >= 0")
        self.weeks = weeks
        self.refit_every_seasons = refit_every_seasons

    def min_length(self, ctx: FitContext) -> int:
        return 2 * ctx.season + 2 if ctx.season > 1 else 10

    def fit(self, history: Series, ctx: FitContext, previous: Any = None) -> _Fitted:
        need = self.min_length(ctx)
        y = history.values
        if len(y) < need:
            raise SeriesTooShortError(NAME, need, len(y), f"two seasons of {ctx.season}")
        periods = [p for p in (ctx.season, 7 * ctx.season if self.weeks else 0) if p > 1]
        periods = [p for p in periods if len(y) > 2 * p]  # MSTL drops the others
        mstl, ets = _statsmodels()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            seasonal = np.zeros((len(y), 0))
            if periods:
                res = mstl(y, periods=periods, iterate=2).fit()
                seasonal = np.asarray(res.seasonal, dtype=float).reshape(len(y), -1)
            adjusted = y - seasonal.sum(axis=1)
            fit = ets(adjusted, trend="add", damped_trend=True).fit()
        p = fit.params
        alpha, beta, phi = (
            float(p[k]) for k in ("smoothing_level", "smoothing_trend", "damping_trend")
        )
        level, trend = np.asarray(fit.level, float), np.asarray(fit.trend, float)
        errors = _errors(y, seasonal, periods, level, trend, phi, ctx.horizon)
        lo, hi = interval_offsets(errors, ctx.level)
        cycles = [seasonal[len(y) - q :, i] for i, q in enumerate(periods)]
        return _Fitted(
            NAME,
            history.start_s,
            history.step_s,
            ctx.level,
            cycles,
            len(y),
            alpha,
            beta,
            phi,
            float(level[-1]),
            float(trend[-1]),
            lo,
            hi,
            seen=len(y),
        )


def _errors(
    y: np.ndarray,
    seasonal: np.ndarray,
    periods: list[int],
    level: np.ndarray,
    trend: np.ndarray,
    phi: float,
    steps: int,
) -> np.ndarray:
    """errors[t, k-1] = y[t+k] - its forecast after point t, the seasons taken cycles back.

    The components at t+k itself were estimated with y[t+k] in view, and STL smooths each
    phase across neighbouring cycles: such in-sample errors put 46 % of a test's points
    inside an 80 % interval, one cycle back 61 %. The daily season is taken two cycles
    back, the weekly one (two or three cycles in a month) one.
    """
    n = len(y)
    errors = np.full((n, steps), np.nan)
    sums = damped_sums(phi, steps)
    back = [p * (int(np.ceil(steps / p)) + (i == 0)) for i, p in enumerate(periods)]
    t = np.arange(max(back, default=1), n)
    for k in range(1, steps + 1):
        tt = t[t + k < n]
        pred = level[tt] + sums[k - 1] * trend[tt]
        for i, p in enumerate(periods):  # the day two cycles back, the week one
            pred = pred + seasonal[tt + k - p * (int(np.ceil(k / p)) + (i == 0)), i]
        errors[tt, k - 1] = y[tt + k] - pred
    return errors


def _statsmodels() -> tuple[Any, Any]:
    try:
        from statsmodels.tsa.holtwinters import ExponentialSmoothing
        from statsmodels.tsa.seasonal import MSTL
    except ImportError as exc:  # pragma: no cover - an install without the extra
        raise ModelUnavailableError(
            f"{NAME}: statsmodels is not installed (pip install 'gpuflow[forecast]')"
        ) from exc
    return MSTL, ExponentialSmoothing
