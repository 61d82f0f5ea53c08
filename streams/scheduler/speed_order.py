"""Which waiting job of a tenant is tried first when capacity frees (the order within a
tenant; `streams.scheduler.fairness` orders the tenants).

Priority bands first (higher first: the priority class, `scheduler.fairness.entry_priority`);
within a band the scheduler's queue order: `fifo` (oldest first, the baselines) or
`speed_aware` (`scorer.replan.queue`: the job that gains most from the free GPUs, with aging).
The chosen order's explanation rides on the placement decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby
from typing import Any

from scorer import ClusterState, ThroughputModel
from scorer.replan import Ranked, Waiting, fifo_order, speed_aware_order
from streams.scheduler.convert import job_spec
from streams.scheduler.fairness import entry_priority

__all__ = ["ORDERS", "done_s", "order_waiting"]

ORDERS = ("fifo", "speed_aware")


def _waiting(
    routed: Mapping[str, Any], models: Sequence[str], throughput: ThroughputModel
) -> Waiting:
    job = routed["job"]
    spec = job_spec(job)
    whole = spec.gpu_count if spec.gpu_milli >= 1000 else 0
    speeds = {m: throughput.relative_speed(spec, m) for m in models if m}
    if spec.allowed_gpu_models:
        allowed = {throughput.catalog.canonical(m) for m in spec.allowed_gpu_models}
        speeds = {m: s for m, s in speeds.items() if m in allowed}
    duration = job.get("expected_duration_s")
    done = done_s(routed)  # work kept from an earlier run, if any
    return Waiting(
        job_id=job["job_id"],
        queued_ms=int(routed["queued_ts"]),
        gpus=whole,
        remaining_s=None if duration is None else max(0.0, float(duration) - done),
        speeds=speeds,
        best_speed=max(speeds.values(), default=0.0),
    )


def _known(
    routed: Mapping[str, Any],
    models: Sequence[str],
    throughput: ThroughputModel,
    known: dict[tuple[Any, ...], Waiting] | None,
) -> Waiting:
    if known is None:
        return _waiting(routed, models, throughput)
    key = (routed["job"]["job_id"], routed["queued_ts"], done_s(routed), len(models))
    found = known.get(key)
    if found is None:
        found = known[key] = _waiting(routed, models, throughput)
    return found


def done_s(routed: Mapping[str, Any]) -> float:
    """Reference-seconds of work a waiting job kept from earlier placements (an evicted job
    carries its `progress` fraction)."""
    if routed.get("done_s"):
        return float(routed["done_s"])
    duration = routed["job"].get("expected_duration_s")
    return float(routed.get("progress") or 0.0) * float(duration or 0.0)


def order_waiting(
    waiting: Sequence[Mapping[str, Any]],
    *,
    order: str,
    state: ClusterState,
    region: str,
    throughput: ThroughputModel,
    now_ms: int,
    aging: float,
    known: dict[tuple[Any, ...], Waiting] | None = None,
) -> list[tuple[Mapping[str, Any], Ranked]]:
    """`waiting` (RoutedJob records of one region) in the order to try them, with the reason.

    `known` keeps each job's `Waiting` (its speeds on every model) between passes: it depends
    only on the queue entry and the fleet's models, and building it costs a JobSpec and a
    throughput estimate per model. The caller drops entries of jobs no longer waiting."""

    def band(r: Mapping[str, Any]) -> int:
        return -entry_priority(r)

    by_id = {r["job"]["job_id"]: r for r in waiting}
    free = state.free_gpus(region)
    models = state.models
    out: list[tuple[Mapping[str, Any], Ranked]] = []
    for _, group in groupby(sorted(waiting, key=band), key=band):
        items = [_known(r, models, throughput, known) for r in group]
        if order == "speed_aware":
            ranked = speed_aware_order(items, free, now_ms, aging=aging)
        else:
            ranked = fifo_order(items)
        out.extend((by_id[r.job_id], r) for r in ranked)
    return out
