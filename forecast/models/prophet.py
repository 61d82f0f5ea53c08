"""Prophet for the next week: trend, daily and weekly seasonality, and a holiday calendar.

Holidays come from the `holidays` package Prophet ships with (country configurable, CN by
default); nothing is downloaded. Two additions to plain Prophet, both on by default:

* `off_day_daily`: working days and off days (weekends and the country's public holidays)
  get their own daily shape (Prophet's conditional seasonalities). Human-driven demand has a
  flatter day when offices are closed, which one additive daily curve cannot express.
* `residual_ar`: Prophet has no memory of the last points, so its errors run in streaks
  (a busy day, a large job holding GPUs for hours). The forecast adds phi^k times the latest
  residual, phi the lag-1 autocorrelation of the in-sample residuals (0 when they have none);
  this only matters for the first steps and fades with the horizon.

Prophet's curve depends on the timestamps only, so between refits `update` only tracks the
latest residual, and forecasts are cut from one prediction over the stretch until the next
refit. The interval is Prophet's own (trend and noise uncertainty, `uncertainty_samples`
draws), moved with the point. Timestamps are read in UTC.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from forecast import features
from forecast.base import FitContext, Forecast
from forecast.errors import ModelUnavailableError, SeriesTooShortError
from forecast.series import DAY_S, WEEK_S, Series

__all__ = ["NAME", "ProphetModel"]

NAME = "prophet"
_QUIET = {
    "cmdstanpy": logging.WARNING,
    "prophet": logging.WARNING,
    "prophet.plot": logging.CRITICAL,
}
_DAILY_ORDER = 6  # Fourier terms per daily shape (Prophet's default daily order is 4)


def _prophet() -> Any:
    # before the import: Prophet logs "Importing plotly failed" at ERROR (we plot with
    # matplotlib), and cmdstanpy every chain start and stop at INFO through its own handler
    for name, level in _QUIET.items():
        logger = logging.getLogger(name)
        if not logger.handlers:  # cmdstanpy adds a handler (and DEBUG) to a bare logger
            logger.addHandler(logging.NullHandler())
        logger.setLevel(level)
    try:
        from prophet import Prophet
    except ImportError as exc:  # pragma: no cover - an install without the extra
        raise ModelUnavailableError(
            f"{NAME}: prophet is not installed (pip install 'gpuflow[forecast]')"
        ) from exc
    return Prophet


@dataclass
class _Fitted:
    model: str
    start_s: int
    step_s: int
    level: float
    frame: Any  # ts -> prediction frame (with condition columns)
    prophet: Any
    block: int  # points predicted at once
    seed: int
    phi: float
    residual: float
    seen: int = field(default=0)
    _cache_from: int = -1
    _cache: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))

    def update(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype=float)
        if not len(values):
            return
        last = self.seen + len(values) - 1
        self._ensure(last, 1)
        self.residual = float(values[-1] - self._cache[last - self._cache_from, 0])
        self.seen += len(values)

    def forecast(self, steps: int) -> Forecast:
        self._ensure(self.seen, steps)
        rows = self._cache[self.seen - self._cache_from : self.seen - self._cache_from + steps]
        shift = self.residual * self.phi ** np.arange(1, steps + 1)
        origin = self.start_s + self.seen * self.step_s
        point, lower, upper = (rows[:, j] + shift for j in range(3))
        return Forecast(self.model, origin, self.step_s, point, lower, upper, self.level)

    def _ensure(self, first: int, count: int) -> None:
        """Predictions for points first..first+count-1 in the cache."""
        start = self._cache_from
        if start < 0 or first < start or first + count > start + len(self._cache):
            self._predict(first, max(count, self.block))

    def _predict(self, first: int, count: int) -> None:
        ts = self.start_s + self.step_s * np.arange(first, first + count)
        state = np.random.get_state()  # Prophet draws its interval from numpy's global RNG
        np.random.seed(self.seed)
        try:
            out = self.prophet.predict(self.frame(ts))
        finally:
            np.random.set_state(state)
        self._cache = out[["yhat", "yhat_lower", "yhat_upper"]].to_numpy(dtype=float)
        self._cache_from = first


class ProphetModel:
    """The long-horizon forecaster (Prophet, MAP fit)."""

    name = NAME

    def __init__(
        self,
        *,
        country: str = "CN",
        uncertainty_samples: int = 300,
        changepoint_prior_scale: float = 0.05,
        off_day_daily: bool = True,
        residual_ar: bool = True,
        refit_every_seasons: float = 1.0,
        seed: int = 0,
    ) -> None:
        if uncertainty_samples < 1:
            raise ValueError("uncertainty_samples must be >= 1 (the interval comes from them)")
        self.country = country.strip().upper()
        self.uncertainty_samples = uncertainty_samples
        self.changepoint_prior_scale = changepoint_prior_scale
        self.off_day_daily = off_day_daily
        self.residual_ar = residual_ar
        self.refit_every_seasons = refit_every_seasons
        self.seed = seed
        if self.country:
            _check_country(self.country)

    def min_length(self, ctx: FitContext) -> int:
        return max(2 * ctx.season, 10)

    def fit(self, history: Series, ctx: FitContext, previous: Any = None) -> _Fitted:
        need = self.min_length(ctx)
        if len(history) < need:
            raise SeriesTooShortError(NAME, need, len(history), f"two seasons of {ctx.season}")
        prophet_cls = _prophet()
        span = len(history) * history.step_s
        daily = history.step_s < DAY_S and span >= 2 * DAY_S
        split = daily and self.off_day_daily and span >= 2 * WEEK_S  # enough off days seen
        model = prophet_cls(
            daily_seasonality=daily and not split,
            weekly_seasonality=span >= 2 * WEEK_S,
            yearly_seasonality=False,
            interval_width=ctx.level,
            uncertainty_samples=self.uncertainty_samples,
            changepoint_prior_scale=self.changepoint_prior_scale,
        )
        if split:
            for name in ("work_day", "off_day"):
                model.add_seasonality(
                    name=f"daily_{name}",
                    period=1,
                    fourier_order=_DAILY_ORDER,
                    condition_name=name,
                )
        if self.country:
            model.add_country_holidays(country_name=self.country)
        frame = _Frame(self.country if split else None)
        ts = history.timestamps()
        model.fit(frame(ts, history.values))
        phi, residual = self._residual_ar(model, frame, ts, history.values)
        block = max(ctx.horizon, round(self.refit_every_seasons * ctx.season) + ctx.horizon)
        return _Fitted(
            NAME,
            history.start_s,
            history.step_s,
            ctx.level,
            frame,
            model,
            block,
            self.seed,
            phi,
            residual,
            seen=len(history),
        )

    def _residual_ar(
        self, model: Any, frame: Any, ts: np.ndarray, y: np.ndarray
    ) -> tuple[float, float]:
        """Lag-1 autocorrelation of the in-sample residuals (in [0, 0.99]) and the last one."""
        if not self.residual_ar:
            return 0.0, 0.0
        samples, model.uncertainty_samples = model.uncertainty_samples, 0  # point only: fast
        try:
            fitted = model.predict(frame(ts))["yhat"].to_numpy(dtype=float)
        finally:
            model.uncertainty_samples = samples
        r = y - fitted
        denom = float(r[:-1] @ r[:-1])
        phi = float(r[1:] @ r[:-1]) / denom if denom > 0 else 0.0
        return float(np.clip(phi, 0.0, 0.99)), float(r[-1])


class _Frame:
    """Builds Prophet's input frame: ds (UTC, naive), y, and the day-type conditions."""

    def __init__(self, country: str | None) -> None:
        self.country = country

    def __call__(self, ts_s: np.ndarray, values: np.ndarray | None = None) -> Any:
        import pandas as pd

        ts = np.asarray(ts_s, dtype=np.int64)
        frame = pd.DataFrame({"ds": pd.to_datetime(ts, unit="s")})
        if values is not None:
            frame["y"] = values
        if self.country is not None:
            off = features.off_days(ts, self.country)
            frame["off_day"], frame["work_day"] = off, ~off
        return frame


def _check_country(country: str) -> None:
    try:
        import holidays
    except ImportError:  # pragma: no cover - prophet's dependency; checked again at fit
        return
    try:
        holidays.country_holidays(country)
    except NotImplementedError:
        raise ValueError(f"{NAME}: no holiday calendar for country {country!r}") from None
