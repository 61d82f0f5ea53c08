"""Score: compute fit — the job's throughput on this node over the best GPU model it could use.

Speed = measured (or roofline) speed of the job on the model x the node's measured perf factor.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, clamp_score

__all__ = ["NAME", "ComputeScore", "compute_score"]

NAME = "compute"


class ComputeScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        return compute_score(ctx.speed_of(slots), ctx.models.best_speed)


def compute_score(speed: np.ndarray, best_speed: float) -> np.ndarray:
    """100 x speed / best; e.g. P100 0.6 vs best V100 1.0 -> 60."""
    if best_speed <= 0:
        return np.zeros_like(speed, dtype=float)
    return clamp_score(100.0 * speed / best_speed)
