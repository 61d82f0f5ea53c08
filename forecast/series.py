"""A regular time series on plain arrays: values every `step_s` seconds from `start_s`.

Series from outside arrive as (ts, value) pairs; `regularize` puts them on a grid, fills the
gaps explicitly (the filled points are marked and counted) and refuses what has no regular
interval. `read_series_csv` reads `ts,value` files (epoch seconds or ISO-8601).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from forecast.errors import SeriesError

__all__ = [
    "DAY_S",
    "FILLS",
    "WEEK_S",
    "Series",
    "calendar_features",
    "on_grid",
    "read_series_csv",
    "regularize",
    "season_length",
    "write_series_csv",
]

DAY_S = 86_400
WEEK_S = 7 * DAY_S
FILLS = ("interpolate", "ffill", "zero")
_SNAP = 0.1  # a timestamp may sit this share of a step off the grid
_MS_LIKE = 1e11  # epoch seconds stay below this until the year 5138


@dataclass(frozen=True, eq=False)
class Series:
    """`values[i]` is the value of [start_s + i*step_s, start_s + (i+1)*step_s)."""

    start_s: int
    step_s: int
    values: np.ndarray
    filled: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    name: str = ""

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=float)
        filled = np.asarray(self.filled, dtype=bool)
        if filled.shape != values.shape:
            filled = np.zeros(values.shape, dtype=bool)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "filled", filled)
        if self.step_s <= 0:
            raise SeriesError(f"{self.name or 'series'}: step must be > 0 s, got {self.step_s}")
        if not np.isfinite(values).all():
            raise SeriesError(f"{self.name or 'series'}: values must be finite (fill gaps first)")

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def end_s(self) -> int:
        """Start of the first interval after the series (the forecast origin)."""
        return self.start_s + len(self) * self.step_s

    def timestamps(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Epoch seconds of points start..stop (stop may run past the end: future points)."""
        stop = len(self) if stop is None else stop
        return self.start_s + self.step_s * np.arange(start, stop, dtype=np.int64)

    def head(self, n: int) -> Series:
        """The first n points."""
        return Series(self.start_s, self.step_s, self.values[:n], self.filled[:n], self.name)

    @property
    def gaps(self) -> int:
        """Runs of filled points."""
        f = self.filled.astype(np.int8)
        return int(np.count_nonzero(np.diff(np.concatenate(([0], f))) == 1))


def season_length(step_s: int) -> int:
    """Steps in the main seasonal cycle: a day below daily steps, a week for daily, else 1."""
    if step_s < DAY_S and DAY_S % step_s == 0:
        return DAY_S // step_s
    if step_s == DAY_S:
        return 7
    return 1


def calendar_features(ts_s: np.ndarray) -> np.ndarray:
    """sin/cos of the phase of day and of week (UTC), shape (n, 4)."""
    ts = np.asarray(ts_s, dtype=float)
    day = 2 * np.pi * (ts % DAY_S) / DAY_S
    # 1970-01-01 was a Thursday: shift so the week phase starts on Monday 00:00
    week = 2 * np.pi * ((ts + 3 * DAY_S) % WEEK_S) / WEEK_S
    return np.stack([np.sin(day), np.cos(day), np.sin(week), np.cos(week)], axis=1)


def _infer_step(ts: np.ndarray, name: str) -> int:
    diffs = np.diff(ts)
    diffs = diffs[diffs > 0]
    if not len(diffs):
        raise SeriesError(f"{name}: need at least two distinct timestamps to infer the interval")
    values, counts = np.unique(np.round(diffs).astype(np.int64), return_counts=True)
    step = int(values[np.argmax(counts)])  # the most common spacing; gaps are multiples of it
    if step <= 0:
        raise SeriesError(f"{name}: timestamps closer than 1 s apart")
    return step


def _fill(values: np.ndarray, missing: np.ndarray, how: str) -> np.ndarray:
    out = values.copy()
    if not missing.any():
        return out
    known = np.flatnonzero(~missing)
    if how == "zero":
        out[missing] = 0.0
    elif how == "ffill":
        idx = np.where(~missing, np.arange(len(out)), 0)
        np.maximum.accumulate(idx, out=idx)
        out = out[idx]
        out[: known[0]] = values[known[0]]  # nothing before the first value: take it
    else:  # interpolate
        pos = np.arange(len(out))
        out[missing] = np.interp(pos[missing], known, values[known])
    return out


