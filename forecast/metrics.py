"""Forecast accuracy: sMAPE, MASE (scaled by the in-sample seasonal-naive error), coverage.

sMAPE = 100 x mean(2|F - A| / (|A| + |F|)), in percent (0..200; 0/0 counts 0).
MASE  = mean(|F - A|) / mean(|y_t - y_{t-m}|) over the history before the forecast origin
        (Hyndman & Koehler 2006): below 1 beats the seasonal-naive forecast in sample.
"""

from __future__ import annotations

import numpy as np

__all__ = ["coverage", "mase_scales", "smape_terms"]

_TINY = 1e-12


def smape_terms(actual: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """Per-point sMAPE terms in percent; average them for sMAPE."""
    a, f = np.asarray(actual, dtype=float), np.asarray(predicted, dtype=float)
    denom = np.abs(a) + np.abs(f)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = 200.0 * np.abs(f - a) / denom
    return np.where(denom > _TINY, terms, np.where(np.isnan(f), np.nan, 0.0))


def mase_scales(values: np.ndarray, origins: np.ndarray, season: int) -> np.ndarray:
    """For each origin o: mean |y_t - y_{t-m}| over t < o (m = season).

    Falls back to lag 1 where the history holds no full season yet, and to a tiny positive
    number for a constant history (so a perfect forecast scores 0, not NaN).
    """
    y = np.asarray(values, dtype=float)
    at = np.asarray(origins, dtype=np.int64)
    out = np.full(len(at), np.nan)
    for lag in dict.fromkeys((max(1, season), 1)):
        if len(y) <= lag:
            continue
        diffs = np.abs(y[lag:] - y[:-lag])
        sums = np.concatenate(([0.0], np.cumsum(diffs)))
        counts = np.clip(at - lag, 0, len(diffs))
        scale = np.where(counts > 0, sums[counts] / np.maximum(counts, 1), np.nan)
        out = np.where(np.isnan(out), scale, out)
    return np.where(np.isfinite(out) & (out > _TINY), out, _TINY)


def coverage(actual: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    """Share of actual values inside [lower, upper] (NaN bounds are skipped)."""
    a, lo, hi = (np.asarray(x, dtype=float) for x in (actual, lower, upper))
    ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(a)
    if not ok.any():
        return float("nan")
    return float(np.mean((a[ok] >= lo[ok]) & (a[ok] <= hi[ok])))
