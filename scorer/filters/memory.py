"""Filter: each GPU (or the job's share of it) holds what the job needs per GPU.

The need comes from `scorer.memory` (weights, gradients, optimizer, activations, KV cache and
overhead under the job's sharding and parallelism). A GPU share gets the same share of the
GPU's memory: a 250m share of an 80 GiB GPU offers 20 GiB.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.memory import memory_refusal
from scorer.types import JobSpec

__all__ = ["NAME", "MemoryFilter", "fits_memory", "usable_memory_mib"]

NAME = "memory"


class MemoryFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """Besides the nodes' inventory and the job's model vectors: the share asked for."""
        return (job.gpu_milli,)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        have = usable_memory_mib(ctx.state.gpu_memory_mib[ctx.slots], ctx.job.gpu_milli)
        return fits_memory(have, ctx.models.memory_need_mib)

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        have = float(usable_memory_mib(ctx.state.gpu_memory_mib[slot], ctx.job.gpu_milli))
        if ctx.models.memory_need_mib <= have:
            return Status.success()
        model = ctx.state.models[int(ctx.state.model[slot])]
        whole = int(ctx.state.gpu_memory_mib[slot])
        if ctx.job.gpu_milli < 1000 and ctx.models.memory_need_mib <= whole:
            share = -(-ctx.models.memory_need_mib * 1000 // whole)
            return Status.unresolvable(
                f"{memory_refusal(ctx.job, have, f'a {ctx.job.gpu_milli}m share of {model}')}"
                f"; fits a {share}m share"
            )
        return Status.unresolvable(memory_refusal(ctx.job, have, model))

    def example(self, ctx: CycleContext, refused: np.ndarray) -> int:
        """The refused node with the most GPU memory: its refusal says what would fit."""
        return int(refused[np.argmax(ctx.state.gpu_memory_mib[refused])])


def usable_memory_mib(gpu_memory_mib: np.ndarray | int, gpu_milli: int) -> np.ndarray:
    """Memory the job may use on each GPU: all of it, or its share."""
    return np.asarray(gpu_memory_mib) * gpu_milli // 1000


def fits_memory(gpu_memory_mib: np.ndarray, need_mib: int) -> np.ndarray:
    """A GPU fits when its memory is at least the per-GPU need (0 = no need known)."""
    return gpu_memory_mib >= need_mib