def regularize(
    ts_s: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    *,
    step_s: int | None = None,
    fill: str = "interpolate",
    name: str = "series",
) -> Series:
    """Points on a regular grid; missing intervals (and NaN values) filled by `fill`."""
    if fill not in FILLS:
        raise SeriesError(f"{name}: fill must be one of {', '.join(FILLS)}, got {fill!r}")
    ts = np.asarray(ts_s, dtype=float)
    vals = np.asarray(values, dtype=float)
    if ts.shape != vals.shape or ts.ndim != 1:
        raise SeriesError(f"{name}: ts and values must be two equal-length lists")
    if len(ts) < 2:
        raise SeriesError(f"{name}: need at least two points, got {len(ts)}")
    order = np.argsort(ts, kind="stable")
    ts, vals = ts[order], vals[order]
    step = step_s or _infer_step(ts, name)
    offsets = (ts - ts[0]) / step
    slots = np.round(offsets).astype(np.int64)
    off_grid = np.abs(offsets - slots) > _SNAP
    if off_grid.any():
        bad = float(ts[np.argmax(off_grid)])
        raise SeriesError(
            f"{name}: timestamp {_iso(bad)} is not on the {step} s grid from {_iso(ts[0])}"
        )
    dup = np.flatnonzero(np.diff(slots) == 0)
    if len(dup):
        raise SeriesError(f"{name}: two values for the interval at {_iso(ts[dup[0] + 1])}")
    grid = np.full(int(slots[-1]) + 1, np.nan)
    grid[slots] = vals
    missing = ~np.isfinite(grid)
    if missing.all():
        raise SeriesError(f"{name}: no value is a number")
    filled = _fill(np.where(missing, 0.0, grid), missing, fill)
    return Series(round(ts[0]), int(step), filled, missing, name)


def on_grid(
    ts_s: Sequence[float] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    *,
    start_s: int,
    step_s: int,
    points: int,
    fill: str,
    name: str = "series",
) -> Series:
    """Values of intervals [start_s + i*step_s, ...) for i < points, gaps filled by `fill`.

    For series whose grid is known (buckets from SQL): the series starts at its first value;
    every missing interval after it, up to the end of the grid, is filled and marked.
    Timestamps off the grid or outside it are refused, like two values for one interval.
    """
    if fill not in FILLS:
        raise SeriesError(f"{name}: fill must be one of {', '.join(FILLS)}, got {fill!r}")
    ts = np.asarray(ts_s, dtype=float)
    vals = np.asarray(values, dtype=float)
    if points < 1:
        raise SeriesError(f"{name}: the grid holds no interval")
    slots = (ts - start_s) / step_s
    idx = np.round(slots).astype(np.int64)
    bad = (np.abs(slots - idx) > _SNAP) | (idx < 0) | (idx >= points)
    if bad.any():
        raise SeriesError(f"{name}: {_iso(float(ts[np.argmax(bad)]))} is off the {step_s} s grid")
    if len(np.unique(idx)) != len(idx):
        raise SeriesError(f"{name}: two values for one interval")
    grid = np.full(points, np.nan)
    grid[idx] = vals
    known = np.flatnonzero(np.isfinite(grid))
    if not len(known):
        raise SeriesError(f"{name}: no value in the {points} intervals")
    grid = grid[known[0] :]  # the series starts at its first value: nothing to fill before
    missing = ~np.isfinite(grid)
    filled = _fill(np.where(missing, 0.0, grid), missing, fill)
    return Series(int(start_s + known[0] * step_s), int(step_s), filled, missing, name)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def _parse_ts(text: str, where: str) -> float:
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise SeriesError(f"{where}: ts: {text!r} is not a time")
        if abs(value) >= _MS_LIKE:
            raise SeriesError(f"{where}: ts: {text} looks like milliseconds; give epoch seconds")
        return value
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SeriesError(
            f"{where}: ts: cannot read {text!r} (epoch seconds or ISO-8601)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _parse_value(text: str, where: str) -> float:
    if not text.strip():
        return math.nan  # an empty value is a gap, filled and reported like a missing row
    try:
        return float(text)
    except ValueError:
        raise SeriesError(f"{where}: value: cannot read {text!r} as a number") from None


def read_series_csv(
    path: str | Path, *, step_s: int | None = None, fill: str = "interpolate"
) -> Series:
    """A `ts,value` CSV (header row; extra columns ignored) as a regular Series."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            missing = [c for c in ("ts", "value") if c not in header]
            if missing:
                raise SeriesError(f"{path}: needs columns ts,value; missing {', '.join(missing)}")
            ts, values = [], []
            for row in reader:
                where = f"{path}:{reader.line_num}"
                ts.append(_parse_ts(row["ts"] or "", where))
                values.append(_parse_value(row["value"] or "", where))
    except OSError as exc:
        raise SeriesError(f"{path}: {exc.strerror or exc}") from None
    except csv.Error as exc:
        raise SeriesError(f"{path}: not CSV: {exc}") from None
    return regularize(ts, values, step_s=step_s, fill=fill, name=path.name)


def write_series_csv(series: Series, path: str | Path, *, digits: int = 3) -> Path:
    """`ts,value` with ISO-8601 UTC timestamps."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["ts", "value"])
        for ts, value in zip(series.timestamps(), series.values, strict=True):
            writer.writerow([_iso(float(ts)), f"{value:.{digits}f}"])
    return path
