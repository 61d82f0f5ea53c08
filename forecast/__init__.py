"""Demand forecasting on plain arrays: series, forecasters, rolling-origin backtests, plots.

Ground floor: numpy, statsmodels, torch and prophet only; nothing here talks to Kafka or
ClickHouse. The processor in `streams/forecasting/processor.py` feeds it series from the history.
"""

from __future__ import annotations

from forecast.backtesting import (
    SELECTED,
    BacktestConfig,
    BacktestResult,
    Choice,
    ScoreRow,
    backtest,
)
from forecast.base import FitContext, Fitted, Forecast, Forecaster
from forecast.errors import (
    ForecastError,
    ModelUnavailableError,
    SeriesError,
    SeriesTooShortError,
)
from forecast.models import BASELINE, MODELS, build
from forecast.pipeline import DEFAULT_PLANS, LiveForecaster, Outcome, Plan, fit_and_forecast
from forecast.selection import SelectionConfig
from forecast.series import (
    FILLS,
    Series,
    read_series_csv,
    regularize,
    season_length,
    write_series_csv,
)

__all__ = [
    "BASELINE",
    "DEFAULT_PLANS",
    "FILLS",
    "MODELS",
    "SELECTED",
    "BacktestConfig",
    "BacktestResult",
    "Choice",
    "FitContext",
    "Fitted",
    "Forecast",
    "ForecastError",
    "Forecaster",
    "LiveForecaster",
    "ModelUnavailableError",
    "Outcome",
    "Plan",
    "ScoreRow",
    "SelectionConfig",
    "Series",
    "SeriesError",
    "SeriesTooShortError",
    "backtest",
    "build",
    "fit_and_forecast",
    "read_series_csv",
    "regularize",
    "season_length",
    "write_series_csv",
]
