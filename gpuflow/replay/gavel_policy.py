"""Gavel's heterogeneity-aware max-min fairness (Narayanan et al., OSDI '20), the policy half:
throughput matrices in, an allocation and a round's assignment out (numpy + scipy's HiGHS).

`max_min_fairness`: the time fraction X[j, m] each job spends on each GPU model maximises the
smallest normalised effective throughput

    maximise z  s.t.  z <= sum_m T[j, m] X[j, m] s_j / (w_j P_j)   for every job j
                      sum_m X[j, m] <= 1,  sum_j s_j X[j, m] <= n_m,  0 <= X <= 1

where T is the job's throughput on each model, s_j its GPUs (scale factor), w_j its priority
weight and P_j its throughput under the proportional allocation (n_m / sum n on every model),
as Gavel's `MaxMinFairnessPolicyWithPerf` does.

`round_assignment`: Gavel's mechanism for one round: priority = X[j, m] / (share of time the
job has had on m so far), pairs taken highest priority first while the model has room, each job
on at most one model; a job already on a model keeps it first when the round's lease is renewed.
GPUs still free then go to waiting jobs that can run there, fastest first (work-conserving, so
the basic max-min LP's idle share is not wasted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix, hstack, vstack

__all__ = ["max_min_fairness", "priorities", "proportional_throughputs", "round_assignment"]


def proportional_throughputs(throughputs: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each job's throughput when every model is shared in proportion to its size."""
    share = capacity / max(float(capacity.sum()), 1.0)
    return np.asarray(throughputs @ share)


def max_min_fairness(
    throughputs: np.ndarray,
    scale: np.ndarray,
    capacity: np.ndarray,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """X[j, m] (see the module docstring). `throughputs` is jobs x models; 0 = cannot run.

    e.g. one V100 and one K80, two 1-GPU jobs with T = [[1, 1], [1, 0.2]] (the first runs as
    fast on either): P = [1, 0.6]; the fair optimum gives the second job the V100 and the
    first the K80, X = [[0, 1], [1, 0]], both at normalised throughput 1 / P >= 1.
    """
    jobs, models = throughputs.shape
    if jobs == 0:
        return np.zeros((0, models))
    weights = np.ones(jobs) if weights is None else weights
    prop = proportional_throughputs(throughputs, capacity)
    coef = throughputs * scale[:, None] / (weights * np.maximum(prop, 1e-12))[:, None]
    n = jobs * models  # variables: X flattened row-major, then z
    rows = np.repeat(np.arange(jobs), models)
    cols = np.arange(n)
    z_col = coo_matrix(np.ones((jobs, 1)))
    fair = hstack([coo_matrix((-coef.ravel(), (rows, cols)), shape=(jobs, n)), z_col])
    one = hstack([coo_matrix((np.ones(n), (rows, cols)), shape=(jobs, n)), 0 * z_col])
    per_model = np.tile(np.arange(models), jobs)
    room = coo_matrix((np.repeat(scale, models).astype(float), (per_model, cols)), (models, n))
    fits = hstack([room, coo_matrix((models, 1))])
    a_ub = vstack([fair, one, fits]).tocsr()
    b_ub = np.concatenate([np.zeros(jobs), np.ones(jobs), capacity.astype(float)])
    bounds = [(0.0, 1.0 if t > 0 else 0.0) for t in throughputs.ravel()] + [(0.0, None)]
    cost = np.zeros(n + 1)
    cost[-1] = -1.0  # maximise z
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if res.status != 0 or res.x is None:
        return np.zeros((jobs, models))
    return np.clip(res.x[:n].reshape(jobs, models), 0.0, 1.0)


def priorities(allocation: np.ndarray, received: np.ndarray, elapsed: np.ndarray) -> np.ndarray:
    """Gavel's round priorities: allocation over the share of time received on each model so
    far (a job that has had none of its share yet goes first)."""
    share = received / np.maximum(elapsed, 1e-9)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(share > 0, allocation / share, np.where(allocation > 0, np.inf, 0.0))
    return np.asarray(out)


def round_assignment(
    prio: np.ndarray,
    throughputs: np.ndarray,
    scale: Sequence[int],
    capacity: Sequence[int],
    current: Mapping[int, int],
) -> dict[int, int]:
    """job index -> model index for this round, highest priority pairs first (ties: a job
    staying on its current model first, the lease renewed), within each model's capacity;
    then leftover GPUs to jobs that can run there, fastest first."""
    free = list(capacity)
    pairs = [
        (0, -float(prio[j, m]), 0 if current.get(j) == m else 1, j, m)
        for j in range(prio.shape[0])
        for m in range(prio.shape[1])
        if prio[j, m] > 0
    ]
    pairs += [
        (1, -float(throughputs[j, m]), 0 if current.get(j) == m else 1, j, m)
        for j in range(prio.shape[0])
        for m in range(prio.shape[1])
        if prio[j, m] <= 0 and throughputs[j, m] > 0
    ]
    chosen: dict[int, int] = {}
    for _, _, _, j, m in sorted(pairs):
        if j not in chosen and free[m] >= scale[j]:
            chosen[j] = m
            free[m] -= scale[j]
    return chosen
