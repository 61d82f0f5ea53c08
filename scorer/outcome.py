"""Turning a cycle's choice (or its refusal) into a PlacementResult with explanations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from scorer.framework import CycleContext, FilterPlugin, ModelVectors
from scorer.memory import memory_need_mib
from scorer.throughput import ThroughputModel
from scorer.types import Assignment, JobSpec, PlacementResult

__all__ = [
    "USER_CHOICES",
    "Pick",
    "filter_reasons",
    "model_vectors",
    "never_fits",
    "placed_result",
    "refused_result",
    "vectors_key",
]

Pick = tuple[int, tuple[int, ...], int]  # slot, GPU indices, milli per GPU
USER_CHOICES = ("gpu_model", "region", "software_stack")  # the job's own constraints
BREAKDOWN_TOP = 4


def model_vectors(job: JobSpec, models: Sequence[str], throughput: ThroughputModel) -> ModelVectors:
    """Per-model speed, precision support, allow-list and power for one job."""
    catalog = throughput.catalog
    allowed_names = {catalog.canonical(m) for m in job.allowed_gpu_models}
    specs = [catalog.get(m) for m in models]
    n = len(models)
    vec = {k: np.zeros(n) for k in ("speed", "spread", "power", "link")}
    ok, allowed, known = np.zeros(n, bool), np.zeros(n, bool), np.zeros(n, bool)
    for i, (name, spec) in enumerate(zip(models, specs, strict=True)):
        allowed[i] = not allowed_names or catalog.canonical(name) in allowed_names
        if spec is None:
            continue
        known[i], ok[i] = True, spec.supports(job.precision)
        vec["speed"][i] = throughput.relative_speed(job, name, consolidated=True)
        vec["spread"][i] = throughput.relative_speed(job, name, consolidated=False)
        vec["power"][i], vec["link"][i] = spec.power_w, spec.interconnect_gbs
    return ModelVectors(
        speed=vec["speed"],
        speed_spread=vec["spread"],
        precision_ok=ok,
        allowed=allowed,
        known=known,
        power_w=vec["power"],
        link_gbs=vec["link"],
        memory_need_mib=memory_need_mib(job),
    )


def vectors_key(job: JobSpec, model_count: int) -> tuple[object, ...]:
    """What a job's model vectors (`model_vectors`) depend on."""
    return (
        job.job_type,
        job.kind,
        job.precision,
        job.gpu_count,
        job.tensor_parallel,
        job.pipeline_parallel,
        job.params_b,
        job.min_gpu_memory_mib,
        job.model_family,
        job.data_parallel,
        job.sharding,
        job.finetune,
        job.optimizer,
        job.optimizer_offload,
        job.micro_batch,
        job.seq_len,
        job.activation_checkpointing,
        job.allowed_gpu_models,
        job.reference_gpu_model,
        model_count,
    )


def placed_result(
    ctx: CycleContext,
    picks: Sequence[Pick],
    score: float,
    breakdown: Mapping[str, float],
    refusals: dict[str, int],
) -> PlacementResult:
    s, job = ctx.state, ctx.job
    first = picks[0][0]
    model = int(s.model[first])
    perf = min(float(s.perf[slot, g]) for slot, gpus, _ in picks for g in gpus)
    table = ctx.models.speed_spread if len(picks) > 1 else ctx.models.speed
    speed = float(table[model]) * perf  # a gang runs at the pace of its slowest GPU
    price = sum(float(s.price[slot]) * len(gpus) * milli / 1000 for slot, gpus, milli in picks)
    top = sorted(breakdown.items(), key=lambda kv: -kv[1])[:BREAKDOWN_TOP]
    return PlacementResult(
        placed=True,
        assignments=tuple(
            Assignment(s.spec(slot).node_id, g, m, job.cpu_milli, job.memory_mib)
            for slot, g, m in picks
        ),
        region=s.region_name(int(s.region[first])),
        gpu_model=s.models[model],
        score=round(min(100.0, max(0.0, score)), 3),
        breakdown={k: round(v, 2) for k, v in top},
        expected_throughput=round(speed, 4),
        expected_duration_s=ctx.throughput.expected_duration_s(job, s.models[model], speed),
        price_per_hour=round(price, 4),
        refusals=refusals,
    )


