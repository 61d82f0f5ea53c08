"""Dominant Resource Fairness (Ghodsi et al., NSDI '11) over GPUs, CPU and memory.

A tenant's dominant share is its largest share of any resource, divided by its weight:

    share(t) = max_r usage[t][r] / capacity[r] / weight(t)      (resources with capacity > 0)

The queue offers capacity to the tenant with the lowest share first (`fair_next`). The fluid
allocation DRF converges to (`drf_allocation`) is what the contention bench compares tenants'
measured shares against: progressive filling raises every active tenant's dominant share at the
same weighted pace, each along its own demand vector, freezing a tenant when its demand is met
or when a resource it uses runs out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["RESOURCES", "dominant_share", "dominant_shares", "drf_allocation", "fair_next"]

RESOURCES = ("gpu", "cpu", "memory")
Vector = Sequence[float] | np.ndarray  # one amount per resource


def dominant_share(usage: Vector, capacity: Vector, weight: float = 1.0) -> float:
    # a handful of resources: plain Python beats numpy's per-call overhead here
    shares = [float(u) / float(c) for u, c in zip(usage, capacity, strict=True) if c > 0]
    return max(shares, default=0.0) / max(weight, 1e-12)


def dominant_shares(
    usage: Mapping[str, Vector],
    capacity: Vector,
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    weights = weights or {}
    return {t: dominant_share(u, capacity, weights.get(t, 1.0)) for t, u in usage.items()}


def fair_next(shares: Mapping[str, float], candidates: Iterable[str]) -> str | None:
    """The candidate tenant with the lowest share (ties: by name, so the order is stable)."""
    ranked = sorted(candidates, key=lambda t: (shares.get(t, 0.0), t))
    return ranked[0] if ranked else None


def drf_allocation(
    demand: Mapping[str, Vector],
    capacity: Vector,
    weights: Mapping[str, float] | None = None,
) -> dict[str, np.ndarray]:
    """Weighted fluid DRF by progressive filling: tenant -> allocated resource vector.

    Each tenant receives lambda_t x its demand vector, 0 <= lambda_t <= 1; active tenants'
    dominant shares rise together (in proportion to their weights) until a demand is met or a
    resource is exhausted, which freezes every tenant that uses it.
    """
    weights = weights or {}
    cap = np.asarray(capacity, float)
    has = cap > 0
    dem = {t: np.asarray(d, float) for t, d in demand.items()}
    dom = {t: float((d[has] / cap[has]).max()) if has.any() else 0.0 for t, d in dem.items()}
    lam = {t: 0.0 for t in dem}
    active = {t for t in dem if dom[t] > 0}
    for _ in range(len(dem) + len(cap) + 1):
        if not active:
            break
        # d lambda_t / d level = weight_t / dom_t: resources used per unit of level
        rate = {t: weights.get(t, 1.0) / dom[t] for t in active}
        used = sum((lam[t] * dem[t] for t in dem), np.zeros_like(cap))
        slope = sum((rate[t] * dem[t] for t in active), np.zeros_like(cap))
        room = np.where((slope > 0) & has, (cap - used) / np.where(slope > 0, slope, 1), np.inf)
        step = min(float(room.min(initial=np.inf)), *((1 - lam[t]) / rate[t] for t in active))
        step = max(step, 0.0)
        for t in active:
            lam[t] = min(1.0, lam[t] + rate[t] * step)
        used = sum((lam[t] * dem[t] for t in dem), np.zeros_like(cap))
        full = has & (used >= cap * (1 - 1e-9))
        active = {t for t in active if lam[t] < 1 - 1e-12 and not (dem[t][full] > 0).any()}
    return {t: lam[t] * dem[t] for t in dem}
