"""The series `bench/forecast.py` scores: generated ones and real demand (bench/data/README.md).

A series is weekly-seasonal when last week's value at the same hour says more than
yesterday's (`weekly_strength` >= 0.25, measured on the series, not declared): its weekends
differ from its working days by more than its noise and level shifts blur them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from forecast import Series, read_series_csv
from forecast.synthetic import DemandShape, demand_series

__all__ = ["WEEKLY", "BenchSeries", "bench_series", "weekly_strength"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "demand.csv"
TAYLOR = REPO / "bench" / "data" / "taylor_halfhourly.csv"
_HOUR_S = 3600
WEEKLY = 0.25  # weekly_strength from which a series counts as weekly-seasonal
_DAYS = 31  # a month of hourly points, as the fleet series the issue measures


@dataclass(frozen=True, eq=False)
class BenchSeries:
    name: str
    series: Series
    real: bool
    source: str


def _hourly(half_hourly: Series) -> Series:
    n = len(half_hourly) // 2
    values = half_hourly.values[: 2 * n].reshape(n, 2).mean(axis=1)
    return Series(half_hourly.start_s, _HOUR_S, values, name=half_hourly.name)


def _slice(series: Series, first_day: int, name: str) -> Series:
    per_day = 86_400 // series.step_s
    lo = first_day * per_day
    values = series.values[lo : lo + _DAYS * per_day]
    return Series(series.start_s + lo * series.step_s, series.step_s, values, name=name)


def _checks() -> list[BenchSeries]:
    """Generated series added after the selection was designed, to check it on unseen ones."""
    others = (
        DemandShape(
            days=_DAYS,
            seed=21,
            off_day_level=0.95,
            ar_noise=0.025,
            bursts_per_week=6.0,
            level_shifts=((9.5, -0.2), (22.0, 0.3)),
            missing=0.02,
        ),
        DemandShape(
            days=_DAYS,
            seed=22,
            start="2025-04-28T00:00:00+00:00",
            holidays=tuple(f"2025-05-0{d}" for d in range(1, 6)),
            level_shifts=((16.0, 0.15),),
        ),
        DemandShape(
            days=_DAYS, seed=23, off_day_level=0.6, noise=0.04, growth_per_day=-0.003, missing=0.04
        ),
    )
    return [
        BenchSeries(
            f"synthetic_check{i}", demand_series(shape), False, f"forecast.synthetic: {shape}"
        )
        for i, shape in enumerate(others, start=1)
    ]


def _generated() -> list[BenchSeries]:
    shifts = DemandShape(
        days=_DAYS,
        level_shifts=((11.4, 0.25), (20.6, -0.3)),
        missing=0.03,
        seed=5,
    )
    fleet = DemandShape(  # an inference fleet: weak weekends, a holiday week, noisy, a shift
        days=_DAYS,
        start="2025-09-22T00:00:00+00:00",
        holidays=tuple(f"2025-10-0{d}" for d in range(1, 8)),
        off_day_level=0.9,
        off_day_diurnal=0.8,
        ar_noise=0.02,
        bursts_per_week=5.0,
        level_shifts=((17.3, 0.2),),
        missing=0.02,
        seed=9,
    )
    gen = "forecast.synthetic"
    return [
        BenchSeries("synthetic_demand", read_series_csv(EXAMPLE), False, "examples/demand.csv"),
        BenchSeries("synthetic_shifts", demand_series(shifts), False, f"{gen}: {shifts}"),
        BenchSeries("synthetic_fleet", demand_series(fleet), False, f"{gen}: {fleet}"),
        *_checks(),
    ]


def bench_series() -> list[BenchSeries]:
    """Every series the bench scores, in a fixed order."""
    taylor = _hourly(read_series_csv(TAYLOR))
    real = [
        BenchSeries(
            f"taylor_hourly_day{d}",
            _slice(taylor, d, f"taylor_hourly_day{d}"),
            True,
            f"bench/data/taylor_halfhourly.csv, hourly means, days {d}..{d + _DAYS - 1}",
        )
        for d in (0, 26, 53)
    ]
    return _generated() + real


def weekly_strength(series: Series, season: int) -> float:
    """1 - (week-ago error / day-ago error): > 0 where last week says more than yesterday."""
    y, week = series.values, 7 * season
    if len(y) <= week:
        return float("nan")
    day_err = float(np.mean(np.abs(y[week:] - y[week - season : -season])))
    week_err = float(np.mean(np.abs(y[week:] - y[:-week])))
    return round(1.0 - week_err / day_err, 3) if day_err > 0 else float("nan")
