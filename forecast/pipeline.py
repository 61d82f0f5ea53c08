"""From a series to the forecast to publish: backtest, choose, fit, forecast; then update.

A `Plan` is one horizon: its step, how many steps, and the candidate models beside the
seasonal-naive baseline. `LiveForecaster` keeps one series' fitted models between runs:
when its refit is due it backtests the candidates on the recent history, keeps the model
the earlier windows chose (`BacktestResult.path_choice`) and refits it and the baseline on
everything; otherwise it only updates them with the points that arrived and forecasts again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from forecast.backtesting import BacktestConfig, BacktestResult, backtest
from forecast.base import FitContext, Fitted, Forecast
from forecast.errors import ForecastError, SeriesError
from forecast.models import BASELINE, build
from forecast.series import Series, season_length

__all__ = [
    "DEFAULT_PLANS",
    "LiveForecaster",
    "Outcome",
    "Plan",
    "fit_and_forecast",
    "forget",
    "run_keyed",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Plan:
    """One forecast horizon: `steps` points every `step_s` seconds from `models`."""

    name: str
    step_s: int
    steps: int
    models: tuple[str, ...]
    history_s: int  # history loaded for it
    refit_s: int  # backtest and refit this often; update in between
    backtest_seasons: float = 7.0  # origins of the backtest span this many seasons
    subject: str = "region"  # whose series it runs: regions' or services' (SeriesKind.by)

    def __post_init__(self) -> None:
        if self.step_s <= 0 or self.steps < 1 or self.history_s < self.step_s:
            raise ValueError(f"plan {self.name}: step, steps and history must be positive")

    @property
    def candidates(self) -> tuple[str, ...]:
        return (BASELINE, *(m for m in self.models if m != BASELINE))


DEFAULT_PLANS: tuple[Plan, ...] = (
    Plan("short", 300, 12, ("holt_winters",), history_s=7 * 86_400, refit_s=3_600),
    Plan("medium", 3600, 24, ("lstm", "holt_winters"), history_s=35 * 86_400, refit_s=6 * 3_600),
    Plan("long", 3600, 168, ("prophet",), history_s=56 * 86_400, refit_s=24 * 3_600),
    # a service's rate for its autoscaler. Five days at 1-minute steps: Holt-Winters' daily
    # season is 1,440 states; its backtest and refit take ~6 s a service on the loaded two-core
    # box, seven days 30 s (docs/forecasting.md)
    Plan(
        "service",
        60,
        15,
        ("holt_winters",),
        history_s=5 * 86_400,
        refit_s=3_600,
        subject="service",
    ),
)


@dataclass(frozen=True, eq=False)
class Outcome:
    """What one run produced: the chosen model's forecast and the baseline's beside it."""

    chosen: str
    forecast: Forecast
    baseline: Forecast
    backtest: BacktestResult | None  # present when this run backtested (a refit)
    notes: tuple[str, ...] = ()


def fit_and_forecast(
    series: Series, model: Any, steps: int, level: float = 0.8, season: int | None = None
) -> tuple[Fitted, Forecast]:
    """Fit one model on the whole series and forecast `steps` from its end."""
    ctx = FitContext(steps, season or season_length(series.step_s), level)
    fitted = model.fit(series, ctx)
    return fitted, fitted.forecast(steps)


@dataclass
class LiveForecaster:
    """One series under one plan, across runs (kept by the forecast processor)."""

    plan: Plan
    level: float = 0.8
    model_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    chosen: str = BASELINE
    fitted: Fitted | None = None
    baseline: Fitted | None = None
    start_s: int = -1
    refit_at_s: int = -1  # series end (s) at the last refit

    def run(self, series: Series) -> Outcome:
        """Refit when due (or when the series no longer extends the last), else update."""
        if series.step_s != self.plan.step_s:
            raise SeriesError(
                f"plan {self.plan.name}: step {series.step_s} s, expected {self.plan.step_s}"
            )
        due = (
            self.fitted is None
            or self.baseline is None
            or series.start_s > self.start_s + self.baseline.seen * series.step_s  # gap too old
            or series.end_s - self.refit_at_s >= self.plan.refit_s
        )
        if due:
            return self._refit(series)
        return self._update(series)

    def _models(self, names: Sequence[str]) -> dict[str, Any]:
        return {name: build(name, **dict(self.model_args.get(name, {}))) for name in names}

    def _refit(self, series: Series) -> Outcome:
        season = season_length(series.step_s)
        span = int(self.plan.backtest_seasons * season)
        config = BacktestConfig(
            horizons=(1, self.plan.steps),
            level=self.level,
            first_origin=max(len(series) - span, 0) or None,
        )
        notes: list[str] = []
        result: BacktestResult | None = None
        try:
            result = backtest(series, self._models(self.plan.candidates), _usable(config, series))
            notes.extend(result.notes)
            self.chosen = result.path_choice.model or BASELINE
        except ForecastError as exc:  # too short to backtest: the baseline if it can run
            notes.append(str(exc))
            self.chosen = BASELINE
        models = self._models(list(dict.fromkeys([self.chosen, BASELINE])))
        self.baseline, base_fc = fit_and_forecast(
            series, models[BASELINE], self.plan.steps, self.level
        )
        if self.chosen == BASELINE:
            self.fitted, chosen_fc = self.baseline, base_fc
        else:
            self.fitted, chosen_fc = fit_and_forecast(
                series, models[self.chosen], self.plan.steps, self.level
            )
        self.start_s, self.refit_at_s = series.start_s, series.end_s
        log.info(
            "forecast refit plan=%s chosen=%s points=%d", self.plan.name, self.chosen, len(series)
        )
        return Outcome(self.chosen, chosen_fc, base_fc, result, tuple(notes))

    def _update(self, series: Series) -> Outcome:
        assert self.fitted is not None and self.baseline is not None
        distinct = [self.fitted] if self.fitted is self.baseline else [self.fitted, self.baseline]
        for fitted in distinct:
            seen_end = self.start_s + fitted.seen * series.step_s
            first_new = (seen_end - series.start_s) // series.step_s
            if 0 <= first_new < len(series):
                fitted.update(series.values[first_new:])
        steps = self.plan.steps
        return Outcome(
            self.chosen, self.fitted.forecast(steps), self.baseline.forecast(steps), None
        )


def _usable(config: BacktestConfig, series: Series) -> BacktestConfig:
    """A first origin that leaves the history before it at least half the series."""
    if config.first_origin is None or config.first_origin < len(series) // 2:
        return replace(config, first_origin=None)
    return config


# -- the process-pool side: one live forecaster per series key, kept between runs ------------

_LIVE: dict[str, LiveForecaster] = {}


def run_keyed(
    key: str,
    plan: Plan,
    series: Series,
    *,
    level: float = 0.8,
    model_args: Mapping[str, Mapping[str, Any]] | None = None,
) -> Outcome:
    """Run one series' forecaster in this process, keeping it for the next run of the key.

    The forecast processor calls this in a one-process pool, so fitted models (and torch,
    statsmodels, Prophet) stay out of the process that owns the store.
    """
    live = _LIVE.get(key)
    if live is None or live.plan != plan or live.level != level:
        live = LiveForecaster(plan, level, dict(model_args or {}))
        _LIVE[key] = live
    return live.run(series)


def forget(keys: Sequence[str]) -> None:
    """Drop the forecasters of series that are gone."""
    for key in keys:
        _LIVE.pop(key, None)