def refused_result(
    ctx: CycleContext,
    masks: Sequence[tuple[FilterPlugin, np.ndarray]],
    refusals: dict[str, int],
    candidates: np.ndarray,
    region: str | None,
    notes: Sequence[str] = (),
) -> PlacementResult:
    total = ctx.slots.shape[0]
    reasons = [f"no nodes in region {region}" if region else "no nodes"] if total == 0 else []
    reasons += filter_reasons(ctx, masks)
    refusals = dict(refusals)
    if candidates.size:
        usable = int(ctx.state.free_whole[candidates].sum())
        refusals["gang"] = int(candidates.size)
        reasons.append(
            f"gang: {ctx.job.gpu_count} GPUs of one model within one domain are not "
            f"free now ({usable} free GPUs on {candidates.size} eligible nodes)"
        )
    reasons.extend(notes)  # spread plans refused as a whole (e.g. communication fit)
    return PlacementResult(
        placed=False,
        refusals=refusals,
        reasons=tuple(reasons),
        never_fits=never_fits(ctx, masks),
    )


def filter_reasons(
    ctx: CycleContext, masks: Sequence[tuple[FilterPlugin, np.ndarray]]
) -> list[str]:
    """One short line per refusing filter, the decisive first.

    Filters that apply the job's own allow-lists (`USER_CHOICES`) come last: "H100 is not an
    allowed GPU model" explains little when the allowed H100s were refused for memory. The
    others are ordered by how many of the allowed nodes they refuse, and each explains one of
    those (its `example` when it has one: the memory filter picks the largest GPU).
    """
    total = ctx.slots.shape[0]
    user_masks = [(p.name, m) for p, m in masks if p.name in USER_CHOICES]
    admitted = np.ones(total, bool)
    for _, mask in user_masks:
        admitted &= mask
    ranked: list[tuple[tuple[int, int], str]] = []
    for plugin, mask in masks:
        refused = np.flatnonzero(~mask)
        if not refused.size:
            continue
        user = plugin.name in USER_CHOICES
        in_scope = refused if user else refused[admitted[refused]]
        # the example: a node the job's other constraints allow ("K80 runs cuda-11.4" rather
        # than a node of a GPU model the job excluded anyway)
        others = np.ones(total, bool)
        for name, other in user_masks:
            if name != plugin.name:
                others &= other
        preferred = refused[others[refused]]
        pool = ctx.slots[preferred if preferred.size else refused]
        pick = getattr(plugin, "example", None)
        example = int(pick(ctx, pool)) if pick else int(pool[0])
        line = f"{plugin.name}: {plugin.explain(ctx, example)} ({refused.size} of {total} nodes)"
        # refusing allowed nodes decides; then the job's own constraints; then the rest
        rank = 1 if user else (0 if in_scope.size else 2)
        ranked.append(((rank, -int(in_scope.size if not user else refused.size)), line))
    return [line for _, line in sorted(ranked, key=lambda r: r[0])]


def never_fits(ctx: CycleContext, masks: Sequence[tuple[FilterPlugin, np.ndarray]]) -> bool:
    """True when no considered node could host the job even if the cluster were empty."""
    s, job = ctx.state, ctx.job
    static = np.ones(ctx.slots.shape[0], bool)
    for plugin, mask in masks:
        if plugin.static:
            static &= mask
    slots = ctx.slots[static]
    size = s.gpu_count[slots]
    if ctx.fractional or (size >= job.gpu_count).any():
        return not bool((size >= (1 if ctx.fractional else job.gpu_count)).any())
    if ctx.chunk >= job.gpu_count:
        return True
    tp = max(1, job.tensor_parallel)
    groups = s.model[slots].astype(np.int64)
    if not job.cross_region_ok:
        groups = groups * (len(s.regions) + 1) + s.region[slots]
    usable = np.bincount(groups, weights=(size // tp) * tp) if slots.size else np.zeros(0)
    return not bool((usable >= job.gpu_count).any())
