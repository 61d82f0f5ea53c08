"""Score: carbon — grid intensity x board power x time, relative to the cleanest candidate."""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["NAME", "CarbonScore", "carbon_score"]

NAME = "carbon"
_EPS = 1e-12


class CarbonScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        s = ctx.state
        intensity = s.carbon[s.region[slots]]
        watts = ctx.models.power_w[s.model[slots]] * ctx.gpus_taken(slots)
        return carbon_score(intensity, watts, ctx.speed_of(slots))


def carbon_score(g_per_kwh: np.ndarray, watts: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """100 x cleanest / grams, grams ∝ g/kWh x W / speed.

    e.g. 50 g/kWh x 700 W / 4.3 = 8.1 vs 400 g/kWh x 300 W / 1.0 = 120 -> 100 and 6.8.
    """
    grams = g_per_kwh * watts / np.maximum(speed, 1e-9)
    cleanest = float(grams.min()) if grams.size else 0.0
    # cleanest <= grams keeps it within 0..100; the epsilon makes zero-carbon nodes score 100
    return 100.0 * (cleanest + _EPS) / (grams + _EPS)
