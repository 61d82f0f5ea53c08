"""The M/M/c model against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scorer.services import capacity_at_slo, erlang_c, p99_ms, p99_ms_many, pool_capacity_rps


@pytest.mark.parametrize(
    ("c", "a", "want"),
    [
        (1, 0.5, 0.5),  # M/M/1: P(wait) = rho
        (2, 1.0, 1 / 3),  # C(2, 1) = (a^2/2 / (1 - a/2)) / (1 + a + a^2/2 / (1 - a/2)) = 1/3
        (3, 3.0, 1.0),  # overloaded: every arrival waits
        (4, 0.0, 0.0),
    ],
)
def test_erlang_c(c: int, a: float, want: float) -> None:
    assert float(erlang_c(c, a)) == pytest.approx(want, abs=1e-12)


def test_mm1_p99_is_the_exponential_sojourn_quantile() -> None:
    # M/M/1 sojourn ~ Exp(mu - lambda): p99 = ln(100) / (mu - lambda); mu = 25/s, lambda = 15/s
    assert p99_ms(15.0, 1, 40.0) == pytest.approx(1000 * math.log(100) / 10, rel=1e-6)


def test_an_idle_pool_gives_the_service_time_quantile_and_overload_infinity() -> None:
    assert p99_ms(1e-9, 8, 40.0) == pytest.approx(40 * math.log(100), rel=1e-4)
    assert p99_ms(200.0, 8, 40.0) == math.inf  # 8 slots x 25/s = 200/s: no steady state
    assert p99_ms(0.0, 0, 40.0) == 0.0


def test_vectorised_matches_scalar_and_grows_with_load() -> None:
    rates = np.array([10.0, 100.0, 150.0, 190.0])
    many = p99_ms_many(rates, np.full(4, 8), 40.0)
    assert list(many) == pytest.approx([p99_ms(r, 8, 40.0) for r in rates])
    assert all(np.diff(many) > 0)


def test_capacity_at_slo_meets_it_and_pooling_helps() -> None:
    one = capacity_at_slo(8, 40.0, 230.0)
    assert p99_ms(one, 8, 40.0) <= 230.0 < p99_ms(one * 1.01, 8, 40.0)
    pool = pool_capacity_rps(8, 40.0, 230.0, 10)
    assert pool[0] == 0 and pool[1] == pytest.approx(one, rel=1e-6)
    assert all(np.diff(pool / np.maximum(np.arange(11), 1))[1:] > 0)  # per replica, rising
    assert capacity_at_slo(8, 60.0, 230.0) == 0.0  # exponential service alone: p99 276 ms


def test_pool_capacity_never_exceeds_saturation() -> None:
    pool = pool_capacity_rps(16, 20.0, 150.0, 30)
    assert all(pool <= np.arange(31) * 16 * 50.0)
