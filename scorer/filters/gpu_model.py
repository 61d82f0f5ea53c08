"""Filter: the node's GPU model is in the catalogue and in the job's allowed models."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.types import JobSpec

__all__ = ["NAME", "GpuModelFilter"]

NAME = "gpu_model"


class GpuModelFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the job's model vectors only."""
        return ()

    def filter(self, ctx: CycleContext) -> np.ndarray:
        return model_allowed(ctx.models.listed, ctx.node_model)

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        model = int(ctx.state.model[slot])
        name = ctx.state.models[model]
        if not ctx.models.known[model]:
            return Status.unresolvable(f"{name} is not in the GPU catalogue")
        if not ctx.models.allowed[model]:
            allowed = ", ".join(ctx.job.allowed_gpu_models)
            return Status.unresolvable(f"{name} is not an allowed GPU model ({allowed})")
        return Status.success()


def model_allowed(allowed_by_model: np.ndarray, node_model: np.ndarray) -> np.ndarray:
    """Look each node's model up in the per-model allow vector."""
    return allowed_by_model[node_model]
