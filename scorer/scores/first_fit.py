"""Score: first fit — prefer nodes in inventory order, blind to GPU model; the baseline policy."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["NAME", "FirstFitScore"]

NAME = "first_fit"


class FirstFitScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        # slots ascend in inventory order; the first candidate scores 100, the last ~0
        n = slots.shape[0]
        return 100.0 * (1.0 - np.arange(n) / max(n, 1))
