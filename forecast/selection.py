"""Model selection and combination on earlier windows than the ones scored.

At a moment `a` (a forecast origin), a model's record for horizon h is its mean scaled error
(MASE) over the last `window` backtest origins whose h-step target was already observed at
`a` (origin + h <= a), recent origins weighted more: an origin `half_life` origins older than
the newest counts half as much. A model with fewer than `min_count` scored origins in the
window cannot be chosen; with no such model, nothing is chosen (-1).

Choice, guarded: the `default` model (Holt-Winters) stays unless the best record beats its
record by `margin` (a share): one lucky week is not enough to leave a model that is rarely
far off. Without the default among the candidates, or before it has a record, the best
record wins. Ties go to the earlier model in the candidate order (the simpler one).

Combinations: at each moment the `best` models with the lowest records are combined, by the
median of their forecasts and by their mean weighted by 1 / record. The combinations are
candidates like the others, with records of their own.

So every choice and weight at `a` depends only on points before `a`: the window it is
scored on is never part of the record it was chosen by.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np

__all__ = ["COMBINATIONS", "SelectionConfig", "choose", "combine", "window_scores"]

COMBINATIONS = ("median_best", "weighted_best")


@dataclass(frozen=True)
class SelectionConfig:
    """`window`, `min_count` and `half_life` in origins; None: two weeks, two days, 3 days.

    Errors of neighbouring origins are strongly correlated (the same hours, the same burst),
    so a record of one day is a handful of independent samples: two days are asked for, and
    a model leaves the default only on a gain that holds across the window's days.
    Measured on the bench's series (docs/forecasting.md): without the confidence test the
    selection lost up to 6 % to Holt-Winters on a noisy series for many a margin and
    half-life; with a normal threshold it still lost 3 % on series added later, where it left
    Holt-Winters on three days' evidence; with Student's t at 2 standard errors, at most
    1.5 % on all nine for half-lives of one to seven days (three days: 0.8 %).
    """

    window: int | None = None
    min_count: int | None = None
    half_life: float | None = None
    margin: float = 0.05
    confidence: float = 2.0  # standard errors of the gain over the default, over days
    default: str = "holt_winters"
    best: int = 3  # models in a combination; 0: no combinations

    def resolved(self, season: int, stride: int) -> tuple[int, int, float]:
        per_day = max(1, season // max(1, stride))
        window = self.window or 14 * per_day
        min_count = self.min_count or min(2 * per_day, window)
        half_life = self.half_life or 3.0 * per_day
        if window < 1 or min_count < 1 or half_life <= 0:
            raise ValueError("selection window, min_count and half_life must be >= 1 origin")
        if not 0.0 <= self.margin < 1.0 or self.best < 0:
            raise ValueError("selection margin must be in [0, 1) and best >= 0")
        return window, min(min_count, window), half_life


def window_scores(
    scaled: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    at: np.ndarray,
    window: int,
    half_life: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean scaled error (models x moments) over each moment's window, and counts.

    `half_life` None weighs every origin in the window alike.
    """
    err = np.atleast_2d(np.asarray(scaled, dtype=float))
    at = np.atleast_1d(np.asarray(at))
    # origins are increasing; those with origin + horizon <= a had their target seen before a
    hi = np.searchsorted(np.asarray(origins) + horizon, at, side="right")
    lo = np.maximum(0, hi - window)
    mean = np.full((err.shape[0], len(at)), np.nan)
    count = np.zeros((err.shape[0], len(at)), dtype=np.int64)
    for j, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if b <= a:
            continue
        block = err[:, a:b]
        ok = np.isfinite(block)
        age = np.arange(b - a)[::-1]
        w = np.ones(b - a) if half_life is None else 0.5 ** (age / half_life)
        wsum = (ok * w).sum(axis=1)
        count[:, j] = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean[:, j] = np.where(
                wsum > 0, (np.where(ok, block, 0.0) * w).sum(axis=1) / wsum, np.nan
            )
    return mean, count


