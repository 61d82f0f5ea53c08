"""Score: model pressure — keep the GPU models that constrained jobs need for those jobs.

A job that may use only some GPU models (an allow-list) can wait for nothing else, while an
unconstrained job can run anywhere. Each model's pressure is the share of the GPU demand seen
that is bound to it (a job allowing k of the models present counts 1/k on each) over the share
of the free GPU in scope that it holds:

    pressure(m) = bound demand share(m) / free share(m)
    score = 100 / (1 + pressure)

e.g. 6 % of the demand seen is pinned to T4 and T4 holds 2 % of the free GPU: pressure 3, score
25; a model nothing is pinned to scores 100. Pressure 1 (pinned demand in step with what is
left) scores 50. The demand is learned from the jobs placed (`observe`, at commit; each once,
scoring only reads it); jobs with
one allowed model see one model and so score alike everywhere. FGD's "no access" term counts
only the demand side; dividing by what is still free makes a plentiful model cheap to use.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext
from scorer.state import ClusterState
from scorer.types import JobSpec

__all__ = ["NAME", "ModelPressureScore", "pressure_score"]

NAME = "model_pressure"


class ModelPressureScore:
    name = NAME

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._total = 0.0  # GPU demand seen (GPUs, shares as fractions)
        self._bound: dict[frozenset[str], float] = {}  # allow-list -> demand bound to it

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        if not self._bound:
            return np.asarray(100.0)  # nothing constrained seen: no model is under pressure
        s = ctx.state
        free = _free_by_model(s, ctx.slots)
        bound = self._bound_share(s.models, free > 0)
        return pressure_score(bound, free / max(float(free.sum()), 1.0))[s.model[slots]]

    def observe(self, job: JobSpec) -> None:
        """A placement of `job` was committed: its GPU demand joins the demand seen (once)."""
        if job.gpu_count <= 0 or job.job_id in self._seen:
            return
        self._seen.add(job.job_id)
        demand = job.gpu_count * job.gpu_milli / 1000
        self._total += demand
        if job.allowed_gpu_models:
            key = frozenset(job.allowed_gpu_models)
            self._bound[key] = self._bound.get(key, 0.0) + demand

    def _bound_share(self, models: tuple[str, ...], present: np.ndarray) -> np.ndarray:
        """Share of the demand seen bound to each model (split over the models it allows
        that still have free GPU)."""
        out = np.zeros(len(models))
        index = {m: i for i, m in enumerate(models)}
        for allowed, demand in self._bound.items():
            where = [index[m] for m in allowed if m in index and present[index[m]]]
            if where:
                out[where] += demand / len(where)
        return out / max(self._total, 1e-9)


def _free_by_model(s: ClusterState, scope: np.ndarray) -> np.ndarray:
    """Free milli-GPU per model on `scope`, the nodes of the region placed in: the state's
    running totals when `scope` is a region's (or the fleet's) slots, else summed."""
    if scope is s.slots(None):
        return s.free_by_model(None)
    if scope.size:
        region = s.region_name(int(s.region[scope[0]]))
        if scope is s.slots(region):
            return s.free_by_model(region)
    return np.bincount(s.model[scope], weights=s.free_milli_total[scope],
                       minlength=len(s.models)).astype(float)  # fmt: skip


def pressure_score(bound_share: np.ndarray, free_share: np.ndarray) -> np.ndarray:
    """100 / (1 + bound / free) per model; a model with nothing free and demand bound to it: 0.

    e.g. bound 0.06, free 0.02 -> 25; bound 0.0 -> 100; bound 0.1, free 0.1 -> 50.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        pressure = np.where(bound_share > 0, bound_share / np.maximum(free_share, 1e-12), 0.0)
    return 100.0 / (1.0 + pressure)
