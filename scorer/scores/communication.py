"""Score: communication fit — how little of a step the job's traffic costs on this placement.

Per node (the whole gang on one node): 100 x the compute share of a step when its tensor-
parallel all-reduces run over this node's interconnect (NVLink ~100, PCIe less).

A spread plan is valued as a whole (`score_plan`, used by the placer instead of the per-node
value): 100 x efficiency x GPU spend / (GPU spend + link spend). Efficiency is the compute
share of a step with the bandwidth the plan's cross-region hops can expect (link capacity, cross
traffic and the flows already placed, `NetworkView.route`) and their RTT; link spend is the
cross-region volume per hour priced per GB. Inside one region the fabric decides.
Jobs whose traffic is not modelled (not training, unknown size): 100 everywhere.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext
from scorer.gang import GangPlan
from scorer.network.fit import has_tp_traffic, plan_fit_of, tp_fit

__all__ = ["NAME", "CommunicationScore", "node_efficiency"]

NAME = "communication"


class CommunicationScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float:
        efficiency = node_efficiency(ctx)
        if efficiency is None:
            return 100.0
        return 100.0 * efficiency[ctx.state.model[slots]]

    def score_plan(self, ctx: CycleContext, plan: GangPlan) -> float:
        fit = plan_fit_of(ctx, plan)
        if fit is None:
            return 100.0
        price = ctx.state.price
        gpu_spend = sum(float(price[s]) * g for s, g in zip(plan.slots, plan.gpus, strict=True))
        total = gpu_spend + fit.link_cost_per_hour
        share = gpu_spend / total if total > 0 else 1.0
        return comm_score(fit.efficiency, share)


def node_efficiency(ctx: CycleContext) -> np.ndarray | None:
    """Tensor-parallel efficiency per GPU model of the state (None: nothing to judge)."""
    if not has_tp_traffic(ctx.job):  # no model would judge it: skip asking each one
        return None
    key = ("tp_efficiency", 0)
    if key not in ctx.memo:
        catalog = ctx.state.catalog
        assumptions = ctx.network.settings.assumptions if ctx.network is not None else None
        fits = [tp_fit(ctx.job, m, catalog, assumptions) for m in ctx.state.models]
        if all(f is None for f in fits):
            ctx.memo[key] = np.zeros(0)
        else:
            ctx.memo[key] = np.array([1.0 if f is None else f[0] for f in fits])
    found = ctx.memo[key]
    return found if found.size else None


def comm_score(efficiency: float, spend_share: float) -> float:
    """100 x efficiency x the GPUs' share of the spend."""
    return float(100.0 * max(0.0, min(1.0, efficiency)) * max(0.0, min(1.0, spend_share)))