def choose(
    scaled: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    at: np.ndarray,
    *,
    window: int,
    min_count: int,
    half_life: float | None = None,
    default: int = -1,
    margin: float = 0.0,
    confidence: float = 0.0,
    block: int = 1,
) -> np.ndarray:
    """Index of the chosen model at each moment in `at`, or -1 when none has a record yet.

    With a `default`, another model is chosen only when its record beats the default's by
    `margin` and its gain, over the window's blocks of `block` origins, is at least
    `confidence` standard errors from zero (`_passes`); the best such record wins.
    """
    err = np.atleast_2d(np.asarray(scaled, dtype=float))
    mean, count = window_scores(err, origins, horizon, at, window, half_life)
    eligible = (count >= min_count) & np.isfinite(mean)
    ranked = np.where(eligible, mean, np.inf)
    best = np.argmin(ranked, axis=0)  # first of equals: the earlier candidate wins ties
    picks = np.where(eligible.any(axis=0), best, -1)
    if default < 0:
        return picks
    hi = np.searchsorted(np.asarray(origins) + horizon, np.atleast_1d(at), side="right")
    for j in np.flatnonzero(eligible[default]):
        picks[j] = default
        for c in np.argsort(ranked[:, j], kind="stable"):
            if c == default or not ranked[c, j] < (1.0 - margin) * ranked[default, j]:
                break
            lo = max(0, hi[j] - window)
            if _passes(err[c, lo : hi[j]] - err[default, lo : hi[j]], block, confidence):
                picks[j] = c
                break
    return picks


def _passes(diff: np.ndarray, block: int, confidence: float) -> bool:
    """Whether the mean of `diff` (candidate - default) is below zero with `confidence`.

    Neighbouring origins' errors are correlated, so the test is on the means of blocks of
    `block` origins (a day), counted from the newest: Student's t with blocks - 1 degrees of
    freedom at the one-sided level a normal `confidence` standard errors give (2: 97.7 %), so
    a gain seen on three days needs 4.3 standard errors, on fourteen 2.2.
    """
    if confidence <= 0:
        return True
    diff = diff[np.isfinite(diff)]
    blocks = len(diff) // max(1, block)
    if blocks < 2:
        return False
    means = diff[len(diff) - blocks * block :].reshape(blocks, -1).mean(axis=1)
    spread = float(np.std(means, ddof=1))
    critical = _critical(confidence, blocks - 1)
    return bool(means.mean() < 0 and means.mean() <= -critical * spread / np.sqrt(blocks))


@functools.cache
def _critical(confidence: float, dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(stats.norm.cdf(confidence), dof))


def combine(
    values: np.ndarray, mean: np.ndarray, count: np.ndarray, *, min_count: int, best: int
) -> tuple[np.ndarray, np.ndarray]:
    """Median and 1/record-weighted mean of the `best` lowest-record models, per moment.

    `values` is (k, models, moments): the points, then any interval bounds, stacked;
    `mean` and `count` (models x moments) are the records at those moments. Both results
    are (k, moments), NaN where no model with a record forecast.
    """
    eligible = (count >= min_count) & np.isfinite(mean) & np.isfinite(values[0])
    ranked = np.where(eligible, mean, np.inf)
    order = np.argsort(ranked, axis=0, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(len(mean))[:, None], axis=0)
    member = eligible & (rank < best)
    with warnings.catch_warnings():  # moments with no member: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        median = np.nanmedian(np.where(member, values, np.nan), axis=1)
        w = np.where(member, 1.0 / np.maximum(mean, 1e-9), 0.0)
        weighted = (np.where(member, values, 0.0) * w).sum(axis=1) / w.sum(axis=0)
    none = ~member.any(axis=0)
    return np.where(none, np.nan, median), np.where(none, np.nan, weighted)
