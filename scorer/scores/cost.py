"""Score: cost — price x expected time, relative to the cheapest candidate.

Time is inversely proportional to speed, so cost ∝ price x GPUs / speed. A node whose expected
cost exceeds the job's budget scores 0.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["NAME", "CostScore", "cost_score"]

NAME = "cost"
_EPS = 1e-12


class CostScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
        job = ctx.job
        gpus = ctx.gpus_taken(slots) * (job.gpu_milli / 1000.0)
        speed = ctx.speed_of(slots)
        hours = None
        if job.budget_usd is not None and job.expected_duration_s is not None:
            hours = job.expected_duration_s / 3600.0
        return cost_score(ctx.state.price[slots] * gpus, speed, hours, job.budget_usd)


def cost_score(
    price_per_hour: np.ndarray,
    speed: np.ndarray,
    reference_hours: float | None = None,
    budget_usd: float | None = None,
) -> np.ndarray:
    """100 x cheapest cost / cost; cost = price / speed (x reference hours for the budget).

    e.g. $2.48/h at speed 1.0 vs $1.46/h at 0.6: costs 2.48 and 2.43 -> 98.0 and 100.
    """
    cost = price_per_hour / np.maximum(speed, 1e-9)
    cheapest = float(cost.min()) if cost.size else 0.0
    # cheapest <= cost keeps it within 0..100; the epsilon makes a free node (cost 0) score 100
    out = 100.0 * (cheapest + _EPS) / (cost + _EPS)
    if reference_hours is not None and budget_usd is not None:
        out = np.where(cost * reference_hours > budget_usd, 0.0, out)
    return out
