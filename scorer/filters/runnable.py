"""Filter: the job can run on the GPU model at all (a measured throughput of 0 says it cannot)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.types import JobSpec

__all__ = ["NAME", "RunnableFilter"]

NAME = "runnable"


class RunnableFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the job's model vectors only."""
        return ()

    def filter(self, ctx: CycleContext) -> np.ndarray:
        # either placement shape may be used, so refuse only where both are measured as 0
        return ctx.models.runnable[ctx.node_model]

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        model = int(ctx.state.model[slot])
        if max(ctx.models.speed[model], ctx.models.speed_spread[model]) > 0:
            return Status.success()
        name = ctx.state.models[model]
        return Status.unresolvable(
            f"{ctx.job.job_type or 'the job'} cannot run on {name} (measured 0)"
        )
