"""Rolling-origin backtest: every model forecasts from many origins, as it would have live.

Origins run from `first_origin` to the end in `stride` steps. At each origin a model sees
only the points before it: it is refit there when its cadence (`refit_every_seasons`) is due,
otherwise updated with the points since. Each origin's errors at horizon h are scaled by the
in-sample seasonal-naive error of the history before that origin (MASE).

`selected` is the model selection itself, scored out of sample: at each origin it uses the
model with the best record on earlier origins (`forecast.selection`), and only origins where
such a record exists are scored, for every model alike, so the rows compare like with like
(`forecast.scoring`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from forecast.base import FitContext, Fitted, Forecaster
from forecast.errors import ForecastError, ModelUnavailableError, SeriesTooShortError
from forecast.scoring import SELECTED, BacktestResult, Choice, ModelRun, ScoreRow, score
from forecast.selection import SelectionConfig
from forecast.series import Series, season_length

__all__ = [
    "SELECTED",
    "BacktestConfig",
    "BacktestResult",
    "Choice",
    "ModelRun",
    "ScoreRow",
    "backtest",
    "run_model",
]

log = logging.getLogger(__name__)

Progress = Callable[[str, int, int], None]  # model, origins done, origins in all
_FIT_FAULTS = (ValueError, RuntimeError, ArithmeticError, np.linalg.LinAlgError)


@dataclass(frozen=True)
class BacktestConfig:
    """`first_origin` None: the later of the models' minimum history and half the series."""

    horizons: tuple[int, ...] = (1,)
    level: float = 0.8
    season: int | None = None
    first_origin: int | None = None
    stride: int = 1
    selection: SelectionConfig = field(default_factory=SelectionConfig)

    def __post_init__(self) -> None:
        if not self.horizons or min(self.horizons) < 1:
            raise ValueError(f"horizons must be steps >= 1, got {self.horizons}")
        if self.stride < 1:
            raise ValueError(f"stride must be >= 1, got {self.stride}")


def run_model(
    model: Forecaster,
    series: Series,
    origins: np.ndarray,
    ctx: FitContext,
    progress: Progress | None = None,
) -> ModelRun:
    """Forecast `ctx.horizon` steps from each origin, refitting on the model's cadence."""
    steps = ctx.horizon
    shape = (len(origins), steps)
    point, lower, upper = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, np.nan)
    refit = (
        max(1, round(model.refit_every_seasons * ctx.season)) if model.refit_every_seasons else 0
    )
    fitted: Fitted | None = None
    fitted_at, fits, notes = -1, 0, []
    for i, origin in enumerate(int(o) for o in origins):
        due = fitted is None or (refit and origin - fitted_at >= refit)
        if due:
            try:
                fitted, fitted_at = model.fit(series.head(origin), ctx, fitted), origin
                fits += 1
            except SeriesTooShortError:
                fitted = None
            except _FIT_FAULTS as exc:
                notes.append(f"{model.name}: fit at origin {origin} failed: {exc}")
                log.warning(
                    "forecast fit failed model=%s origin=%d error=%s", model.name, origin, exc
                )
                fitted = None
        elif fitted is not None and origin > fitted.seen:
            fitted.update(series.values[fitted.seen : origin])
        if fitted is not None:
            f = fitted.forecast(steps)
            point[i], lower[i], upper[i] = f.point, f.lower, f.upper
        if progress is not None:
            progress(model.name, i + 1, len(origins))
    return ModelRun(point, lower, upper, fits, tuple(notes))


def _first_origin(config: BacktestConfig, n: int, needs: Sequence[int]) -> int:
    if config.first_origin is not None:
        first = config.first_origin
    else:
        first = max(min(needs, default=1), n // 2)
    if not 1 <= first < n:
        raise SeriesTooShortError("backtest", first + 1, n, "history before the first origin")
    return first


def backtest(
    series: Series,
    models: Mapping[str, Forecaster],
    config: BacktestConfig | None = None,
    *,
    progress: Progress | None = None,
) -> BacktestResult:
    """Score every model, and the selection among them, from rolling origins."""
    config = config or BacktestConfig()
    season = config.season or season_length(series.step_s)
    steps = max(config.horizons)
    ctx = FitContext(steps, season, config.level)
    n = len(series)
    usable, notes = {}, []
    for name, model in models.items():
        need = model.min_length(ctx)
        if need >= n:
            notes.append(str(SeriesTooShortError(name, need + 1, n, "history plus one origin")))
        else:
            usable[name] = model
    if not usable:
        raise ForecastError("; ".join(notes) or "no forecaster to backtest")
    first = _first_origin(config, n, [m.min_length(ctx) for m in usable.values()])
    origins = np.arange(first, n, config.stride)
    runs: dict[str, ModelRun] = {}
    for name, model in usable.items():
        try:
            runs[name] = run_model(model, series, origins, ctx, progress)
        except ModelUnavailableError as exc:
            notes.append(str(exc))
            continue
        notes.extend(runs[name].notes)
    if not runs:
        raise ForecastError("; ".join(notes))
    return score(series, runs, origins, config, season, tuple(notes))
