"""sMAPE, MASE scales and empirical interval offsets, with the arithmetic in comments."""

from __future__ import annotations

import numpy as np
import pytest

from forecast.base import interval_offsets
from forecast.metrics import coverage, mase_scales, smape_terms


@pytest.mark.parametrize(
    ("actual", "predicted", "expected"),
    [
        (100.0, 110.0, 200 * 10 / 210),  # 2|F-A| / (|A|+|F|) in percent: 9.52
        (100.0, 100.0, 0.0),
        (0.0, 0.0, 0.0),  # 0/0 counts as a perfect forecast
        (0.0, 5.0, 200.0),  # the ceiling
    ],
)
def test_smape_terms(actual: float, predicted: float, expected: float) -> None:
    assert smape_terms(np.array([actual]), np.array([predicted]))[0] == pytest.approx(expected)


def test_mase_scale_is_the_in_sample_seasonal_naive_error() -> None:
    y = np.array([1.0, 2.0, 4.0, 7.0, 11.0, 16.0])
    # season 2: |y_t - y_{t-2}| for t = 2..5 = 3, 5, 7, 9
    # origin 4 sees t = 2, 3 -> (3 + 5) / 2 = 4; origin 6 sees all -> 24 / 4 = 6
    # origin 2 has no season behind it yet: lag 1, |2 - 1| = 1
    assert mase_scales(y, np.array([2, 4, 6]), season=2).tolist() == [1.0, 4.0, 6.0]
    flat = mase_scales(np.ones(10), np.array([5]), season=2)
    assert 0 < flat[0] < 1e-9  # a constant history: tiny, never 0


def test_interval_offsets_widen_for_a_finite_sample() -> None:
    errors = np.arange(-50.0, 50.0)[:, None]  # 100 errors, -50 .. 49
    lo, hi = interval_offsets(errors, 0.8)
    # 80 %: quantile ceil(101 * 0.9) / 100 = 0.91 -> 40.09, and 0.09 -> -41.09
    assert (lo[0], hi[0]) == pytest.approx((-41.09, 40.09))
    with_gaps = np.vstack([errors, np.full((100, 1), np.nan)])
    assert interval_offsets(with_gaps, 0.8)[1][0] == pytest.approx(40.09)  # NaN is skipped
    two_steps = np.hstack([errors, np.full((100, 1), np.nan)])  # step 2 has no errors
    assert interval_offsets(two_steps, 0.8)[1].tolist() == pytest.approx([40.09, 40.09])


def test_coverage() -> None:
    a = np.array([1.0, 2.0, 3.0, 4.0])
    assert coverage(a, a - 1, a + 1) == 1.0
    assert coverage(a, np.array([2.0, 2, 2, 2]), np.array([3.0, 3, 3, 3])) == 0.5
