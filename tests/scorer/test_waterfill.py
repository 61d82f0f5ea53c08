"""Water-filling: hand-computed examples (arithmetic in the comments) and properties that must
hold for any input: no link over capacity, minimums kept, demands never exceeded, and max-min
fairness (no flow can gain without a flow with a smaller weighted share losing)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.network import NetworkError, equal_split, link_loads, waterfill

INF = np.inf

# (capacities, paths (-1 pads), weights, demands, minimums or None, expected rates)
CASES = {
    # one 10G link, two equal flows: 10 / 2 = 5 each
    "equal split": ([10], [[0], [0]], [1, 1], [INF, INF], None, [5, 5]),
    # weights 1:3 on 10G: level t with t + 3t = 10 -> t = 2.5 -> 2.5 and 7.5
    "weighted": ([10], [[0], [0]], [1, 3], [INF, INF], None, [2.5, 7.5]),
    # a flow that needs only 2 leaves 10 - 2 = 8 to the other
    "demand cap": ([10], [[0], [0]], [1, 1], [2, INF], None, [2, 8]),
    # A is guaranteed 6: level t with max(t, 6) + t = 10 -> t = 4 -> A 6 (its minimum), B 4
    "minimum": ([10], [[0], [0]], [1, 1], [INF, INF], [6, 0], [6, 4]),
    # minimum below the fair share changes nothing: 5 + 5, A's 3 is met
    "minimum below share": ([10], [[0], [0]], [1, 1], [INF, INF], [3, 0], [5, 5]),
    # link 0 (10G): A, B; link 1 (4G): B, C. Link 1 saturates first at t = 4 / 2 = 2 (B = C = 2);
    # then A alone on link 0 takes 10 - 2 = 8
    "two links": ([10, 4], [[0, -1], [0, 1], [1, -1]], [1, 1, 1], [INF] * 3, None, [8, 2, 2]),
    # C guaranteed 5 on a 4G link: minimums scale to 4 (x 4/5), B gets 0, A takes link 0: 10
    "minimums over capacity": (
        [10, 4], [[0, -1], [0, 1], [1, -1]], [1, 1, 1], [INF] * 3, [0, 0, 5], [10, 0, 4]
    ),
    # three flows, weights 1, 2, 1, demands 1, inf, inf on 12G: level t: 1 + 2t + t = 12 once
    # the first is capped at 1 (t >= 1) -> t = 11/3 -> 1, 7.333, 3.667
    "cap then weights": (
        [12], [[0], [0], [0]], [1, 2, 1], [1, INF, INF], None, [1, 22 / 3, 11 / 3]
    ),
    # a closed link gives nothing; a flow with no path gets its demand
    "closed link": ([0, 5], [[0], [-1]], [1, 1], [5, 3], None, [0, 3]),
    # every demand fits: each gets what it asks, capacity is left over (8 of 10 used)
    "underloaded": ([10], [[0], [0]], [1, 1], [3, 5], None, [3, 5]),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_hand_computed(case: str) -> None:
    cap, paths, w, d, m, want = CASES[case]
    mins = None if m is None else np.array(m, float)
    got = waterfill(np.array(cap, float), np.array(paths), np.array(w, float), np.array(d), mins)
    np.testing.assert_allclose(got, np.array(want, float), atol=1e-9)


def test_equal_split_ignores_need_and_weight() -> None:
    # link 0 (10G) has A, B: 5 each; link 1 (4G) has B, C: 2 each; B gets min(5, 2) = 2
    got = equal_split(np.array([10.0, 4.0]), np.array([[0, -1], [0, 1], [1, -1]]))
    np.testing.assert_allclose(got, [5, 2, 2])


@pytest.mark.parametrize(
    ("weights", "demands", "message"),
    [([0.0], [1.0], "weight"), ([1.0], [-1.0], "demands"), ([1.0], [np.nan], "demands")],
)
def test_bad_input_is_an_error(weights: list[float], demands: list[float], message: str) -> None:
    with pytest.raises(NetworkError, match=message):
        waterfill(np.array([1.0]), np.array([[0]]), np.array(weights), np.array(demands))


@st.composite
def problems(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n_links = draw(st.integers(1, 6))
    n_flows = draw(st.integers(1, 12))
    cap = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.5, 4.0, 10.0, 40.0]),
                                 min_size=n_links, max_size=n_links)))  # fmt: skip
    paths = np.full((n_flows, 3), -1)
    for f in range(n_flows):
        links = draw(st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True))
        paths[f, : len(links)] = links
    w = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=n_flows,
                               max_size=n_flows)))  # fmt: skip
    d = np.array(draw(st.lists(st.sampled_from([0.5, 1.0, 3.0, 8.0, INF]), min_size=n_flows,
                               max_size=n_flows)))  # fmt: skip
    m = np.array(draw(st.lists(st.sampled_from([0.0, 0.0, 0.5, 2.0]), min_size=n_flows,
                               max_size=n_flows)))  # fmt: skip
    return cap, paths, w, d, m


TOL = 1e-7


def _fitted_minimums(cap: np.ndarray, paths: np.ndarray, d: np.ndarray, m: np.ndarray):
    """Minimums as the contract promises them: min(m, d, path capacity), scaled per link."""
    path_cap = np.array([cap[p[p >= 0]].min() for p in paths])
    m = np.minimum(m, np.minimum(d, path_cap))
    load = link_loads(m, paths, cap.shape[0])
    scale = np.ones_like(m)
    for f, p in enumerate(paths):
        for link in p[p >= 0]:
            if load[link] > cap[link]:
                scale[f] = min(scale[f], cap[link] / load[link])
    return m * scale


@settings(max_examples=150, deadline=None)
@given(problems())
def test_never_over_capacity_and_within_bounds(problem: tuple[np.ndarray, ...]) -> None:
    cap, paths, w, d, m = problem
    x = waterfill(cap, paths, w, d, m)
    assert (x >= -TOL).all()
    assert (link_loads(x, paths, cap.shape[0]) <= cap + TOL).all(), "a link is over capacity"
    assert (x <= d + TOL).all(), "a flow got more than it asked"
    assert (x >= _fitted_minimums(cap, paths, d, m) - TOL).all(), "a minimum was not kept"


@settings(max_examples=150, deadline=None)
@given(problems())
def test_max_min_fair(problem: tuple[np.ndarray, ...]) -> None:
    """Every flow below its demand has a bottleneck: a saturated link of its path on which no
    flow above its guaranteed minimum has a larger weighted share (so it cannot gain without
    one with a smaller-or-equal x / w losing)."""
    cap, paths, w, d, m = problem
    x = waterfill(cap, paths, w, d, m)
    load = link_loads(x, paths, cap.shape[0])
    mins = _fitted_minimums(cap, paths, d, m)
    share = x / w
    path_cap = np.array([cap[p[p >= 0]].min() for p in paths])
    for f, p in enumerate(paths):
        if x[f] >= min(d[f], path_cap[f]) - TOL:
            continue  # satisfied
        links = p[p >= 0]
        saturated = [k for k in links if load[k] >= cap[k] - 1e-6]
        assert saturated, f"flow {f} is short of its demand on links with room"

        def bottleneck(link: int, f: int = f) -> bool:
            on = [g for g, q in enumerate(paths) if link in q]
            above = [g for g in on if x[g] > mins[g] + TOL]
            return all(share[g] <= share[f] + 1e-6 for g in above)

        assert any(bottleneck(k) for k in saturated), f"flow {f} could gain from a larger share"


@settings(max_examples=50, deadline=None)
@given(problems())
def test_equal_split_never_over_capacity(problem: tuple[np.ndarray, ...]) -> None:
    cap, paths, *_ = problem
    x = equal_split(cap, paths)
    assert (link_loads(x, paths, cap.shape[0]) <= cap + TOL).all()
