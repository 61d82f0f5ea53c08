"""What the forecast processor writes: a `DemandForecast` record per forecast (the chosen
model's, and the seasonal-naive baseline's when another model was chosen; every series is >= 0,
so forecasts are clipped there) and the `forecast_scores` rows of a refit's backtest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from forecast import BacktestResult, Forecast, Outcome, Plan, Series
from streams.base.outbox import new_event_id, now_ms

__all__ = ["MODEL_SYMBOLS", "SeriesJob", "forecast_record", "forecast_records", "score_rows"]

MODEL_SYMBOLS = {  # registry name -> DemandForecast.model
    "seasonal_naive": "SEASONAL_NAIVE",
    "holt_winters": "HOLT_WINTERS",
    "lstm": "LSTM",
    "prophet": "PROPHET",
}


@dataclass(frozen=True, eq=False)
class SeriesJob:
    """One series under one plan: a region's (and GPU model's), or a service's."""

    kind: str
    region: str
    gpu_model: str
    plan: Plan
    series: Series
    service: str = ""  # a service's request rate: region and gpu_model are '*'

    @property
    def key(self) -> str:
        whose = f"{self.service}@{self.region}" if self.service else self.region
        return f"{self.kind}/{whose}/{self.gpu_model}/{self.plan.name}"


def forecast_records(job: SeriesJob, outcome: Outcome, level: float) -> list[dict[str, Any]]:
    """The chosen model's forecast (`selected`), and the baseline's when it was not chosen."""
    chosen = forecast_record(job, outcome.forecast, outcome.chosen, True, level)
    if outcome.chosen == "seasonal_naive":
        return [chosen]
    return [
        chosen,
        forecast_record(job, outcome.baseline, "seasonal_naive", False, level),
    ]


def forecast_record(
    job: SeriesJob, forecast: Forecast, model: str, selected: bool, level: float
) -> dict[str, Any]:
    """A DemandForecast record; every gpuflow series is >= 0, so the forecast is clipped there."""
    issued = forecast.start_s * 1000

    def clean(values: np.ndarray) -> list[float]:
        return [float(v) for v in np.maximum(np.nan_to_num(values, nan=0.0), 0.0)]

    return {
        "event_id": new_event_id(job.key, str(issued), model),
        "ts": now_ms(),
        "schema": 3,
        "region": job.region,
        "gpu_model": job.gpu_model,
        "issued_ts": issued,
        "step_s": job.plan.step_s,
        "points": clean(forecast.point),
        "lower": clean(forecast.lower),
        "upper": clean(forecast.upper),
        "interval": level,
        "model": MODEL_SYMBOLS[model],
        "series": job.kind,
        "plan": job.plan.name,
        "selected": selected,
        "service": job.service,
    }


def score_rows(job: SeriesJob, outcome: Outcome, result: BacktestResult) -> list[dict[str, Any]]:
    """One `forecast_scores` row per model and horizon of a refit's backtest."""
    at = job.series.end_s * 1000
    window = result.path_choice.window_mase
    return [
        {
            "ts": at,
            "event_id": new_event_id(job.key, str(at), row.model, str(row.horizon_steps)),
            "region": job.region,
            "gpu_model": job.gpu_model,
            "series": job.kind,
            "plan": job.plan.name,
            "step_s": job.plan.step_s,
            "model": row.model,
            "horizon_steps": row.horizon_steps,
            "smape": row.smape,
            "mase": row.mase,
            "coverage": row.coverage,
            "origins": row.origins,
            "chosen": row.model == outcome.chosen,
            "window_mase": float(window.get(row.model, math.nan)),
            "points": len(job.series),
            "filled": int(job.series.filled.sum()),
        }
        for row in result.rows
    ]
