"""Score: load balance — prefer nodes left emptier after the placement (spreads wear and heat).

Spreading never breaks up a whole node: a node with every GPU free that the job would not fill
scores 0 (a whole node is worth more to a gang than to spreading), so the term only spreads
over nodes already in use."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext
from scorer.rowcache import RowCache

__all__ = ["NAME", "LoadBalanceScore", "balance", "least_allocated_score"]

NAME = "load_balance"


class LoadBalanceScore:
    """Each node's score depends only on its row and the job's shape: kept per shape and
    recomputed only for the nodes changed since (`RowCache`)."""

    name = NAME

    def __init__(self) -> None:
        self._cache = RowCache()

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        job = ctx.job
        shape = (ctx.spread, job.gpu_count, job.gpu_milli, max(1, job.tensor_parallel))
        return self._cache.get(ctx.state, shape, slots, lambda rows: balance(ctx, rows))


def balance(ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
    """The score of each node of `slots`, computed afresh."""
    s = ctx.state
    free = s.free_milli_total[slots]
    taken = ctx.gpus_taken(slots) * ctx.job.gpu_milli
    size = s.gpu_count[slots]
    spread = least_allocated_score(free - taken, size * 1000)
    breaks = (s.free_whole[slots] == size) & (size >= 2) & (taken < size * 1000)
    return np.where(breaks, 0.0, spread)


def least_allocated_score(free_after: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """100 x free after / capacity; e.g. 8 GPUs, 6 free, take 2 -> 4000/8000 = 50."""
    return np.minimum(np.maximum(100.0 * free_after / np.maximum(capacity, 1), 0.0), 100.0)
