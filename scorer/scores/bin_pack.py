"""Score: bin packing (best fit) — prefer the fullest node that still fits; the baseline policy."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext
from scorer.scores.load_balance import least_allocated_score

__all__ = ["NAME", "BinPackScore"]

NAME = "bin_pack"


class BinPackScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        s = ctx.state
        free = s.free_milli_total[slots]
        taken = ctx.gpus_taken(slots) * ctx.job.gpu_milli
        return 100.0 - least_allocated_score(free - taken, s.gpu_count[slots] * 1000)
