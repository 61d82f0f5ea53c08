"""Filter: the node has free capacity now: whole GPUs (one TP group at least) or a milli-share,
and the host CPU and memory the job asks for (where the node declares them)."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status

__all__ = ["NAME", "CapacityFilter", "host_free"]

NAME = "capacity"


class CapacityFilter:
    name = NAME
    static = False

    def filter(self, ctx: CycleContext) -> np.ndarray:
        s = ctx.state
        if ctx.fractional:
            gpus = s.max_share[ctx.slots] >= ctx.job.gpu_milli
        else:
            gpus = s.free_whole[ctx.slots] >= ctx.chunk
        return gpus & host_free(ctx, ctx.slots)

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        s, job = ctx.state, ctx.job
        reasons: list[Insufficient | str] = []
        if ctx.fractional and s.max_share[slot] < job.gpu_milli:
            reasons.append(
                Insufficient("GPU share", job.gpu_milli, int(s.max_share[slot]), "gpu_milli")
            )
        elif not ctx.fractional and s.free_whole[slot] < ctx.chunk:
            reasons.append(Insufficient("free GPUs", ctx.chunk, int(s.free_whole[slot])))
        if job.cpu_milli and s.cpu_milli[slot] and s.free_cpu[slot] < job.cpu_milli:
            reasons.append(
                Insufficient("free CPU", job.cpu_milli, int(s.free_cpu[slot]), "cpu_milli")
            )
        if job.memory_mib and s.memory_mib[slot] and s.free_mem[slot] < job.memory_mib:
            reasons.append(
                Insufficient("free host memory", job.memory_mib, int(s.free_mem[slot]), "MiB")
            )
        return Status.unschedulable(*reasons) if reasons else Status.success()


def host_free(ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
    """Nodes with the job's host CPU and memory free now (undeclared capacity always fits)."""
    s, job = ctx.state, ctx.job
    ok = np.ones(slots.shape[0], bool)
    if job.cpu_milli:
        ok &= (s.cpu_milli[slots] == 0) | (s.free_cpu[slots] >= job.cpu_milli)
    if job.memory_mib:
        ok &= (s.memory_mib[slots] == 0) | (s.free_mem[slots] >= job.memory_mib)
    return ok
