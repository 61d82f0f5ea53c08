"""examples/demand.csv is what the committed generator makes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from forecast import read_series_csv
from forecast.synthetic import DemandShape, demand_series, main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "demand.csv"


def test_the_committed_example_is_generated_by_committed_code(tmp_path: Path) -> None:
    out = tmp_path / "demand.csv"
    main(["--out", str(out)])
    assert out.read_bytes() == EXAMPLE.read_bytes()


def test_the_example_has_its_stated_shape() -> None:
    s = read_series_csv(EXAMPLE)
    assert (len(s), s.step_s, s.filled.sum()) == (720, 3600, 0)  # a month of hourly points
    days = s.values.reshape(30, 24)
    weekday = days[:5].mean()  # 2025-03-17 is a Monday
    weekend = days[5:7].mean()
    assert weekend < 0.85 * weekday  # off days run lower
    hours = days[:5].mean(axis=0)
    assert hours.argmax() in range(12, 18) and hours.argmin() in range(0, 7)  # afternoon peak
    assert days[-7:].mean() > days[:7].mean()  # it grows


def test_same_seed_same_series_other_seed_other_series() -> None:
    a, b = demand_series(), demand_series()
    c = demand_series(DemandShape(seed=13))
    assert np.array_equal(a.values, b.values) and not np.array_equal(a.values, c.values)


def test_level_shifts_move_the_level_for_good_and_gaps_are_filled_and_marked() -> None:
    plain = demand_series(DemandShape(days=14, seed=3))
    shifted = demand_series(DemandShape(days=14, seed=3, level_shifts=((7.0, 0.5),)))
    before, after = slice(0, 7 * 24), slice(7 * 24, None)
    assert np.array_equal(plain.values[before], shifted.values[before])
    ratio = shifted.values[after].mean() / plain.values[after].mean()
    assert 1.4 < ratio < 1.6
    gappy = demand_series(DemandShape(days=14, seed=3, missing=0.05))
    assert len(gappy) == len(plain) and gappy.gaps > 3
    assert 0.05 <= gappy.filled.mean() < 0.08
    kept = ~gappy.filled
    assert np.array_equal(gappy.values[kept], plain.values[kept])  # only the lost points differ
    assert not np.array_equal(gappy.values, plain.values)
