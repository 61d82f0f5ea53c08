"""The regional placer: filter -> score -> choose nodes and GPU indices. It does not reserve:
the caller reserves the proposal (policy separate from mechanism), then tells the placer
(`observe`) so that plugins that learn from placements count it; placing never learns.
How the score plugins weigh into one score is `scorer.weighing`; a refusal's explanation and a
placement's result are made by `scorer.outcome`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np

from scorer.filter_cache import StaticMasks
from scorer.framework import (
    CycleContext,
    FilterPlugin,
    ModelVectors,
    ObservePlugin,
    PlanFilterPlugin,
    PlanScorePlugin,
    ScorePlugin,
)
from scorer.gang import GangPlan, pick_gpus, pick_share, plan_spread
from scorer.hostonly import place_host_only
from scorer.network.placement import region_plans
from scorer.network.view import NetworkView
from scorer.outcome import Pick, model_vectors, placed_result, refused_result, vectors_key
from scorer.registry import DEFAULT_FILTERS, DEFAULT_SCORES, build_filter, build_score
from scorer.scores.topology import NAME as TOPOLOGY
from scorer.scores.topology import domain_score
from scorer.state import ClusterState
from scorer.throughput import ThroughputModel
from scorer.types import JobSpec, PlacementResult
from scorer.weighing import Weighing

__all__ = ["Placer"]

GroupOf = Callable[[np.ndarray], np.ndarray]  # candidate slots -> group id each


class Placer:
    """Proposes where a job runs inside one region (or the whole state when region is None)."""

    def __init__(
        self,
        state: ClusterState,
        *,
        filters: Sequence[str | FilterPlugin] | None = None,
        scores: Sequence[str | ScorePlugin] | None = None,
        weights: Mapping[str, float] | None = None,
        throughput: ThroughputModel | None = None,
        network: NetworkView | None = None,
        packing_first: Sequence[str] = (),
        packing_slack: float = 0.0,
    ) -> None:
        """`packing_first`: score plugins that rank first: only nodes within `packing_slack`
        points (0..100) of the best of their weighted mean are chosen from by the full score
        (packing before speed and price; none: the full score alone; `Weighing`)."""
        self.state = state
        throughput = throughput or ThroughputModel(state.catalog)
        if throughput.catalog is not state.catalog:  # one catalogue per cycle: the state's
            throughput = throughput.with_catalog(state.catalog)
        self.throughput = throughput
        names = DEFAULT_FILTERS if filters is None else filters
        self.filters = [build_filter(f) if isinstance(f, str) else f for f in names]
        score_names = DEFAULT_SCORES if scores is None else scores
        self.scores = [build_score(s) if isinstance(s, str) else s for s in score_names]
        self.weighing = Weighing(self.scores, weights, packing_first, packing_slack)
        # links and placed flows; plugins that judge whole spread plans (communication fit)
        self.network = network
        self.plan_filters = [f for f in self.filters if isinstance(f, PlanFilterPlugin)]
        self.plan_scores = [p for p in self.scores if isinstance(p, PlanScorePlugin)]
        self.observers = [p for p in (*self.filters, *self.scores) if isinstance(p, ObservePlugin)]
        self._vectors_cache: dict[tuple[object, ...], ModelVectors] = {}
        self._static = StaticMasks(state, self.filters)  # once per job key

    def observe(self, job: JobSpec) -> None:
        """A placement of `job` was committed (reserved): the plugins that learn from the jobs
        placed (job mix, pinned demand) count it, each job once."""
        for plugin in self.observers:
            plugin.observe(job)

    # ---- the cycle -----------------------------------------------------------------------
    def place(
        self, job: JobSpec, region: str | None = None, *, explain: bool = True
    ) -> PlacementResult:
        """The best placement of `job` in `region` (None: anywhere), or why there is none.

        `explain=False` skips the reasons of a refusal (per-filter examples, never-fits): a
        silent retry of a queued job needs only "placed or not", and explaining costs more
        than deciding.
        """
        if job.cpu_only:  # a plugin may rank the nodes for it (FGD: least fragmentation)
            return place_host_only(self.state, job, region, rank=self.weighing.host_rank())
        ctx, masks, refusals, candidates = self._filter(job, region)
        weights = self._weights(job, region)
        notes: list[str] = []  # why spread plans were refused
        if candidates.size:
            # a gang that may spread is placed both ways; spreading pays a topology penalty,
            # so it wins only when it reaches much better GPUs than any single node offers
            options = [
                self._place_single(ctx, candidates, weights, refusals).get(0),
                self._place_spread(ctx, candidates, weights, refusals, notes).get(0),
            ]
            placed = [r for r in options if r is not None]
            if placed:
                return max(placed, key=lambda r: r.score)
        if not explain:
            return PlacementResult(placed=False, refusals=refusals)
        return refused_result(ctx, masks, refusals, candidates, region, notes)

    def options(self, job: JobSpec, region: str | None = None) -> list[PlacementResult]:
        """The best placement now on each (region, GPU model), best first. All are scored in
        one cycle over the nodes considered, so their scores compare (`gpuflow submit
        --dry-run` shows them as alternatives). Reserves nothing."""
        if job.cpu_only:  # its one host-only placement: there is no GPU model to compare
            result = self.place(job, region)
            return [result] if result.placed else []
        ctx, _, refusals, candidates = self._filter(job, region)
        if not candidates.size:
            return []
        weights, s = self._weights(job, region), self.state
        width = max(1, len(s.models))

        def group_of(slots: np.ndarray) -> np.ndarray:
            return s.region[slots].astype(np.int64) * width + s.model[slots]

        best = self._place_single(ctx, candidates, weights, refusals, group_of)
        for group, result in self._place_spread(
            ctx, candidates, weights, refusals, [], group_of
        ).items():
            if group not in best or result.score > best[group].score:
                best[group] = result
        return sorted(best.values(), key=lambda r: (-r.score, r.region or "", r.gpu_model or ""))

    def usable(self, job: JobSpec, region: str | None = None) -> np.ndarray:
        """Slots that pass every static filter: where GPUs freed (by eviction or a job's end)
        could place the job. Occupancy and health are not judged here."""
        ctx, static = self._context(job, region)
        ok = np.ones(ctx.slots.shape[0], bool)
        for f, mask in zip(self.filters, static, strict=True):
            if f.static:
                ok &= f.filter(ctx) if mask is None else mask
        return ctx.slots[ok]

    def _filter(
        self, job: JobSpec, region: str | None
    ) -> tuple[CycleContext, list[tuple[FilterPlugin, np.ndarray]], dict[str, int], np.ndarray]:
        ctx, static = self._context(job, region)
        masks = [
            (f, f.filter(ctx) if mask is None else mask)
            for f, mask in zip(self.filters, static, strict=True)
        ]
        return ctx, masks, *_combine(masks, ctx.slots)

    def _context(
        self, job: JobSpec, region: str | None
    ) -> tuple[CycleContext, list[np.ndarray | None]]:
        """The cycle's context over `region`'s live nodes, and the static filters' masks
        known for the job's key (None where a filter runs now)."""
        key = vectors_key(job, len(self.state.models))
        ctx = CycleContext(
            job,
            self.state,
            self.throughput,
            self.state.slots(region),
            self._vectors_for(job, key),
            network=self.network,
        )
        return ctx, self._static.masks(ctx, region, key)

    def _place_single(
        self,
        ctx: CycleContext,
        candidates: np.ndarray,
        weights: Mapping[str, float],
        refusals: dict[str, int],
        group_of: GroupOf | None = None,
    ) -> dict[int, PlacementResult]:
        """The best one-node placement ({0: result}), or the best per group of nodes."""
        job = ctx.job
        if not ctx.fractional:
            candidates = candidates[self.state.free_whole[candidates] >= job.gpu_count]
        if not candidates.size:
            return {}
        total, parts = self.weighing.score(ctx, candidates, weights)
        total = self.weighing.packing_guard(total, parts, weights)
        if group_of is None:
            bests = {0: int(np.argmax(total))}
        else:
            groups = group_of(candidates)
            bests = {}
            for g in np.unique(groups):
                idx = np.flatnonzero(groups == g)
                bests[int(g)] = int(idx[np.argmax(total[idx])])
        return {
            g: self._single_at(ctx, candidates, total, parts, i, refusals) for g, i in bests.items()
        }

    def _single_at(
        self,
        ctx: CycleContext,
        candidates: np.ndarray,
        total: np.ndarray,
        parts: dict[str, np.ndarray],
        i: int,
        refusals: dict[str, int],
    ) -> PlacementResult:
        job, slot = ctx.job, int(candidates[i])
        # which GPUs of the node: a plugin's own rule (a baseline's published one), else ours
        share, whole = self.weighing.hook("choose_share"), self.weighing.hook("choose_gpus")
        if ctx.fractional:
            gpu = share(ctx, slot) if share else pick_share(self.state, slot, job.gpu_milli)
            pick: Pick = (slot, (gpu,), job.gpu_milli)
        else:
            k = job.gpu_count
            gpus = whole(ctx, slot, k) if whole else pick_gpus(self.state, slot, k)
            pick = (slot, gpus, 1000)
        breakdown = {n: float(p if p.ndim == 0 else p[i]) for n, p in parts.items()}
        return placed_result(ctx, [pick], float(total[i]), breakdown, refusals)

    def _place_spread(
        self,
        ctx: CycleContext,
        candidates: np.ndarray,
        weights: Mapping[str, float],
        refusals: dict[str, int],
        notes: list[str],
        group_of: GroupOf | None = None,
    ) -> dict[int, PlacementResult]:
        """The best spread gang ({0: result}), or the best per group (groups within a model);
        `notes` collects why plan filters refused plans."""
        job = ctx.job
        if ctx.fractional or ctx.chunk >= job.gpu_count:
            return {}
        ctx = replace(ctx, spread=True, memo={})
        planned = {p.name: weights.get(p.name, 0.0) for p in self.plan_scores}  # whole-plan
        node_weights = {k: v for k, v in weights.items() if k != TOPOLOGY and k not in planned}
        w_nodes, w_topo = sum(node_weights.values()), weights.get(TOPOLOGY, 0.0)
        w_sum = max(w_nodes + w_topo + sum(planned.values()), 1e-9)
        total, parts = self.weighing.score(ctx, candidates, node_weights)
        levels = ("rack", "zone", "region") + (("global",) if job.cross_region_ok else ())
        tp = max(1, job.tensor_parallel)
        plans: dict[int, tuple[GangPlan, float, dict[str, float]]] = {}
        groups = self.state.model[candidates] if group_of is None else group_of(candidates)
        for g in np.unique(groups):
            member, key = groups == g, 0 if group_of is None else int(g)
            for plan in self._plans(ctx, candidates[member], total[member], tp, levels):
                if not self._plan_allowed(ctx, plan, refusals, notes):
                    continue
                by_plan = {p.name: planned[p.name] * p.score_plan(ctx, plan) / w_sum
                           for p in self.plan_scores if planned[p.name] > 0}  # fmt: skip
                domain = w_topo * domain_score(plan.level)
                score = (plan.mean_score * w_nodes + domain) / w_sum + sum(by_plan.values())
                if key not in plans or score > plans[key][1]:
                    plans[key] = (plan, score, by_plan)
        return {
            key: self._spread_result(
                ctx, candidates, parts, plan, (score, by_plan), (w_nodes, w_topo, w_sum), refusals
            )
            for key, (plan, score, by_plan) in plans.items()
        }

    def _spread_result(
        self,
        ctx: CycleContext,
        candidates: np.ndarray,
        parts: dict[str, np.ndarray],
        plan: GangPlan,
        scored: tuple[float, dict[str, float]],
        node_topo_sum: tuple[float, float, float],
        refusals: dict[str, int],
    ) -> PlacementResult:
        """A spread plan as a result: node scores averaged over its nodes, plus the domain
        and the whole-plan scores (`scored`: the plan's score and its plan-plugin parts)."""
        (score, by_plan), (w_nodes, w_topo, w_sum) = scored, node_topo_sum
        picks = [
            (s, pick_gpus(self.state, s, k), 1000)
            for s, k in zip(plan.slots, plan.gpus, strict=True)
        ]
        pos = np.searchsorted(candidates, np.asarray(plan.slots))
        breakdown = {n: float(_at(p, pos).mean()) * w_nodes / w_sum for n, p in parts.items()}
        breakdown.update(by_plan)
        if w_topo:
            breakdown[TOPOLOGY] = w_topo * domain_score(plan.level) / w_sum
        return placed_result(ctx, picks, score, breakdown, refusals)

    def _plans(
        self,
        ctx: CycleContext,
        slots: np.ndarray,
        scores: np.ndarray,
        tp: int,
        levels: tuple[str, ...],
    ) -> list[GangPlan]:
        """The tightest-domain plan; when that crosses regions and a plan plugin can judge
        links, also each pair (or triple) of regions as a candidate."""
        plan = plan_spread(self.state, slots, scores, ctx.job.gpu_count, tp, levels)
        if plan is None or plan.level != "global" or not self.plan_scores:
            return [] if plan is None else [plan]
        job = ctx.job
        return [
            plan,
            *region_plans(self.state, slots, scores, job.gpu_count, tp, job.model_parallel),
        ]

    def _plan_allowed(
        self, ctx: CycleContext, plan: GangPlan, refusals: dict[str, int], notes: list[str]
    ) -> bool:
        for f in self.plan_filters:
            status = f.allows_plan(ctx, plan)
            if not status.ok:
                refusals[f.name] = refusals.get(f.name, 0) + 1
                if len(notes) < 4:
                    notes.append(f"{f.name}: spread plan refused ({plan.level}): {status}")
                return False
        return True

    # ---- helpers -------------------------------------------------------------------------
    def _weights(self, job: JobSpec, region: str | None) -> dict[str, float]:
        """The job's weights under the load of `region` (None: the fleet), where it may be
        placed; the state keeps each region's free share as rows change."""
        return self.weighing.weights(job, self.state.free_share(region))

    def _free_share(self, scope: np.ndarray) -> float:
        """Free share of the GPUs on `scope` (1.0 where there are none: nothing to strand);
        summed over the slots (`ClusterState.free_share` keeps it per region)."""
        s = self.state
        capacity = int(s.gpu_count[scope].sum()) * 1000
        return float(s.free_milli_total[scope].sum()) / capacity if capacity else 1.0

    def _vectors(self, job: JobSpec) -> ModelVectors:
        return self._vectors_for(job, vectors_key(job, len(self.state.models)))

    def _vectors_for(self, job: JobSpec, key: tuple[object, ...]) -> ModelVectors:
        cached = self._vectors_cache.get(key)
        if cached is None:
            if len(self._vectors_cache) > 4096:
                self._vectors_cache.clear()
            cached = self._vectors_cache[key] = model_vectors(
                job, self.state.models, self.throughput
            )
        return cached


def _combine(
    masks: Sequence[tuple[FilterPlugin, np.ndarray]], slots: np.ndarray
) -> tuple[dict[str, int], np.ndarray]:
    """Nodes each filter refuses ({name: count}, refusing filters only, in filter order) and
    the slots every filter passes: one stacked pass, not two numpy calls per filter."""
    n = slots.shape[0]
    if not masks:
        return {}, slots.copy()
    rows = [m if getattr(m, "shape", None) == (n,) else np.broadcast_to(m, (n,)) for _, m in masks]
    stack = np.array(rows, bool)
    passed = np.logical_and.reduce(stack, axis=1).tolist()  # most filters refuse nobody
    refusals = {
        f.name: n - int(np.count_nonzero(row))
        for (f, _), row, ok in zip(masks, stack, passed, strict=True)
        if not ok
    }
    return refusals, slots[np.logical_and.reduce(stack, axis=0)]


def _at(part: np.ndarray, idx: int | np.ndarray) -> np.ndarray:
    """A plugin's weighted score at `idx`; a 0-d part (every node tied) is the same everywhere."""
    return part if part.ndim == 0 else np.asarray(part[idx])
