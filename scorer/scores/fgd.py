"""Score: Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", ATC '23).

A node's fragmentation for a task class is the free GPU capacity that class cannot use there:
for a k-GPU class, all free capacity when fewer than k GPUs are whole-free, else the free
shares of partly used GPUs; for a share class of m milli, the free capacity of GPUs with less
than m free (all of it when no GPU has m free). The node's expected fragmentation F weights
the classes by the target workload distribution, learned online from the jobs this plugin has
scored (each job counted once), so it follows the trace. FGD places a task where F grows
least: score = 50 - 50 x (F_after - F_before) / requested milli, clipped to 0..100.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from scorer.framework import CycleContext
from scorer.scores.fragmentation import growth_score

__all__ = ["NAME", "FgdScore", "expected_fragmentation"]

NAME = "fgd"
FULL = 1000
_MEMORY = 100_000  # jobs remembered for the workload distribution


class FgdScore:
    name = NAME

    def __init__(self) -> None:
        self._demand: OrderedDict[str, tuple[int, int]] = OrderedDict()  # job -> (gpus, milli)

    def _classes(self) -> dict[tuple[int, int], float]:
        counts: dict[tuple[int, int], float] = {}
        for demand in self._demand.values():
            counts[demand] = counts.get(demand, 0.0) + 1.0
        total = sum(counts.values())
        return {k: v / total for k, v in counts.items()}

    def _observe(self, ctx: CycleContext) -> None:
        job = ctx.job
        if job.job_id not in self._demand:
            self._demand[job.job_id] = (job.gpu_count, job.gpu_milli)
            if len(self._demand) > _MEMORY:
                self._demand.popitem(last=False)

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        self._observe(ctx)
        s, job = ctx.state, ctx.job
        free = np.where(s.gpu_exists[slots] & s.gpu_ok[slots], s.free_milli[slots], 0)
        after = free.copy()
        if ctx.fractional:
            usable = free >= job.gpu_milli
            best = np.argmin(np.where(usable, free, FULL + 1), axis=1)  # best-fit GPU
            rows = np.arange(free.shape[0])
            after[rows, best] -= np.where(usable[rows, best], job.gpu_milli, 0)
            requested = np.full(free.shape[0], float(job.gpu_milli))
        else:
            k = np.broadcast_to(np.asarray(ctx.gpus_taken(slots)), (free.shape[0],))
            whole = free == FULL
            taken = whole & (np.cumsum(whole, axis=1) <= k[:, None])
            after[taken] = 0
            requested = k.astype(float) * FULL
        classes = self._classes()
        growth = expected_fragmentation(after, classes) - expected_fragmentation(free, classes)
        return growth_score(growth, requested)


def expected_fragmentation(free: np.ndarray, classes: dict[tuple[int, int], float]) -> np.ndarray:
    """Mix-weighted free milli-GPU each node cannot give to a task class, per row of `free`.

    e.g. free [1000, 300, 0, 0], classes {(1 GPU, 1000): 1.0}: the 300 on the partly used GPU
    is a fragment -> 300; with {(2 GPUs, 1000): 1.0}: only one whole GPU -> all 1300.
    """
    total = free.sum(axis=1).astype(float)
    whole = (free == FULL).sum(axis=1)
    partial = np.where(free < FULL, free, 0).sum(axis=1).astype(float)
    frag = np.zeros(free.shape[0])
    for (gpus, milli), p in classes.items():
        if milli >= FULL:
            frag += p * np.where(whole >= gpus, partial, total)
        else:
            usable = (free >= milli).any(axis=1)
            small = np.where(free < milli, free, 0).sum(axis=1).astype(float)
            frag += p * np.where(usable, small, total)
    return frag
