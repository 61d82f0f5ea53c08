"""Filter: each GPU has the memory the job needs per GPU (model sharded over TP x PP)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status

__all__ = ["NAME", "MemoryFilter"]

NAME = "memory"


class MemoryFilter:
    name = NAME
    static = True

    def filter(self, ctx: CycleContext) -> np.ndarray:
        return fits_memory(ctx.state.gpu_memory_mib[ctx.slots], ctx.models.memory_need_mib)

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        have = int(ctx.state.gpu_memory_mib[slot])
        need = ctx.models.memory_need_mib
        if need <= have:
            return Status.success()
        return Status.unresolvable(Insufficient("gpu_memory_mib", need, have))


def fits_memory(gpu_memory_mib: np.ndarray, need_mib: int) -> np.ndarray:
    """A GPU fits when its memory is at least the per-GPU need (0 = no need known)."""
    return gpu_memory_mib >= need_mib
