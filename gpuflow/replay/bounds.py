"""Lower bounds on average JCT for a trace: what no scheduler can beat, to judge the policies.

- `no_queueing_bound`: every job alone on its fastest GPU model, consolidated on one server,
  from its submission (no waiting, no sharing): the mean of duration / best speed.
- `capacity_lower_bound`: the same jobs on the trace's real capacity (GPUs per model), as a
  time-indexed linear program (HiGHS): jobs may be preempted, moved and even split across models
  at no cost, so it is a relaxation of every real schedule; each job's completion is at least
  its mean busy time + half its best-case run time (the work spread at the fastest pace ends no
  earlier), and at least its best-case run time. Meant for small traces (hundreds of jobs).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from agents.replay.trace import Trace, job_record
from scorer import JobSpec

__all__ = ["capacity_lower_bound", "no_queueing_bound"]


def _speeds(trace: Trace) -> tuple[list[str], np.ndarray]:
    """GPU models of the trace and each job's speed on each (consolidated)."""
    tp = trace.throughput_model()
    models = sorted({n.gpu_model for n in trace.nodes if n.gpu_count})
    speeds = np.array(
        [[tp.relative_speed(JobSpec.from_record(job_record(j, 0)), m) for m in models]
         for j in trace.jobs]
    )  # fmt: skip
    return models, speeds


def no_queueing_bound(trace: Trace) -> float:
    """Mean JCT if every job ran alone on its fastest model from its arrival (seconds).

    e.g. a 2 h job twice as fast on V100 as its reference, and a 1 h job at 0.5 at best:
    (1 h + 2 h) / 2 = 1.5 h.
    """
    gpu_jobs = [j for j in trace.jobs if j.num_gpus > 0]
    if not gpu_jobs:
        return 0.0
    _, speeds = _speeds(replace(trace, jobs=tuple(gpu_jobs)))
    best = speeds.max(axis=1)
    durations = np.array([j.duration_s for j in gpu_jobs])
    return float(np.mean(np.where(best > 0, durations / np.maximum(best, 1e-12), np.inf)))


def capacity_lower_bound(trace: Trace, slot_s: float = 900.0) -> float:
    """The LP relaxation's mean JCT (seconds) on the trace's capacity (see the module doc)."""
    jobs = [j for j in trace.jobs if j.num_gpus > 0]
    models, speeds = _speeds(replace(trace, jobs=tuple(jobs)))
    cap = np.array([sum(n.gpu_count for n in trace.nodes if n.gpu_model == m) for m in models])
    work = np.array([j.duration_s for j in jobs])
    gpus = np.array([j.num_gpus for j in jobs])
    submit = np.array([j.submit_s for j in jobs])
    best = speeds.max(axis=1)
    fastest = work / best
    horizon = submit.max() + (work * gpus / best).sum() / max(cap.sum(), 1) + fastest.max()
    slots = math.ceil(horizon / slot_s) + 2
    n_jobs, n_models = speeds.shape
    n_x = n_jobs * n_models * slots
    grid = np.meshgrid(np.arange(n_jobs), np.arange(n_models), np.arange(slots), indexing="ij")
    j_idx, m_idx, t_idx = (g.ravel() for g in grid)
    x_col = np.arange(n_x)
    # a slot before the job arrived (or a model it cannot use) gets no time
    upper = np.where((t_idx * slot_s >= submit[j_idx] - 1e-9) & (speeds[j_idx, m_idx] > 0), 1, 0)
    rows = [
        (j_idx * slots + t_idx, np.ones(n_x)),  # one model at a time: sum_m x <= 1
        (n_jobs * slots + m_idx * slots + t_idx, gpus[j_idx].astype(float)),  # capacity
    ]
    frac = slot_s * speeds[j_idx, m_idx] / work[j_idx]  # share of the job's work per slot
    busy_row = n_jobs * slots + n_models * slots + j_idx
    rows.append((busy_row, frac * t_idx * slot_s))  # mean busy time - C_j <= -p_j / 2
    r = np.concatenate([r for r, _ in rows])
    v = np.concatenate([v for _, v in rows])
    c = np.concatenate([x_col] * 3)
    n_rows = n_jobs * slots + n_models * slots + n_jobs
    c_rows = n_jobs * slots + n_models * slots + np.arange(n_jobs)
    a_ub = coo_matrix(
        (np.concatenate([v, -np.ones(n_jobs)]),
         (np.concatenate([r, c_rows]), np.concatenate([c, n_x + np.arange(n_jobs)]))),
        shape=(n_rows, n_x + n_jobs),
    )  # fmt: skip
    b_ub = np.concatenate([np.ones(n_jobs * slots), np.repeat(cap, slots), -fastest / 2])
    a_eq = coo_matrix((slot_s * speeds[j_idx, m_idx], (j_idx, x_col)), shape=(n_jobs, n_x + n_jobs))
    cost = np.concatenate([np.zeros(n_x), np.ones(n_jobs)])
    bounds = [(0.0, float(u)) for u in upper] + [
        (float(f + s), None) for f, s in zip(fastest, submit, strict=True)
    ]
    # completion counted from time 0: C_j - submit_j is the JCT
    res = linprog(cost, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=work, bounds=bounds, method="highs")
    if res.status != 0:
        raise ValueError(f"capacity bound LP failed: {res.message}")
    return float(res.fun / n_jobs - submit.mean())
