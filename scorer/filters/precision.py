"""Filter: the GPU has native arithmetic for the job's precision (no FP8 before Hopper/Ada)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.types import JobSpec

__all__ = ["NAME", "PrecisionFilter"]

NAME = "precision"


class PrecisionFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the job's model vectors only."""
        return ()

    def filter(self, ctx: CycleContext) -> np.ndarray:
        return ctx.models.precision_ok[ctx.node_model]

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        model = int(ctx.state.model[slot])
        if ctx.models.precision_ok[model]:
            return Status.success()
        name = ctx.state.models[model]
        return Status.unresolvable(f"{name} has no native {ctx.job.precision} arithmetic")
