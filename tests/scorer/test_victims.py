"""Victim selection: who may be evicted (eligibility) and the cheapest sufficient set.

The feasibility stand-in below places a single-node gang of `chunk` GPUs on the first node
whose free GPUs plus those the victims free there reach `chunk` (the real one asks the placer).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.tenancy import PRIORITY, RECLAIM, Candidate, eligibility, plan_cost, select_victims


def fits(free: Mapping[str, float], chunk: float):
    def feasible(victims: tuple[Candidate, ...]) -> str | None:
        for node in sorted(free):
            freed = sum(v.node_gpus.get(node, 0) for v in victims)
            if free[node] + freed >= chunk:
                return node
        return None

    return feasible


def cand(
    job: str, node: str, gpus: int, lost: float, *, borrowing: bool = False, **kw
) -> Candidate:
    return Candidate(job, kw.pop("tenant", "t"), kw.pop("priority", 0), gpus, gpus * 1000,
                     {node: gpus}, lost, borrowing, **kw)  # fmt: skip


BORROWER = {"quotas": True, "same_cohort": True, "victim_borrowing": True}
RECLAIMING = {**BORROWER, "preemptor_within_nominal": True}


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        # no quotas: strictly lower priority, preemptible only
        ({"victim_priority": 0}, PRIORITY),
        ({"victim_priority": 100}, None),  # equal
        ({"victim_priority": 500}, None),  # higher
        ({"victim_priority": 0, "victim_preemptible": False}, None),
        # quotas, own tenant: priority only
        ({"quotas": True, "victim_tenant": "me", "victim_priority": 0}, PRIORITY),
        ({"quotas": True, "victim_tenant": "me", "victim_priority": 100}, None),
        # quotas, another tenant within its nominal: never, whatever the priorities
        ({"quotas": True, "same_cohort": True, "victim_priority": -100}, None),
        # another cohort: never
        ({"quotas": True, "victim_borrowing": True, "victim_priority": -100}, None),
        # a borrower of my cohort while I am within nominal: reclaim, any priority (default)
        ({"quotas": True, "same_cohort": True, "victim_borrowing": True,
          "preemptor_within_nominal": True, "victim_priority": 500}, RECLAIM),
        # ... lower priority only when reclaim is "lower-priority"
        ({**RECLAIMING, "victim_priority": 500, "reclaim": "lower-priority"}, None),
        ({**RECLAIMING, "victim_priority": 0, "reclaim": "lower-priority"}, RECLAIM),
        # ... never when reclaim is "never"
        ({"quotas": True, "same_cohort": True, "victim_borrowing": True,
          "preemptor_within_nominal": True, "victim_priority": 0, "reclaim": "never"}, None),
        # I borrow too: a borrower of lower priority only
        ({**BORROWER, "victim_priority": 0}, PRIORITY),
        ({**BORROWER, "victim_priority": 100}, None),
        # a reclaim never takes a non-preemptible job either
        ({"quotas": True, "same_cohort": True, "victim_borrowing": True,
          "preemptor_within_nominal": True, "victim_preemptible": False}, None),
    ],
)  # fmt: skip
def test_eligibility(kw: dict, expected: str | None) -> None:
    args = {
        "preemptor_tenant": "me",
        "preemptor_priority": 100,
        "victim_tenant": "other",
        "victim_priority": 0,
        "victim_preemptible": True,
        **kw,
    }
    assert eligibility(**args) == expected


# n1 is full, n2 has 2 free; the preemptor needs 4 GPUs on one node.
FREE = {"n1": 0.0, "n2": 2.0}
A = cand("a", "n1", 2, 100.0)
B = cand("b", "n1", 2, 50.0)
C = cand("c", "n2", 2, 300.0)
D = cand("d", "n2", 4, 20.0)


# cost = (takes an owner's job, GPU-s lost, GPUs evicted, victims)
@pytest.mark.parametrize(
    ("candidates", "expected", "cost"),
    [
        # n1 needs a and b (0 + 2 + 2 = 4): 100 + 50 = 150 GPU-s lost; n2 needs d alone
        # (2 + 4 >= 4): 20 GPU-s lost, or c alone (2 + 2): 300 -> d
        ((A, B, C, D), {"d"}, (1.0, 20.0, 4.0, 1.0)),
        # without d: c (300 GPU-s) against a + b (150) -> a, b
        ((A, B, C), {"a", "b"}, (1.0, 150.0, 4.0, 2.0)),
        # a and b borrow: a set of borrowers only beats d, an owner's, though it loses more
        (
            (
                cand("a", "n1", 2, 100.0, borrowing=True),
                cand("b", "n1", 2, 50.0, borrowing=True),
                D,
            ),
            {"a", "b"},
            (0.0, 150.0, 4.0, 2.0),
        ),
        # only a borrows: a + b still takes an owner's job (b); then least lost work -> d
        ((cand("a", "n1", 2, 100.0, borrowing=True), B, D), {"d"}, (1.0, 20.0, 4.0, 1.0)),
        # equal lost work: fewer GPUs wins; c (2 GPUs) against d (4)
        ((cand("c", "n2", 2, 20.0), D), {"c"}, (1.0, 20.0, 2.0, 1.0)),
    ],
)
def test_cheapest_sufficient_set(
    candidates: tuple[Candidate, ...], expected: set[str], cost: tuple[float, ...]
) -> None:
    plan = select_victims(candidates, fits(FREE, 4), free=FREE, chunk=4, need=4)
    assert plan is not None
    assert {v.job_id for v in plan.victims} == expected
    assert plan.cost == cost == plan_cost(plan.victims)


def test_reprieve_spares_victims_not_needed() -> None:
    # the region-wide pass adds cheapest first: e (n3, 1 GPU, 5 GPU-s) then d; with d alone
    # n2 fits (2 + 4), so e is spared
    e = cand("e", "n3", 1, 5.0)
    free = {**FREE, "n3": 0.0}
    plan = select_victims((e, D), fits(free, 4), free=free, chunk=4, need=4)
    assert plan is not None and [v.job_id for v in plan.victims] == ["d"]


def test_no_plan_when_nothing_frees_enough() -> None:
    assert select_victims((A,), fits(FREE, 4), free=FREE, chunk=4, need=4) is None
    assert select_victims((), fits(FREE, 4), free=FREE, chunk=4, need=4) is None


def test_a_lender_is_never_pushed_below_nominal_by_more_than_one_job() -> None:
    # "other" borrows 2 GPUs (2000 milli): its first 2-GPU job may go, the second not
    x = cand("x", "n1", 2, 1.0, tenant="other", borrowing=True)
    y = cand("y", "n1", 2, 2.0, tenant="other", borrowing=True)
    plan = select_victims((x, y), fits(FREE, 4), free=FREE, chunk=4, need=4, slack={"other": 2000})
    assert plan is None  # n1 would need both
    plan = select_victims((x, y), fits(FREE, 2), free=FREE, chunk=2, need=2, slack={"other": 2000})
    assert plan is None or {v.job_id for v in plan.victims} <= {"x", "y"}


@st.composite
def fleets(draw: st.DrawFn) -> tuple[dict[str, float], list[Candidate], int]:
    nodes = [f"n{i}" for i in range(draw(st.integers(1, 4)))]
    free = {n: float(draw(st.integers(0, 4))) for n in nodes}
    jobs = []
    for i in range(draw(st.integers(0, 8))):
        node = draw(st.sampled_from(nodes))
        gpus, lost = draw(st.sampled_from((1, 2, 4))), float(draw(st.integers(0, 1000)))
        jobs.append(cand(f"j{i}", node, gpus, lost, borrowing=draw(st.booleans())))
    return free, jobs, draw(st.sampled_from((1, 2, 4, 8)))


@settings(max_examples=200, deadline=None)
@given(fleets())
def test_any_plan_is_sufficient_minimal_and_drawn_from_the_candidates(
    fleet: tuple[dict[str, float], list[Candidate], int],
) -> None:
    free, jobs, chunk = fleet
    feasible = fits(free, chunk)
    if feasible(()) is not None:
        return  # it fits already: nobody searches victims then
    plan = select_victims(jobs, feasible, free=free, chunk=chunk, need=chunk)
    if plan is None:
        # nothing sufficient exists: not even every candidate on any node would do
        assert all(free[n] + sum(j.node_gpus.get(n, 0) for j in jobs) < chunk for n in free)
        return
    ids = [v.job_id for v in plan.victims]  # whole candidates (whole jobs), never parts
    assert len(ids) == len(set(ids)) and set(ids) <= {j.job_id for j in jobs}
    assert feasible(plan.victims) is not None
    for victim in plan.victims:  # minimal: sparing any one victim breaks it
        assert feasible(tuple(v for v in plan.victims if v is not victim)) is None
