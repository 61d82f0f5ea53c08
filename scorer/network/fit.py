"""How well a job's communication fits a placement: layout, step time, cost, flows.

`plan_fit` judges one set of (node, GPUs) for a job: its layout over regions and nodes, its
step time with the network it would get (`NetworkView.route` per cross-region hop), its
efficiency (compute share of the step) and what its traffic costs per hour. `job_flows` turns
the same into the `Flow`s the bandwidth allocator shares links among.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from scorer.catalog import Catalog
from scorer.network.allocator import Flow
from scorer.network.demand import CommAssumptions, CommDemand, Layout, StepTime, comm_demand
from scorer.network.view import NetworkView, Route, Settings
from scorer.state import ClusterState
from scorer.types import Assignment, JobSpec

if TYPE_CHECKING:
    from scorer.framework import CycleContext
    from scorer.gang import GangPlan

__all__ = [
    "PlanFit",
    "demand_on",
    "has_tp_traffic",
    "job_flows",
    "layout_of",
    "plan_fit",
    "plan_fit_of",
    "ring_hops",
    "tp_fit",
]


@dataclass(frozen=True)
class PlanFit:
    """A placement's communication, judged."""

    step: StepTime
    layout: Layout
    wan_gbps: float  # slowest cross-region hop's expected bandwidth (inf: one region)
    wan_rtt_ms: float
    link_cost_per_hour: float  # USD for the cross-region traffic
    partial_replica: bool  # a region holds part of a replica: a pipeline boundary crosses

    @property
    def efficiency(self) -> float:
        return self.step.efficiency

    @property
    def cross_region(self) -> bool:
        return self.layout.sites > 1


def demand_on(
    job: JobSpec, model: str, catalog: Catalog, assumptions: CommAssumptions | None = None
) -> CommDemand | None:
    spec = catalog.get(model)
    return None if spec is None else comm_demand(job, spec.peak_tflops(job.precision), assumptions)


def layout_of(state: ClusterState, picks: Sequence[tuple[int, int]]) -> Layout:
    """Layout of (slot, GPUs) picks: regions largest first (ties by name)."""
    per: dict[str, list[int]] = {}
    width = 1
    for slot, gpus in picks:
        region = state.region_name(int(state.region[slot]))
        entry = per.setdefault(region, [0, 0])
        entry[0] += int(gpus)
        entry[1] += 1
        width = max(width, int(state.gpu_count[slot]))
    regions = sorted(((r, g, n) for r, (g, n) in per.items()), key=lambda t: (-t[1], t[0]))
    return Layout(tuple(regions), gpus_per_node=width)


def ring_hops(layout: Layout) -> list[tuple[str, str]]:
    """The all-reduce ring over regions: each region to the next (two regions: both ways)."""
    names = [r for r, _, _ in layout.regions]
    if len(names) < 2:
        return []
    return [(names[k], names[(k + 1) % len(names)]) for k in range(len(names))]


def _partial(layout: Layout, demand: CommDemand) -> bool:
    return layout.sites > 1 and any(g % demand.replica_gpus for _, g, _ in layout.regions)


def _routes(view: NetworkView, layout: Layout, weight: float) -> list[tuple[str, str, Route]]:
    return [(a, b, view.route(a, b, weight)) for a, b in ring_hops(layout)]


def plan_fit_of(ctx: CycleContext, plan: GangPlan) -> PlanFit | None:
    """`plan_fit` of a spread plan, computed once per cycle for the filter and score that
    both judge it."""
    hit = ctx.plans.get(id(plan))
    if hit is not None and hit[0] is plan:
        return cast("PlanFit | None", hit[1])
    picks = list(zip(plan.slots, plan.gpus, strict=True))
    fit = plan_fit(ctx.job, ctx.state, picks, ctx.network)
    ctx.plans[id(plan)] = (plan, fit)
    return fit


