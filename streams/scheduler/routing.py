"""Routing: the global choice of region for a submitted job (`Scheduler.route`), and the
refusals that come before any region is asked (an invalid spec, no allowed region known).

The router ranks regions by their summaries (`Scheduler.region_views`, a moment behind the
arrays); the region's placer has the last word and spills over to the next candidate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from infra.jobspec import job_problems
from scorer import JobSpec, RegionView, rank_regions
from streams.base.outbox import Outgoing, new_event_id
from streams.scheduler.convert import job_spec
from streams.scheduler.outcomes import final_decision, routed_message, us_since

if TYPE_CHECKING:
    from streams.scheduler.protocols import Ranks, Routes

__all__ = ["ranked_regions", "region_views", "reject_invalid", "route"]


def region_views(s: Routes) -> dict[str, Any]:
    """Region summaries for the router, recomputed at most every `view_ttl_s`.

    Summarising 10,000 nodes costs ~0.6 ms; the router may be a moment behind because the
    placer, which reads the arrays directly, has the last word (and spills over).
    """
    at, views = s.view_cache
    now = time.monotonic()
    if now - at >= s.view_ttl_s or not views:
        views = s.state.region_views()
        if s.remote_views is not None:  # regions other workers own; ours are exact
            views = {**s.remote_views(), **views}
        if s.forecasts is not None:
            views = {r: _with_headroom(v, s.forecasts.headroom(r)) for r, v in views.items()}
        s.view_cache = (now, views)
    return views


def route(s: Routes, job: Mapping[str, Any], *, started_ns: int) -> list[Outgoing]:
    """Global choice: rank regions for a JobSubmitted record and hand it to the best."""
    job_id = job["job_id"]
    s.clock.observe(int(job["ts"]))
    if job_id in s.final or job_id in s.routed_attempts:  # decided, or on its way
        return []
    submitted_ts = int(job["ts"])
    problems = job_problems(job)
    if problems:
        return refuse_unrouted(s, job, started_ns, [f"invalid job spec: {p}" for p in problems])
    spec = job_spec(job)
    problem = s.tenancy.problem(spec)
    if problem:
        return refuse_unrouted(s, job, started_ns, [f"invalid job spec: {problem}"])
    low = s.forecasts is not None and s.forecasts.low_priority(spec)
    ranked = ranked_regions(s, spec, keep_headroom=low)
    if not ranked:  # no summary yet of the regions it may use (another worker's, not yet
        # published): the region's owner decides, and refuses a region it has no nodes in
        ranked = [(r, 0.0) for r in spec.allowed_regions]
    if not ranked:
        allowed = ", ".join(job.get("allowed_regions") or ()) or "any"
        reason = f"no known region satisfies allowed_regions={allowed}"
        return refuse_unrouted(s, job, started_ns, [reason])
    regions, carried = [r for r, _ in ranked], dict(job)
    routed = {
        "event_id": new_event_id(),
        "ts": s.clock(),
        "job": carried,
        "submitted_ts": submitted_ts,
        "region": regions[0],
        "candidates": regions[1:],
        "attempt": 1,
        "region_score": float(ranked[0][1]),
        "refusals": {},
        "queue_region": None,
        "worker_us": us_since(started_ns),
        "verified_tenant": job.get("verified_tenant"),  # set by streams.scheduler.admission
    }
    s.know_spec(carried, spec)  # placing it here next asks for the same spec
    return [routed_message(s, routed)]


def ranked_regions(
    s: Ranks, spec: JobSpec, *, keep_headroom: bool = False
) -> list[tuple[str, float]]:
    """The regions `spec` may use, best first, as this worker sees them: its region views and
    the placer's throughput model (a catalogue file's models, and one speed cache)."""
    return rank_regions(
        spec,
        s.region_views(),
        throughput=s.placer.throughput,
        porting_penalties=s.porting_penalties,
        keep_headroom=keep_headroom,
    )


def reject_invalid(s: Routes, job: Mapping[str, Any], problems: Sequence[str]) -> list[Outgoing]:
    """REJECTED for a submission that failed validation (once per job id)."""
    job_id = str(job["job_id"])
    if job_id in s.final or not job_id.strip() or len(job_id) > 256:
        return []  # no usable job id to answer under: the dead letter says it all
    reasons = [f"invalid job spec: {p}" for p in problems]
    return refuse_unrouted(s, job, time.perf_counter_ns(), reasons)


def refuse_unrouted(
    s: Routes, job: Mapping[str, Any], started_ns: int, reasons: list[str]
) -> list[Outgoing]:
    """REJECTED before any region was asked."""
    return [
        final_decision(s, job, "REJECTED", None, int(job["ts"]), 1, started_ns, reasons=reasons)
    ]


def _with_headroom(view: RegionView, headroom: int) -> RegionView:
    return view if view.headroom_gpus == headroom else replace(view, headroom_gpus=headroom)
