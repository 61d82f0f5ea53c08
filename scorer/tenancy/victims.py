"""Victim selection for a job that cannot be placed: who may be evicted, and the cheapest set
whose eviction gives the job a feasible placement.

Who (`eligibility`), whole jobs only (a gang's GPUs all go, never half of them):
  - never a non-preemptible job;
  - without quotas, or within the preemptor's own tenant: strictly lower priority only;
  - with quotas, another tenant's job only while that tenant borrows in the cell (its nominal
    quota is guaranteed): for a preemptor back within its own nominal this is *reclaim* (any
    priority by default, `preemption.reclaim`), otherwise strictly lower priority; and only
    while the tenant still borrows (never pushed further below nominal than one job).

Cheapest (`select_victims`), lexicographic over the set:
  1. borrowers before owners: a set of borrowers only beats any set that takes an owner's job
     (borrowed quota was lent on the promise it can be taken back),
  2. least work lost since the victims' last checkpoints (GPU-seconds),
  3. fewest GPUs evicted,
  4. fewest victims.
Candidate plans: per node (the victims on one node, cheapest first, until it can host the
job) and one across the region (cheapest first until the job fits anywhere); each is pruned
(`reprieve`: a victim whose survival still leaves a placement stays) and the cheapest wins.
Feasibility is the caller's: a callable that tentatively releases the victims and asks the
placer (and the quota) whether the job fits, returning the placement or None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PRIORITY",
    "RECLAIM",
    "Candidate",
    "VictimPlan",
    "eligibility",
    "plan_cost",
    "select_victims",
]

PRIORITY, RECLAIM = "PRIORITY", "RECLAIM"
Feasible = Callable[[tuple["Candidate", ...]], Any]


@dataclass(frozen=True)
class Candidate:
    """A running job that may be evicted, with what evicting it costs and frees."""

    job_id: str
    tenant: str
    priority: int
    gpus: float  # GPUs it holds (a 250-milli share counts 0.25)
    milli: int  # milli-GPUs, the quota unit
    node_gpus: Mapping[str, float] = field(default_factory=dict)  # GPUs freed per node
    lost_gpu_s: float = 0.0  # work since its last checkpoint, GPU-seconds
    borrowing: bool = False  # its tenant holds more than its nominal quota in this cell
    cause: str = PRIORITY
    started_ms: int = 0

    @property
    def key(self) -> tuple[Any, ...]:
        """Cheapest first: borrowers, least lost work, fewest GPUs, lowest priority, newest."""
        return (
            not self.borrowing,
            self.lost_gpu_s,
            self.gpus,
            self.priority,
            -self.started_ms,
            self.job_id,
        )


@dataclass(frozen=True)
class VictimPlan:
    victims: tuple[Candidate, ...]
    target: Any  # what `feasible` returned for this set (the preemptor's placement)
    cost: tuple[float, ...]


def eligibility(
    *,
    preemptor_tenant: str,
    preemptor_priority: int,
    victim_tenant: str,
    victim_priority: int,
    victim_preemptible: bool,
    quotas: bool = False,
    same_cohort: bool = False,
    victim_borrowing: bool = False,
    preemptor_within_nominal: bool = False,
    reclaim: str = "any",
) -> str | None:
    """PRIORITY or RECLAIM when the victim may be evicted for the preemptor, else None."""
    if not victim_preemptible:
        return None
    lower = victim_priority < preemptor_priority
    if not quotas or victim_tenant == preemptor_tenant:
        return PRIORITY if lower else None
    if not (same_cohort and victim_borrowing):
        return None  # another tenant's nominal quota is guaranteed
    if preemptor_within_nominal and reclaim != "never":
        return RECLAIM if reclaim == "any" or lower else None
    return PRIORITY if lower and not preemptor_within_nominal else None


def plan_cost(victims: Sequence[Candidate]) -> tuple[float, ...]:
    owners = any(not v.borrowing for v in victims)
    return (
        float(owners),
        float(sum(v.lost_gpu_s for v in victims)),
        float(sum(v.gpus for v in victims)),
        float(len(victims)),
    )


class _Search:
    """One search: bounded feasibility calls, borrower slack respected."""

    def __init__(
        self,
        feasible: Feasible,
        free: Mapping[str, float],
        chunk: float,
        need: float,
        slack: Mapping[str, int],
        max_victims: int,
        max_checks: int,
    ) -> None:
        self.feasible, self.free, self.chunk, self.need = feasible, free, chunk, need
        self.slack, self.max_victims, self.checks_left = slack, max_victims, max_checks

    def check(self, victims: tuple[Candidate, ...]) -> Any:
        if self.checks_left <= 0:
            return None
        self.checks_left -= 1
        return self.feasible(victims)

    def grow(self, ordered: Sequence[Candidate], room: Callable[[list[Candidate]], bool]) -> Any:
        """Add victims cheapest first until `room` says the job may fit and `feasible` agrees."""
        chosen: list[Candidate] = []
        taken: dict[str, int] = {}
        for cand in ordered:
            if len(chosen) >= self.max_victims:
                return None
            if cand.tenant in self.slack:  # another tenant: only while it still borrows
                if self.slack[cand.tenant] - taken.get(cand.tenant, 0) <= 0:
                    continue
                taken[cand.tenant] = taken.get(cand.tenant, 0) + cand.milli
            chosen.append(cand)
            if room(chosen):
                target = self.check(tuple(chosen))
                if target is not None:
                    return self.reprieve(chosen, target)
        return None

    def reprieve(self, chosen: list[Candidate], target: Any) -> VictimPlan:
        """Spare every victim whose survival still leaves a placement (costliest first)."""
        kept = list(chosen)
        for cand in sorted(chosen, key=lambda c: c.key, reverse=True):
            if len(kept) == 1:
                break
            trial = tuple(c for c in kept if c is not cand)
            again = self.check(trial)
            if again is not None:
                kept, target = list(trial), again
        return VictimPlan(tuple(kept), target, plan_cost(kept))

    def node_room(self, node: str) -> Callable[[list[Candidate]], bool]:
        def room(chosen: list[Candidate]) -> bool:
            freed = sum(c.node_gpus.get(node, 0) for c in chosen)
            return self.chunk <= 0 or self.free.get(node, 0) + freed >= self.chunk - 1e-9

        return room

    def region_room(self, chosen: list[Candidate]) -> bool:
        freed = sum(sum(c.node_gpus.values()) for c in chosen)
        return self.need <= 0 or sum(self.free.values()) + freed >= self.need - 1e-9


def select_victims(
    candidates: Sequence[Candidate],
    feasible: Feasible,
    *,
    free: Mapping[str, float],
    chunk: float,
    need: float,
    slack: Mapping[str, int] | None = None,
    max_victims: int = 16,
    max_checks: int = 64,
) -> VictimPlan | None:
    """The cheapest victim set that makes `feasible` succeed (see the module doc), or None.

    `free`: whole free GPUs per node now; `chunk`: GPUs one node must offer (0: fractional,
    no pre-check); `need`: GPUs in all; `slack`: for tenants other than the preemptor's,
    milli-GPUs they borrow (they are evicted only while borrowing).
    """
    if not candidates:
        return None
    search = _Search(feasible, free, chunk, need, slack or {}, max_victims, max_checks)
    ordered = sorted(candidates, key=lambda c: c.key)
    plans: list[VictimPlan] = []
    # nodes in order of what their cheapest sufficient-looking prefix costs: once a plan is as
    # cheap as the next node's prefix, the nodes after it cannot do better (bounded search)
    by_node: dict[str, list[Candidate]] = {}
    for c in ordered:  # one pass: each node's candidates, still cheapest first
        for node, gpus in c.node_gpus.items():
            if gpus > 0:
                by_node.setdefault(node, []).append(c)
    per_node = []
    for node, on_node in sorted(by_node.items()):
        bound = _prefix_cost(on_node, search.node_room(node))
        if bound is not None:
            per_node.append((bound, node, on_node))
    for bound, node, on_node in sorted(per_node, key=lambda x: (x[0], x[1])):
        if plans and min(p.cost for p in plans) <= bound:
            break
        plan = search.grow(on_node, search.node_room(node))
        if plan is not None:
            plans.append(plan)
    spread = search.grow(ordered, search.region_room)
    if spread is not None:
        plans.append(spread)
    return min(plans, key=lambda p: p.cost) if plans else None


def _prefix_cost(
    ordered: Sequence[Candidate], room: Callable[[list[Candidate]], bool]
) -> tuple[float, ...] | None:
    """Cost of the cheapest-first prefix that passes the room pre-check (None: none does)."""
    chosen: list[Candidate] = []
    for cand in ordered:
        chosen.append(cand)
        if room(chosen):
            return plan_cost(chosen)
    return None
