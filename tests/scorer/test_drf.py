"""Dominant Resource Fairness: shares, the fair next tenant, and the allocation DRF converges to
(the example of Ghodsi et al., NSDI '11, computed by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from scorer.tenancy import dominant_share, dominant_shares, drf_allocation, fair_next

# 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's tasks <3 CPU, 1 GB>
CAPACITY = (9.0, 18.0)
TASK = {"A": np.array([1.0, 4.0]), "B": np.array([3.0, 1.0])}


def test_dominant_shares() -> None:
    # A with 3 tasks: <3, 12> -> max(3/9, 12/18) = 2/3; B with 2: <6, 2> -> max(6/9, 2/18) = 2/3
    shares = dominant_shares({"A": 3 * TASK["A"], "B": 2 * TASK["B"]}, CAPACITY)
    assert shares == pytest.approx({"A": 2 / 3, "B": 2 / 3})
    assert dominant_share([2.0, 0.0], [4.0, 0.0], weight=2.0) == 0.25  # (2/4) / 2
    assert dominant_share([1.0], [0.0]) == 0.0  # no capacity of anything: no share


def test_offering_to_the_lowest_share_converges_on_the_papers_allocation() -> None:
    """Progressive filling, one task at a time, as the queue does: A gets 3 tasks, B 2.

    A's share after k tasks: 4k/18 = 2k/9; B's after m: 3m/9 = m/3. Offers go A (0 = 0, by
    name), B (2/9 > 0), A (1/3 > 2/9), B (4/9 > 1/3), A (2/3 > 4/9): A has 3 <3, 12>, B has 2
    <6, 2>; the next task of either needs CPU 9 + 1 or 9 + 3 > 9: stop.
    """
    held = {"A": np.zeros(2), "B": np.zeros(2)}
    while True:
        shares = dominant_shares(held, CAPACITY)
        fits = [t for t in held if (sum(held.values()) + TASK[t] <= CAPACITY).all()]
        tenant = fair_next(shares, fits)
        if tenant is None:
            break
        held[tenant] = held[tenant] + TASK[tenant]
    assert held["A"].tolist() == [3.0, 12.0] and held["B"].tolist() == [6.0, 2.0]
    assert dominant_shares(held, CAPACITY) == pytest.approx({"A": 2 / 3, "B": 2 / 3})


def test_fluid_allocation_matches_the_hand_computation() -> None:
    # equal dominant shares s: A = 4.5 s tasks' <1, 4> (share 4a/18), B = 3 s ... CPU binds at
    # a + 3b = 9 with 2a/9 = b/3 -> a = 3, b = 2
    got = drf_allocation({"A": 100 * TASK["A"], "B": 100 * TASK["B"]}, CAPACITY)
    assert got["A"] == pytest.approx([3.0, 12.0]) and got["B"] == pytest.approx([6.0, 2.0])


def test_a_tenant_with_little_demand_leaves_the_rest_to_others() -> None:
    # A wants one task only <1, 4>; B takes what is left until CPU binds: 1 + 3b = 9 -> 8/3
    got = drf_allocation({"A": TASK["A"], "B": 100 * TASK["B"]}, CAPACITY)
    assert got["A"] == pytest.approx([1.0, 4.0])
    assert got["B"] == pytest.approx([8.0, 8.0 / 3])


def test_weights_scale_the_shares() -> None:
    # one resource of 12 GPUs, both want all: weight 2 gets twice as much (8 and 4)
    got = drf_allocation({"A": [12.0], "B": [12.0]}, [12.0], {"A": 2.0})
    assert got["A"] == pytest.approx([8.0]) and got["B"] == pytest.approx([4.0])
