"""Score: best fit, as the FGD paper's artifact defines it (`best_fit_score.go`): the node that
the task leaves with the least free host CPU and GPU, each normalised by the largest node's.

    leftover = 0.5 x (free CPU - asked) / largest CPU + 0.5 x (free GPU - asked) / largest GPU
    score = 100 x (1 - leftover)

A node that does not declare its CPU counts as the largest's, free. CPU-only tasks are ranked
by the same leftover (`rank_host_only`); shares go to the tightest GPU (the placer's own
best-fit GPU), whole GPUs by the placer's rule. Ties: inventory order (first fit).
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext
from scorer.state import ClusterState
from scorer.types import JobSpec

__all__ = ["NAME", "BinPackScore", "leftover"]

NAME = "bin_pack"
CPU_WEIGHT = GPU_WEIGHT = 0.5  # the artifact's weights (cpu, gpu)


class BinPackScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        job = ctx.job
        gpu = np.asarray(ctx.gpus_taken(slots)) * job.gpu_milli
        return 100.0 * (1.0 - leftover(ctx.state, slots, job.cpu_milli, gpu))

    def rank_host_only(self, state: ClusterState, job: JobSpec, slots: np.ndarray) -> np.ndarray:
        return leftover(state, slots, job.cpu_milli, np.zeros(slots.shape[0]))


def leftover(
    s: ClusterState, slots: np.ndarray, cpu: int, gpu_milli: np.ndarray | int
) -> np.ndarray:
    """What the task leaves free on each node, as the artifact weighs it (0: nothing, 1: as
    much as the largest node has).

    e.g. largest node 96 cores / 8 GPUs; a node with 24 cores and 2 GPUs free, a task of 12
    cores and 1 GPU: 0.5 x 12/96 + 0.5 x 1000/8000 = 0.125.
    """
    live = s.gpu_count > 0
    max_gpu = float(s.gpu_count[live].max()) * 1000 if live.any() else 1.0
    max_cpu = float(s.cpu_milli.max()) if s.cpu_milli.size else 0.0
    gpu_left = (s.free_milli_total[slots] - gpu_milli) / max(max_gpu, 1.0)
    if max_cpu <= 0:
        return GPU_WEIGHT * gpu_left
    declared = s.cpu_milli[slots] > 0
    cpu_left = np.where(declared, s.free_cpu[slots], max_cpu) - cpu
    return CPU_WEIGHT * cpu_left / max_cpu + GPU_WEIGHT * gpu_left
