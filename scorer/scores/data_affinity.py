"""Score: data affinity — run where the job's data lives (100), elsewhere 0."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["NAME", "DataAffinityScore"]

NAME = "data_affinity"


class DataAffinityScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float:
        if ctx.job.data_region is None:
            return 100.0
        idx = ctx.state.region_index(ctx.job.data_region)
        return np.where(ctx.state.region[slots] == idx, 100.0, 0.0)
