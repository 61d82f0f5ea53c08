"""Score: fragmentation growth (FGD-style, Weng et al., ATC '23).

A node's fragmentation for a task class is the free GPU capacity that class cannot use there:
for a k-GPU class, every free GPU when fewer than k are whole-free, else the partly used GPUs'
free shares; for a share class of m milli, the GPUs with less than m free. The node's
fragmentation is the mix-weighted sum. A placement is scored by how much it grows:
score = 50 - 50 x growth / requested milli, clipped to 0..100 (consuming fragments > 50).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scorer.errors import ScorerError
from scorer.framework import CycleContext, clamp_score

__all__ = ["DEFAULT_MIX", "NAME", "FragmentationScore", "TaskMix", "growth_score"]

NAME = "fragmentation"
FULL = 1000


@dataclass(frozen=True)
class TaskMix:
    """Expected job mix: whole-GPU gang sizes and GPU shares (milli) with their probabilities."""

    whole: Mapping[int, float]
    shares: Mapping[int, float]


# Gavel's recipe (70 % 1 GPU, 10 % 2, 20 % 4) plus 8-GPU gangs and inference shares
DEFAULT_MIX = TaskMix(whole={1: 0.55, 2: 0.10, 4: 0.15, 8: 0.10}, shares={250: 0.05, 500: 0.05})


class FragmentationScore:
    name = NAME

    def __init__(self, mix: TaskMix = DEFAULT_MIX) -> None:
        classes = {**mix.whole, **mix.shares}
        if any(size <= 0 for size in classes) or any(p < 0 for p in classes.values()):
            raise ScorerError(f"task mix needs positive sizes and probabilities: {mix}")
        if any(share >= FULL for share in mix.shares):
            raise ScorerError("a share class must be below 1000 milli-GPU")
        self.mix = mix
        self._k = np.array(list(mix.whole), float)
        self._pk = np.array(list(mix.whole.values()), float)
        self._stranded = self._stranded_table(64)

    def _stranded_table(self, most: int) -> np.ndarray:
        """Mix-weighted whole-free GPUs too few for each k-GPU class, by whole-free count w."""
        w = np.arange(most + 1, dtype=float)
        return FULL * (((w[:, None] < self._k) * w[:, None]) @ self._pk)

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        s = ctx.state
        if s.free_milli.shape[1] >= self._stranded.shape[0]:  # nodes wider than the table
            self._stranded = self._stranded_table(2 * s.free_milli.shape[1])
        w = s.free_whole[slots]
        if not ctx.fractional:
            k = ctx.gpus_taken(slots)
            return growth_score(self._whole_growth(w, w - k), np.asarray(k * FULL, float))
        return self._share_score(ctx, slots, w)

    def _whole_growth(self, w: np.ndarray, w_after: np.ndarray) -> np.ndarray:
        """Mix-weighted growth of whole-free GPUs stranded for k-GPU classes (milli)."""
        # a node that cannot hold the request (w_after < 0) is scored as if emptied
        return self._stranded[np.maximum(w_after, 0)] - self._stranded[w]

    def _share_score(self, ctx: CycleContext, slots: np.ndarray, w: np.ndarray) -> np.ndarray:
        s, m = ctx.state, ctx.job.gpu_milli
        free = s.free_milli[slots]
        usable = s.gpu_ok[slots] & (free >= m)
        x = np.where(usable, free, FULL + 1).min(axis=1).astype(float)  # best-fit GPU
        x_after = x - m
        broke_whole = x == FULL
        w_after = w - broke_whole.astype(w.dtype)
        # partly used GPUs' free milli grows by x_after when a whole GPU is broken, else shrinks m
        partial_delta = np.where(broke_whole, x_after, -float(m))
        growth = self._whole_growth(w, w_after) + partial_delta * self._pk.sum()
        for share, p in self.mix.shares.items():
            growth += p * ((x_after > 0) * (x_after < share) * x_after - (x < share) * x)
        return growth_score(growth, np.full(slots.shape[0], float(m)))


def growth_score(growth_milli: np.ndarray, requested_milli: np.ndarray) -> np.ndarray:
    """50 - 50 x growth / request: no growth 50, consuming only fragments 100.

    e.g. 1 GPU from a node with 8 whole free, mix 8-GPU p=0.1: growth 0.1 x 7000 = 700
    -> 50 - 35 = 15; from a node with 1 free: growth -(0.1+0.15+0.10) x 1000 -> 67.5.
    """
    return clamp_score(50.0 - 50.0 * growth_milli / np.maximum(requested_milli, 1.0))