def plan_fit(
    job: JobSpec,
    state: ClusterState,
    picks: Sequence[tuple[int, int]],
    view: NetworkView | None,
) -> PlanFit | None:
    """The communication fit of `picks` for `job`; None when its traffic is not modelled."""
    view = view if view is not None else NetworkView()
    settings = view.settings
    model = state.models[int(state.model[picks[0][0]])]
    demand = demand_on(job, model, state.catalog, settings.assumptions)
    if demand is None:
        return None
    layout = layout_of(state, picks)
    spec = state.catalog.get(model)
    intra = spec.interconnect_gbs if spec is not None else math.inf
    routes = _routes(view, layout, demand.weight())
    wan = min((r.gbps for _, _, r in routes), default=math.inf)
    rtt = max((r.rtt_ms for _, _, r in routes), default=0.0)
    step = demand.step_time(
        layout, wan_gbps=wan, wan_rtt_ms=rtt, intra_node_gbs=intra, assumptions=settings.assumptions
    )
    gb_per_hop = demand.ring_bytes(layout.sites) / 1e9
    steps_per_hour = 3600.0 / step.total if step.total > 0 else 0.0
    cost = sum(gb_per_hop * r.cost_per_gb for _, _, r in routes) * steps_per_hour
    return PlanFit(step, layout, wan, rtt, cost, _partial(layout, demand))


def job_flows(
    job: JobSpec,
    state: ClusterState,
    assignments: Sequence[Assignment],
    settings: Settings | None = None,
) -> list[Flow]:
    """The cross-region flows of a placed job (empty when it stays in one region or its traffic
    is not modelled). A region holding part of a replica makes the flow latency-sensitive: its
    pipeline activations get a guaranteed minimum."""
    settings = settings or Settings()
    picks = [(state.slot_of(a.node_id), len(a.gpu_indices)) for a in assignments]
    if not picks:
        return []
    layout = layout_of(state, picks)
    if layout.sites < 2:
        return []
    model = state.models[int(state.model[picks[0][0]])]
    demand = demand_on(job, model, state.catalog, settings.assumptions)
    if demand is None:
        return []
    a = settings.assumptions
    volume = demand.ring_bytes(layout.sites) * 8e-9
    need = demand.need_gbps(layout.sites)
    minimum = 0.0
    if _partial(layout, demand):  # activations cross every micro-batch, both ways
        per_step = 2 * demand.pp_boundary_bytes * 8e-9 * demand.grad_accum_steps
        minimum = per_step / demand.compute_s
    nodes = {r: n for r, _, n in layout.regions}
    return [
        Flow(
            job.job_id,
            src,
            dst,
            volume_gbit=volume,
            need_gbps=need,
            peak_gbps=nodes[src] * a.fabric_gbps,
            min_gbps=minimum,
            weight=demand.weight(),
            tenant=job.tenant,
        )
        for src, dst in ring_hops(layout)
    ]


_TP_CACHE: dict[tuple[object, ...], tuple[float, float] | None] = {}


def has_tp_traffic(job: JobSpec) -> bool:
    """Whether the job's tensor-parallel traffic is modelled at all (`tp_fit` not None on
    some model): a training job with TP > 1 and known parameters."""
    return job.tensor_parallel > 1 and job.kind == "TRAINING" and job.params_b > 0


def tp_fit(
    job: JobSpec, model: str, catalog: Catalog, assumptions: CommAssumptions | None = None
) -> tuple[float, float] | None:
    """(efficiency, GB/s needed for `min_eff`=0.5) of the job's tensor-parallel traffic over one
    node of `model`; None when it has none or is not modelled. Cached by the job's shape."""
    if not has_tp_traffic(job):
        return None
    key = (
        model, job.params_b, job.precision, job.tensor_parallel, job.pipeline_parallel,
        job.micro_batch, job.seq_len, job.grad_accum_steps, job.gpu_count, assumptions,
    )  # fmt: skip
    if key not in _TP_CACHE:
        if len(_TP_CACHE) > 4096:
            _TP_CACHE.clear()
        demand = demand_on(job, model, catalog, assumptions)
        spec = catalog.get(model)
        if demand is None or spec is None:
            _TP_CACHE[key] = None
        else:
            exposed = demand.tp_bytes_per_gpu / (spec.interconnect_gbs * 1e9)
            eff = demand.micro_batch_s / (demand.micro_batch_s + exposed)
            _TP_CACHE[key] = (eff, demand.tp_bytes_per_gpu / demand.micro_batch_s / 1e9)
    return _TP_CACHE[key]
