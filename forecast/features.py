"""Calendar and lag features shared by the learned models (plain numpy).

* `off_days`: weekends and the country's public holidays (the `holidays` package), UTC dates.
* `naive`: the value one period earlier at the same phase, per step ahead.
* `profile`: per step ahead, the median of the values at the same time of day on the last
  `days` days of the same kind (working day or off day) before the origin: the usual shape
  of such a day; the median, so neither one noisy day nor a burst decides it.
"""

from __future__ import annotations

import warnings
from functools import cache

import numpy as np

from forecast.series import DAY_S

__all__ = ["naive", "off_days", "profile"]

_EPOCH_WEEKDAY = 3  # 1970-01-01 was a Thursday: (days + 3) % 7 is 0 on Mondays


@cache
def _holiday_days(country: str, first_year: int, last_year: int) -> frozenset[int]:
    import holidays

    calendar = holidays.country_holidays(country, years=list(range(first_year, last_year + 1)))
    epoch = np.datetime64("1970-01-01", "D")
    return frozenset(int((np.datetime64(d, "D") - epoch).astype(np.int64)) for d in calendar)


def off_days(ts_s: np.ndarray, country: str = "") -> np.ndarray:
    """True where the UTC date is a Saturday, Sunday or a public holiday of `country`."""
    days = np.asarray(ts_s, dtype=np.int64) // DAY_S
    off = (days + _EPOCH_WEEKDAY) % 7 >= 5
    if country and len(days):
        first = np.datetime64(int(days.min()), "D").astype(object).year
        last = np.datetime64(int(days.max()), "D").astype(object).year
        listed = _holiday_days(country, first, last)
        off |= np.isin(days, np.fromiter(listed, dtype=np.int64, count=len(listed)))
    return off


def naive(values: np.ndarray, origins: np.ndarray, steps: int, period: int) -> np.ndarray:
    """(origins x steps): the value one `period` (or more) before each step, before its origin."""
    k = np.arange(1, steps + 1)
    lag = period * np.ceil(k / period).astype(np.int64)
    return values[origins[:, None] + (k - 1)[None, :] - lag[None, :]]


def profile(
    values: np.ndarray,
    off: np.ndarray,
    origins: np.ndarray,
    steps: int,
    season: int,
    days: int,
    *,
    robust: bool = True,
) -> np.ndarray:
    """(origins x steps): median (or mean) of same-kind days' values at each step's time of day.

    `off` covers every index up to the last step (future days' kinds come from the calendar);
    only values before each origin are read. Where no same-kind day is in reach, the value
    one season earlier stands in.
    """
    target = origins[:, None] + np.arange(steps)[None, :]
    kind = off[target]
    seen = np.full((*target.shape, days), np.nan)
    for d in range(1, days + 1):
        src = target - d * season
        ok = (src >= 0) & (src < origins[:, None])
        src = np.clip(src, 0, None)
        ok &= off[src] == kind
        seen[..., d - 1] = np.where(ok, values[src], np.nan)
    count = np.isfinite(seen).sum(axis=2)
    with warnings.catch_warnings():  # all-NaN slices: no same-kind day in reach
        warnings.simplefilter("ignore", RuntimeWarning)
        usual = np.nanmedian(seen, axis=2) if robust else np.nanmean(seen, axis=2)
    fallback = naive(values, origins, steps, season)
    return np.where(count > 0, usual, fallback)
