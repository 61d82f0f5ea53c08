"""Quota reservation (EASY backfill on a tenant's quota): when the head job's quota frees, and
which later jobs of its tenant would delay it. Milli-GPUs; times in ms, now = 0."""

from __future__ import annotations

import math

import pytest

from scorer.tenancy import (
    QuotaReservation,
    delays_quota,
    own_cap,
    parse_policy,
    quota_start,
    used_at,
)

INF = math.inf


@pytest.mark.parametrize(
    ("holding", "cap", "need", "expected"),
    [
        # room now: 1000 + 2000 <= 4000
        ([(500.0, 1000)], 4000, 2000, 0.0),
        # 3000 held, need 2000, cap 4000: one 1000 must go; the first end is at 300
        ([(300.0, 1000), (900.0, 1000), (600.0, 1000)], 4000, 2000, 300.0),
        # need 3000: two must go (3000 - 2000 + 3000 <= 4000): the second end, at 600
        ([(300.0, 1000), (900.0, 1000), (600.0, 1000)], 4000, 3000, 600.0),
        # a 2-GPU job ending at 200 frees more than the 1-GPU ones ending earlier ...
        ([(100.0, 1000), (200.0, 2000), (800.0, 1000)], 4000, 2000, 200.0),
        # ... but 100 already leaves 3000 + 1000 = 4000: the earliest
        ([(100.0, 1000), (200.0, 2000), (800.0, 1000)], 4000, 1000, 100.0),
        # overdue (end -50 < now) counts as ending now
        ([(-50.0, 2000), (700.0, 2000)], 4000, 2000, 0.0),
        # unknown ends never free: 2000 + 2000 + 2000 > 4000 whatever the time
        ([(INF, 2000), (INF, 2000)], 4000, 2000, None),
        # one unknown, one known: 2000 (unknown) + 2000 <= 4000 at 700
        ([(INF, 2000), (700.0, 2000)], 4000, 2000, 700.0),
        # a job bigger than the cap never fits
        ([], 4000, 5000, None),
    ],
)
def test_quota_start(
    holding: list[tuple[float, int]], cap: int, need: int, expected: float | None
) -> None:
    assert quota_start(holding, cap=cap, need=need, now_ms=0.0) == expected


# the tenant holds 3000 of cap 4000: ends at 300, 900, 900; the head job needs 2000, so its
# quota is reserved from 300 (2000 + 2000 <= 4000), with nothing to spare then
HELD = [(300.0, 1000), (900.0, 1000), (900.0, 1000)]
RES = QuotaReservation("head", "S", "eu", "A100", need=2000, cap=4000, priority=1000, start_ms=300)


@pytest.mark.parametrize(
    ("milli", "end_ms", "holding", "delays"),
    [
        (1000, 250.0, HELD, False),  # ends at 250 <= 300: gone before the reservation starts
        (1000, 300.0, HELD, False),  # ends exactly at the start
        (1000, 301.0, HELD, True),  # still running at 300: 2000 + 1000 + 2000 > 4000
        (1000, INF, HELD, True),  # unknown end: runs past the start
        # one of the long ones ends at 250 instead: at 300, 1000 + 1000 + 2000 = 4000: room
        (1000, INF, [(300.0, 1000), (250.0, 1000), (900.0, 1000)], False),
        # ... but a 2-GPU job does not fit that room: 1000 + 2000 + 2000 > 4000
        (2000, INF, [(300.0, 1000), (250.0, 1000), (900.0, 1000)], True),
    ],
)
def test_delays_quota(
    milli: int, end_ms: float, holding: list[tuple[float, int]], delays: bool
) -> None:
    assert delays_quota(holding, RES, milli=milli, end_ms=end_ms) is delays


def test_used_at_counts_what_runs_past_t() -> None:
    assert used_at(HELD, 0.0) == 3000  # all three
    assert used_at(HELD, 300.0) == 2000  # the one ending at 300 is gone at 300
    assert used_at(HELD, 900.0) == 0


POLICY = parse_policy(
    {
        "tenants": {
            "serve": {"cohort": "c", "quotas": [{"nominal": 4}]},
            "train": {"cohort": "c", "quotas": [{"nominal": 4, "borrowing_limit": 2}]},
            "solo": {"quotas": [{"nominal": 3}]},
        }
    }
)


@pytest.mark.parametrize(
    ("tenant", "preemptible", "cap"),
    [
        ("serve", False, 4000),  # non-preemptible: runs within nominal only
        ("serve", True, None),  # may borrow the cohort's idle quota: other tenants decide
        ("train", True, 6000),  # borrows up to its limit: nominal 4 + limit 2
        ("solo", True, 3000),  # in no cohort: nominal is all it may hold
        ("ghost", True, None),  # no such tenant
    ],
)
def test_own_cap(tenant: str, preemptible: bool, cap: int | None) -> None:
    assert own_cap(POLICY, tenant, "eu", "A100", preemptible=preemptible) == cap


def test_no_cap_without_quotas() -> None:
    assert own_cap(parse_policy({}), "serve", "eu", "A100", preemptible=False) is None


def test_the_knob_parses_and_defaults_on() -> None:
    assert parse_policy({}).backfill.quota_reservation is True
    off = parse_policy({"backfill": {"quota_reservation": False}})
    assert off.backfill.quota_reservation is False and off.backfill.enabled is True
