"""Filter: the node's region is one the job allows (data residency)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.types import JobSpec

__all__ = ["NAME", "RegionFilter"]

NAME = "region"


class RegionFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the regions the job allows."""
        return (job.allowed_regions,)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        allowed = ctx.job.allowed_regions
        if not allowed:
            return np.ones(ctx.slots.shape[0], bool)
        idx = [ctx.state.region_index(r) for r in allowed]
        return np.isin(ctx.state.region[ctx.slots], [i for i in idx if i is not None])

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        region = ctx.state.region_name(int(ctx.state.region[slot]))
        if not ctx.job.allowed_regions or region in ctx.job.allowed_regions:
            return Status.success()
        allowed = ", ".join(ctx.job.allowed_regions)
        return Status.unresolvable(f"{region} is not an allowed region ({allowed})")
