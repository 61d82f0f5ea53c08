"""Score: memory fit — fill the GPU memory, keep large-memory GPUs for big models."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, clamp_score

__all__ = ["NAME", "UNKNOWN_NEED_SCORE", "MemoryFitScore", "memory_fit_score"]

NAME = "memory_fit"
UNKNOWN_NEED_SCORE = 50.0


class MemoryFitScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float:
        if ctx.models.memory_need_mib <= 0:
            return UNKNOWN_NEED_SCORE
        have = ctx.state.gpu_memory_mib[slots] * ctx.job.gpu_milli // 1000  # a share's part
        return memory_fit_score(ctx.models.memory_need_mib, have)


def memory_fit_score(need_mib: int, gpu_memory_mib: np.ndarray) -> np.ndarray:
    """100 x need / memory (best fit); an unknown need (0) scores 50 everywhere.

    e.g. 20,028 MiB on a 40,960 MiB A100-40 -> 48.9; on an 81,920 MiB H100 -> 24.4.
    """
    if need_mib <= 0:
        return np.full(gpu_memory_mib.shape[0], UNKNOWN_NEED_SCORE)
    mem = np.maximum(gpu_memory_mib, 1)
    return clamp_score(100.0 * need_mib / mem)
