"""Model selection on earlier windows than the ones scored.

At a moment `a` (a forecast origin), a model's record for horizon h is its mean scaled error
(MASE) over the last `window` backtest origins whose h-step target was already observed at
`a` (origin + h <= a). The model with the lowest record is chosen; ties go to the earlier
model in the candidate order (the simpler one). A model with fewer than `min_count` scored
origins in the window cannot be chosen; with no such model, nothing is chosen (-1).

So the choice at `a` depends only on points before `a`: the window it is scored on is never
part of the record it was chosen by.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SelectionConfig", "choose", "window_scores"]


@dataclass(frozen=True)
class SelectionConfig:
    """`window` and `min_count` in origins; None: a week and two days of the series' steps.

    Errors of neighbouring origins are strongly correlated (the same hours, the same burst),
    so a record of one day is a handful of independent samples: two days are asked for.
    """

    window: int | None = None
    min_count: int | None = None

    def resolved(self, season: int, stride: int) -> tuple[int, int]:
        per_day = max(1, season // max(1, stride))
        window = self.window or 7 * per_day
        min_count = self.min_count or min(2 * per_day, window)
        if window < 1 or min_count < 1:
            raise ValueError("selection window and min_count must be >= 1 origin")
        return window, min(min_count, window)


def _bounds(
    origins: np.ndarray, horizon: int, at: np.ndarray, window: int
) -> tuple[np.ndarray, np.ndarray]:
    # origins are increasing; those with origin + horizon <= a had their target seen before a
    hi = np.searchsorted(np.asarray(origins) + horizon, np.asarray(at), side="right")
    return np.maximum(0, hi - window), hi


def window_scores(
    scaled: np.ndarray, origins: np.ndarray, horizon: int, at: np.ndarray, window: int
) -> tuple[np.ndarray, np.ndarray]:
    """Mean scaled error (models x moments) over each moment's window, and how many origins."""
    err = np.atleast_2d(np.asarray(scaled, dtype=float))
    finite = np.isfinite(err)
    sums = np.concatenate(
        [np.zeros((err.shape[0], 1)), np.cumsum(np.where(finite, err, 0.0), axis=1)], axis=1
    )
    counts = np.concatenate([np.zeros((err.shape[0], 1)), np.cumsum(finite, axis=1)], axis=1)
    lo, hi = _bounds(origins, horizon, at, window)
    total = sums[:, hi] - sums[:, lo]
    count = counts[:, hi] - counts[:, lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return mean, count.astype(np.int64)


def choose(
    scaled: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    at: np.ndarray,
    *,
    window: int,
    min_count: int,
) -> np.ndarray:
    """Index of the chosen model at each moment in `at`, or -1 when none has a record yet."""
    mean, count = window_scores(scaled, origins, horizon, at, window)
    eligible = (count >= min_count) & np.isfinite(mean)
    ranked = np.where(eligible, mean, np.inf)
    best = np.argmin(ranked, axis=0)  # first of equals: the earlier candidate wins ties
    return np.where(eligible.any(axis=0), best, -1)
