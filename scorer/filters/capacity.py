"""Filter: the node has free capacity now: whole GPUs (one TP group at least) or a milli-share."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status

__all__ = ["NAME", "CapacityFilter"]

NAME = "capacity"


class CapacityFilter:
    name = NAME
    static = False

    def filter(self, ctx: CycleContext) -> np.ndarray:
        s = ctx.state
        if ctx.fractional:
            return s.max_share[ctx.slots] >= ctx.job.gpu_milli
        return s.free_whole[ctx.slots] >= ctx.chunk

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        s = ctx.state
        if ctx.fractional:
            free = int(s.max_share[slot])
            if free >= ctx.job.gpu_milli:
                return Status.success()
            return Status.unschedulable(
                Insufficient("GPU share", ctx.job.gpu_milli, free, "gpu_milli")
            )
        if s.free_whole[slot] >= ctx.chunk:
            return Status.success()
        return Status.unschedulable(Insufficient("free GPUs", ctx.chunk, int(s.free_whole[slot])))
