"""A seasonal forecast of a service's request rate for the next minutes, on its own history.

The same minutes a week ago (a day ago while there is less than a week), scaled by how the
last `level_minutes` compare with the same minutes then: the daily and weekly shape from the
history, the level from now. The scaler wants the peak over the horizon.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["DAY_MIN", "WEEK_MIN", "seasonal_forecast", "seasonal_peak"]

DAY_MIN = 1440
WEEK_MIN = 7 * DAY_MIN
_RATIO_BOUNDS = (0.5, 2.0)  # a burst or a gap moves the level, within reason


def seasonal_forecast(
    history: ArrayLike, horizon: int = 15, level_minutes: int = 15
) -> NDArray[np.float64]:
    """Per-minute rates for the `horizon` minutes after `history` (one rate per minute);
    the last rate held flat while there is less than a day of history."""
    h = np.asarray(history, dtype=np.float64)
    now = len(h)
    if now == 0:
        return np.zeros(horizon)
    season = WEEK_MIN if now >= WEEK_MIN + level_minutes else DAY_MIN
    if now < season + level_minutes:
        return np.full(horizon, h[-1])
    then = now - season
    base = h[then : then + horizon]
    if len(base) < horizon:
        base = np.concatenate(
            [base, np.full(horizon - len(base), base[-1] if len(base) else h[-1])]
        )
    before = float(h[then - level_minutes : then].mean())
    recent = float(h[now - level_minutes :].mean())
    ratio = np.clip(recent / before, *_RATIO_BOUNDS) if before > 0 else 1.0
    return np.asarray(base * ratio)


def seasonal_peak(history: ArrayLike, horizon: int = 15, level_minutes: int = 15) -> float:
    """The largest forecast rate over the next `horizon` minutes."""
    return float(seasonal_forecast(history, horizon, level_minutes).max())
