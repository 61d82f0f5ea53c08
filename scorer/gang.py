"""Gang and topology mechanics: which GPUs of a node, and which nodes for a spread gang.

A gang is all-or-nothing and of one GPU model. It prefers one NVLink island, then one node, then
one rack, one zone, one region; it crosses regions only when the job allows it. Tensor-parallel
groups never cross a node: a node contributes whole TP groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scorer.state import FULL_GPU, ClusterState

__all__ = ["LEVELS", "GangPlan", "pick_gpus", "pick_share", "plan_spread"]

LEVELS = ("rack", "zone", "region", "global")
_BIG = np.iinfo(np.int64).max


def pick_gpus(state: ClusterState, slot: int, k: int) -> tuple[int, ...]:
    """k whole free GPUs: the smallest NVLink island that holds them, fastest GPUs first;
    when no island can, fill the islands with the most free GPUs first."""
    # a node has a handful of GPUs: plain Python beats numpy's per-call overhead here
    ok = state.gpu_exists[slot] & state.gpu_ok[slot] & (state.free_milli[slot] == FULL_GPU)
    free = [g for g, usable in enumerate(ok.tolist()) if usable]
    if len(free) == k:
        return tuple(free)  # all of them: nothing to choose
    island_row, perf_row = state.island[slot].tolist(), state.perf[slot].tolist()
    counts: dict[int, int] = {}
    for g in free:
        counts[island_row[g]] = counts.get(island_row[g], 0) + 1
    fitting = [i for i, c in counts.items() if c >= k]
    if fitting:
        best = min(fitting, key=lambda i: (counts[i], i))
        members = [g for g in free if island_row[g] == best]
        return tuple(sorted(sorted(members, key=lambda g: (-perf_row[g], g))[:k]))
    # island with most free GPUs first, then faster GPUs, then lower index
    order = sorted(free, key=lambda g: (-counts[island_row[g]], -perf_row[g], g))
    return tuple(sorted(order[:k]))


def pick_share(state: ClusterState, slot: int, milli: int) -> int:
    """The GPU whose free share fits `milli` most tightly (best fit keeps whole GPUs whole)."""
    free = state.free_milli[slot]
    fits = state.gpu_exists[slot] & state.gpu_ok[slot] & (free >= milli)
    return int(np.argmin(np.where(fits, free, FULL_GPU + 1)))


@dataclass(frozen=True)
class GangPlan:
    """Nodes of a spread gang, the GPUs each takes, and the domain they share."""

    slots: tuple[int, ...]
    gpus: tuple[int, ...]
    level: str
    mean_score: float


def plan_spread(
    state: ClusterState,
    slots: np.ndarray,
    node_scores: np.ndarray,
    gpu_count: int,
    tp: int,
    levels: tuple[str, ...],
) -> GangPlan | None:
    """Tightest domain (rack < zone < region < global) whose nodes hold the gang, fewest nodes,
    then best mean node score. `slots` must be of one GPU model."""
    usable = (state.free_whole[slots] // tp) * tp
    if usable.sum() < gpu_count:
        return None
    group_of = {
        "rack": state.rack,
        "zone": state.zone,
        "region": state.region,
    }
    for level in levels:
        groups = group_of[level][slots] if level in group_of else np.zeros(slots.shape[0], int)
        plan = _best_group(slots, usable, node_scores, groups, gpu_count, level)
        if plan is not None:
            return plan
    return None


def _best_group(
    slots: np.ndarray,
    usable: np.ndarray,
    scores: np.ndarray,
    groups: np.ndarray,
    need: int,
    level: str,
) -> GangPlan | None:
    if np.bincount(groups, weights=usable).max(initial=0) < need:
        return None  # no group of this level holds the gang: skip the sorting
    # within each group: most usable GPUs first (fewest nodes), then best score
    order = np.lexsort((-scores, -usable, groups))
    g, u, sc = groups[order], usable[order], scores[order]
    n = g.shape[0]
    starts = np.concatenate(([0], np.flatnonzero(g[1:] != g[:-1]) + 1))
    ends = np.concatenate((starts[1:], [n]))
    cum = np.cumsum(u)
    base = np.repeat(cum[starts] - u[starts], ends - starts)
    idx = np.arange(n)
    reached = np.where(cum - base >= need, idx, _BIG)
    first = np.minimum.reduceat(reached, starts)
    ok = first != _BIG
    if not ok.any():
        return None
    nodes = np.where(ok, first - starts + 1, _BIG)
    cum_sc = np.cumsum(sc)
    sc_base = cum_sc[starts] - sc[starts]
    mean = np.where(ok, (cum_sc[np.minimum(first, n - 1)] - sc_base) / nodes, -1.0)
    best = int(np.lexsort((-mean, nodes))[0])
    lo, hi = int(starts[best]), int(first[best]) + 1
    take = u[lo:hi].copy()
    take[-1] -= int(take.sum()) - need  # the last node gives only what is still missing
    chosen = slots[order[lo:hi]]
    level = "node" if chosen.shape[0] == 1 else level
    return GangPlan(
        tuple(int(s) for s in chosen), tuple(int(t) for t in take), level, float(mean[best])
    )
