"""Score: data affinity — run where the job's data lives (100), elsewhere 0."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["NAME", "DataAffinityScore"]

NAME = "data_affinity"


class DataAffinityScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        data_region = ctx.job.data_region
        idx = None if data_region is None else ctx.state.region_index(data_region)
        if data_region is None:
            return np.full(slots.shape[0], 100.0)
        return np.where(ctx.state.region[slots] == idx, 100.0, 0.0)
