"""Cross-region gang plans that a network-aware placer weighs against each other.

The plain gang planner (`scorer.gang.plan_spread`) spreads a gang that fits no single region
over whichever nodes have the most free GPUs, whatever region they are in. Here each pair of
regions (then each triple, if no pair holds it) is a candidate: the region with more usable
GPUs anchors the gang and takes as much as it can in whole replicas (tensor x pipeline GPUs,
so only the data-parallel all-reduce crosses regions), the other region the rest; inside a
region, nodes with the most usable GPUs first, then the best node score. The placer scores
every candidate with the plan plugins (communication fit: the link's bandwidth, RTT and cost),
so the gang crosses over the best-suited link, or not at all.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np

from scorer.gang import GangPlan
from scorer.state import ClusterState

__all__ = ["region_plans"]

MAX_PLANS = 8


def region_plans(
    state: ClusterState,
    slots: np.ndarray,
    node_scores: np.ndarray,
    gpu_count: int,
    tp: int,
    replica: int,
) -> list[GangPlan]:
    """Candidate plans over two regions (three if no pair holds the gang), best anchors first.
    `slots` must be of one GPU model."""
    usable = (state.free_whole[slots] // tp) * tp
    regions = state.region[slots]
    totals = {int(r): int(usable[regions == r].sum()) for r in np.unique(regions)}
    ranked = sorted(totals, key=lambda r: (-totals[r], r))
    plans: list[GangPlan] = []
    for size in (2, 3):
        for group in combinations(ranked, size):
            if sum(totals[r] for r in group) < gpu_count:
                continue
            plan = _plan(slots, usable, node_scores, regions, group, gpu_count, replica)
            if plan is not None:
                plans.append(plan)
            if len(plans) >= MAX_PLANS:
                return plans
        if plans:
            return plans
    return plans


def _plan(
    slots: np.ndarray,
    usable: np.ndarray,
    scores: np.ndarray,
    regions: np.ndarray,
    group: tuple[int, ...],
    need: int,
    replica: int,
) -> GangPlan | None:
    takes = _split(need, [int(usable[regions == r].sum()) for r in group], replica)
    if takes is None:
        return None
    chosen: list[int] = []
    gpus: list[int] = []
    picked_scores: list[float] = []
    for region, take in zip(group, takes, strict=True):
        if take <= 0:
            continue
        idx = np.flatnonzero(regions == region)
        order = idx[np.lexsort((-scores[idx], -usable[idx]))]
        left = take
        for i in order.tolist():
            if left <= 0:
                break
            give = min(int(usable[i]), left)
            if give <= 0:
                continue
            chosen.append(int(slots[i]))
            gpus.append(give)
            picked_scores.append(float(scores[i]))
            left -= give
        if left > 0:
            return None
    if len({int(r) for r in group if r is not None}) < 2 or len([t for t in takes if t]) < 2:
        return None  # one region holds it: the plain planner's region level covers that
    return GangPlan(tuple(chosen), tuple(gpus), "global", float(np.mean(picked_scores)))


def _split(need: int, capacity: list[int], replica: int) -> list[int] | None:
    """GPUs per region, largest first, in whole replicas where possible."""
    takes = [0] * len(capacity)
    left = need
    for i, cap in enumerate(capacity):
        whole = min(cap, left) // replica * replica if replica > 1 else min(cap, left)
        if i == len(capacity) - 1:
            whole = min(cap, left)  # the last region takes what is left, partial if it must
        takes[i] = whole
        left -= whole
    return takes if left == 0 else None
