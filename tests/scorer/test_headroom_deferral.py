"""Headroom from demand forecasts, and green deferral from grid forecasts (tables of cases)."""

from __future__ import annotations

import pytest

from scorer import JobSpec
from scorer.deferral import DeferralPolicy, plan_deferral
from scorer.forecasts import ForecastCurve
from scorer.headroom import HeadroomPolicy, headroom_gpus, is_low_priority, outside_headroom

T0 = 1_700_000_000_000  # ms
MIN = 60_000
HOUR = 3_600_000


def curve(step_s: int, *points: float, issued: int = T0) -> ForecastCurve:
    return ForecastCurve(issued, step_s, points)


def test_curve_means_are_time_weighted() -> None:
    c = curve(600, 10, 20, 30)  # 10-minute steps from T0
    assert c.mean(T0, T0 + 20 * MIN) == 15  # two full steps
    assert c.mean(T0 + 5 * MIN, T0 + 15 * MIN) == 15  # half of 10, half of 20
    assert c.mean(T0 + 25 * MIN, T0 + 60 * MIN) == 30  # only the covered part counts
    assert c.mean(T0 + 30 * MIN, T0 + 40 * MIN) is None
    assert c.values(T0 + 5 * MIN, T0 + 11 * MIN).tolist() == [10, 20]


@pytest.mark.parametrize(
    ("training", "inference", "expected"),
    [
        # 5-minute steps over a 1 h window: 12 steps
        ((2.0,) * 12, None, 29),  # 1.2 x (12 x 2 = 24) = 28.8 -> 29
        (None, (1, 4, 2) + (1,) * 9, 6),  # 1.5 x peak 4 = 6
        ((1.0,) * 12, (3,) * 12, 19),  # 1.2 x 12 = 14.4, + 1.5 x 3 = 4.5 -> 18.9 -> 19
        ((0.0,) * 12, (0,) * 12, 0),
        (None, None, 0),
    ],
)
def test_headroom_from_forecasts(
    training: tuple[float, ...] | None, inference: tuple[float, ...] | None, expected: int
) -> None:
    t = curve(300, *training) if training else None
    i = curve(300, *inference) if inference else None
    got = headroom_gpus(t, i, T0, HeadroomPolicy())
    assert got == expected


def test_headroom_counts_only_the_window_ahead() -> None:
    # hourly forecast issued 30 min ago: the window [now, now + 1 h) holds half of each of
    # steps 0 (4 GPUs) and 1 (8 GPUs): mean 6 per hour -> 1.2 x 6 = 7.2 -> 8
    training = curve(3600, 4, 8, 100, issued=T0 - 30 * MIN)
    assert headroom_gpus(training, None, T0, HeadroomPolicy()) == 8
    # a custom policy: x2 over half an hour -> 2 x (4 x 0.5) = 4
    assert headroom_gpus(training, None, T0, HeadroomPolicy(training=2.0, window_s=1800)) == 4


@pytest.mark.parametrize(
    ("kind", "priority", "low"),
    [
        ("BATCH", 0, True),
        ("NOTEBOOK", -3, True),
        ("BATCH", 1, False),  # priority above the line
        ("TRAINING", 0, False),  # the demand headroom is kept for
        ("INFERENCE", 0, False),
    ],
)
def test_low_priority_is_priority_and_kind(kind: str, priority: int, low: bool) -> None:
    assert is_low_priority(JobSpec("j", kind=kind, priority=priority), HeadroomPolicy()) is low


@pytest.mark.parametrize(
    ("need", "free", "headroom", "fits"),
    [(2, 10, 8, True), (3, 10, 8, False), (1, 5, 0, True), (1, 0, 0, False)],
)
def test_outside_headroom(need: int, free: int, headroom: int, fits: bool) -> None:
    assert outside_headroom(need, free, headroom) is fits  # need <= free - headroom


CARBON = (450, 450, 120, 120, 450, 450)  # hourly, from T0
CARBON_ONLY = DeferralPolicy(carbon_weight=1.0)


def deferrable(deadline: int | None, duration_s: float | None = None) -> JobSpec:
    return JobSpec("j", deferrable_until_ts=deadline, expected_duration_s=duration_s)


@pytest.mark.parametrize(
    ("job", "now", "start"),
    [
        # one-step run from now (T0 + 10 min) costs 450; at T0 + 2 h 120: 73 % lower -> hold
        (deferrable(T0 + 5 * HOUR), T0 + 10 * MIN, T0 + 2 * HOUR),
        # the low window opens after the latest start: start now
        (deferrable(T0 + 90 * MIN), T0 + 10 * MIN, None),
        # a 3 h run: from T0 (450, 450, 120) = 340, T0 + 1 h (450, 120, 120) = 230,
        # T0 + 2 h (120, 120, 450) = 230: the earlier of the two best
        (deferrable(T0 + 5 * HOUR, 3 * 3600), T0, T0 + HOUR),
        (deferrable(None), T0, None),  # not deferrable: never held
        (deferrable(T0 - 1), T0, None),  # the deadline has passed
    ],
)
def test_deferral_picks_the_cleanest_window_before_the_deadline(
    job: JobSpec, now: int, start: int | None
) -> None:
    got = plan_deferral(job, now, carbon=curve(3600, *CARBON), price=None, policy=CARBON_ONLY)
    assert (got.start_ms if got else None) == start
    if got:
        assert "deferred until" in got.reason and "carbon" in got.reason


@pytest.mark.parametrize(
    ("carbon", "price", "weight", "start"),
    [
        ((100, 97), None, 1.0, None),  # 3 % lower is below min_gain (5 %): not worth a hold
        ((400, 400), (0.3, 0.1), 0.0, T0 + HOUR),  # price only: a third of the price
        # both at 0.5: 0.5 x 100/400 + 0.5 x 0.3/0.1 = 1.625 > 1: cleaner but dearer, stay
        ((400, 100), (0.1, 0.3), 0.5, None),
        # both at 0.5: 0.5 x 200/400 + 0.5 x 0.05/0.1 = 0.5: half the cost, hold
        ((400, 200), (0.1, 0.05), 0.5, T0 + HOUR),
        (None, None, 0.5, None),  # no forecast: start now
    ],
)
def test_deferral_weighs_carbon_and_price(
    carbon: tuple[float, ...] | None,
    price: tuple[float, ...] | None,
    weight: float,
    start: int | None,
) -> None:
    got = plan_deferral(
        deferrable(T0 + 3 * HOUR),
        T0,
        carbon=curve(3600, *carbon) if carbon else None,
        price=curve(3600, *price) if price else None,
        policy=DeferralPolicy(carbon_weight=weight),
    )
    assert (got.start_ms if got else None) == start


def test_the_router_keeps_headroom_free_for_low_priority_jobs_only() -> None:
    from scorer import RegionView, rank_regions

    def view(region: str, headroom: int, carbon: float) -> RegionView:
        return RegionView(
            region,
            free_gpus={"H100": 8},
            largest_free_block={"H100": 8},
            total_gpus={"H100": 64},
            carbon_g_per_kwh=carbon,
            headroom_gpus=headroom,
        )

    # "clean" is better on carbon but keeps 7 of its 8 free GPUs as headroom
    views = {"clean": view("clean", 7, 100.0), "dirty": view("dirty", 0, 500.0)}
    job = JobSpec("j", kind="BATCH", gpu_count=2)
    assert rank_regions(job, views)[0][0] == "clean"
    # 8 free - 7 headroom = 1 < 2: "clean" only fits later for this job
    assert rank_regions(job, views, keep_headroom=True)[0][0] == "dirty"
