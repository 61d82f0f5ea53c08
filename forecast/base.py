"""What every forecaster is: fit on a history, update with new points, forecast with intervals.

A `Forecaster` is a model's configuration (constructor arguments validated there); `fit`
estimates it on a `Series` and returns a `Fitted`, which `update`s with points observed after
the history without re-estimating (a filter step, a new input window) and `forecast`s the next
steps from the end of what it has seen. The rolling-origin backtest and the live processor
both run models this way: refit on a cadence, update in between.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from forecast.series import Series

__all__ = [
    "FitContext",
    "Fitted",
    "Forecast",
    "Forecaster",
    "interval_offsets",
    "offset_forecast",
]

_MIN_ERRORS = 8  # fewer errors than this at a step: borrow the nearest step's spread


@dataclass(frozen=True, eq=False)
class Forecast:
    """Point forecast and interval for `steps` points from `start_s` (the origin)."""

    model: str
    start_s: int
    step_s: int
    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    level: float

    def __len__(self) -> int:
        return int(self.point.shape[0])

    def timestamps(self) -> np.ndarray:
        return self.start_s + self.step_s * np.arange(len(self), dtype=np.int64)


@dataclass(frozen=True)
class FitContext:
    """What a fit must serve: `horizon` steps ahead, the seasonal cycle, the interval level."""

    horizon: int
    season: int
    level: float = 0.8

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise ValueError(f"horizon must be >= 1 step, got {self.horizon}")
        if not 0.0 < self.level < 1.0:
            raise ValueError(f"interval level must be in (0, 1), got {self.level}")


@runtime_checkable
class Fitted(Protocol):
    """A model estimated on a history; it has seen `seen` points since the series start."""

    model: str
    seen: int

    def update(self, values: np.ndarray) -> None:
        """Take points observed after those seen, without re-estimating parameters."""
        ...

    def forecast(self, steps: int) -> Forecast:
        """The next `steps` points after the last seen, with the fit's interval level."""
        ...


class Forecaster(Protocol):
    """A configured model. `refit_every_seasons` is its refit cadence (0: update only)."""

    name: str
    refit_every_seasons: float

    def min_length(self, ctx: FitContext) -> int:
        """Fewest points `fit` accepts for this context."""
        ...

    def fit(self, history: Series, ctx: FitContext, previous: Fitted | None = None) -> Fitted:
        """Estimate on `history`; SeriesTooShortError below `min_length`.

        `previous` is this model's last fit on an earlier stretch of the same series: a model
        may start its estimation there (warm start) instead of from scratch.
        """
        ...


def interval_offsets(errors: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Lower and upper offsets per step from forecast errors (actual - forecast).

    `errors` has one column per step ahead (NaN where unknown). Each column's empirical
    quantiles at (1 - level) / 2 and (1 + level) / 2, widened for a finite sample as split
    conformal prediction does; a step with too few errors takes its nearest neighbour's.
    """
    errs = np.atleast_2d(np.asarray(errors, dtype=float))
    steps = errs.shape[1]
    lo, hi = np.full(steps, np.nan), np.full(steps, np.nan)
    for k in range(steps):
        col = errs[:, k][np.isfinite(errs[:, k])]
        n = len(col)
        if n < _MIN_ERRORS:
            continue
        q_hi = min(1.0, np.ceil((n + 1) * (1 + level) / 2) / n)
        lo[k] = np.quantile(col, 1.0 - q_hi)
        hi[k] = np.quantile(col, q_hi)
    known = np.flatnonzero(np.isfinite(lo))
    if not len(known):
        return np.zeros(steps), np.zeros(steps)
    nearest = known[np.abs(np.arange(steps)[:, None] - known[None, :]).argmin(axis=1)]
    return lo[nearest], hi[nearest]


def offset_forecast(
    model: str,
    origin_s: int,
    step_s: int,
    point: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    level: float,
) -> Forecast:
    """`point` within the fit's interval offsets (`interval_offsets`), one pair per step; past
    the steps they were fitted for, the last step's offsets hold."""
    steps = len(point)
    lo, hi = _hold_last(lo, steps), _hold_last(hi, steps)
    return Forecast(model, origin_s, step_s, point, point + lo, point + hi, level)


def _hold_last(offsets: np.ndarray, steps: int) -> np.ndarray:
    if len(offsets) >= steps:
        return offsets[:steps]
    return np.concatenate([offsets, np.full(steps - len(offsets), offsets[-1])])
