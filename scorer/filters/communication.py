"""Filter: the job's communication pattern tolerates the placement.

Per node (static): a tensor-parallel group's all-reduces run over the node's interconnect;
refused when they would leave less than `min_tp_efficiency` of a step to compute (a large
TP group over PCIe).

Per spread plan (`allows_plan`): a gang may cross regions only when its pattern tolerates the
WAN — refused when a region would hold part of a replica (a pipeline stage boundary crossing
regions is latency-sensitive: every micro-batch waits for the RTT), or when the step's
compute share over the hops' expected bandwidth and RTT is below `min_cross_region_efficiency`.
Data parallelism with gradient accumulation passes (one all-reduce per many micro-batches);
without it, a large model's all-reduce per micro-batch over a narrow link does not.
Thresholds default to the NetworkView's settings. Jobs whose traffic is not modelled pass.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Insufficient, Status
from scorer.gang import GangPlan
from scorer.network.fit import plan_fit_of, tp_fit
from scorer.network.view import Settings
from scorer.scores.communication import node_efficiency

__all__ = ["NAME", "CommunicationFilter"]

NAME = "communication"


class CommunicationFilter:
    name = NAME
    static = True

    def __init__(
        self,
        min_tp_efficiency: float | None = None,
        min_cross_region_efficiency: float | None = None,
    ) -> None:
        for value in (min_tp_efficiency, min_cross_region_efficiency):
            if value is not None and not 0.0 <= value <= 1.0:
                raise ValueError(f"communication filter: efficiencies are 0..1, got {value}")
        self.min_tp = min_tp_efficiency
        self.min_cross = min_cross_region_efficiency

    def filter(self, ctx: CycleContext) -> np.ndarray:
        efficiency = node_efficiency(ctx)
        if efficiency is None:
            return np.ones(ctx.slots.shape[0], bool)
        return efficiency[ctx.state.model[ctx.slots]] >= self._settings(ctx)[0]

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        model = ctx.state.models[int(ctx.state.model[slot])]
        assumptions = ctx.network.settings.assumptions if ctx.network is not None else None
        fit = tp_fit(ctx.job, model, ctx.state.catalog, assumptions)
        floor = self._settings(ctx)[0]
        if fit is None or fit[0] >= floor:
            return Status.success()
        spec = ctx.state.catalog.get(model)
        offered = spec.interconnect_gbs if spec is not None else 0.0
        needed = fit[1] * floor / (1.0 - floor) if floor < 1 else float("inf")
        return Status.unresolvable(
            Insufficient("interconnect GB/s", round(needed, 1), offered),
            f"tensor parallel x{ctx.job.tensor_parallel} would spend "
            f"{100 * (1 - fit[0]):.0f}% of a step communicating on {model}",
        )

    def allows_plan(self, ctx: CycleContext, plan: GangPlan) -> Status:
        fit = plan_fit_of(ctx, plan)
        if fit is None or not fit.cross_region:
            return Status.success()
        if fit.partial_replica:
            return Status.unschedulable(
                "pipeline: a stage boundary would cross regions (latency-sensitive)"
            )
        floor = self._settings(ctx)[1]
        if fit.efficiency >= floor:
            return Status.success()
        return Status.unschedulable(
            Insufficient("cross-region efficiency", floor, round(fit.efficiency, 3)),
            f"all-reduce over {fit.wan_gbps:.1f} Gbit/s at {fit.wan_rtt_ms:.0f} ms RTT would "
            f"take {fit.step.data_parallel:.1f} s of a {fit.step.total:.1f} s step",
        )

    def _settings(self, ctx: CycleContext) -> tuple[float, float]:
        s = ctx.network.settings if ctx.network is not None else Settings()
        return (
            s.min_tp_efficiency if self.min_tp is None else self.min_tp,
            s.min_cross_region_efficiency if self.min_cross is None else self.min_cross,
        )
