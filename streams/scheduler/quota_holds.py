"""Quota reservations in a region: the mechanism of `scorer.tenancy.quota_reservation`.

The retry pass (`streams.scheduler.queueing`) gives each tenant's oldest waiting job of its highest
priority a reservation on its quota (`reserve_quota`): refused by the quota, from when its own
jobs free enough; within the quota, from now (its tenant's later jobs must leave it
room while it waits for GPUs or reclaims them). The reservations are kept between passes in
`Tenancy.quota_reservations` (region -> tenant -> reservation) so that arriving jobs and
preemptors respect it too. Before a later job of the same tenant starts (or preempts) in the
reserved cell, `blocking` says whether it would delay the reservation; such a job waits with
QUOTA_RESERVATION. `surely_blocked` answers the same before any placer call, from the job's
fastest expected run on the cell's models (a pass need not ask the placer for a job that
cannot start anyway).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any

from scorer import JobSpec, PlacementResult
from scorer.tenancy import QuotaReservation, delays_quota, own_cap, quota_start
from streams.scheduler.tenancy import QUOTA, QUOTA_RESERVATION

if TYPE_CHECKING:
    from streams.scheduler.protocols import Booked

__all__ = ["blocking", "enabled", "reserve_quota", "surely_blocked", "tell", "wait_reason"]

Holds = Mapping[str, QuotaReservation]  # tenant -> its reservation in one region


def enabled(s: Booked) -> bool:
    policy = s.tenancy.policy
    return policy.quotas_enabled and policy.backfill.enabled and policy.backfill.quota_reservation


def _holding(
    s: Booked, res: QuotaReservation, leaving: Collection[str] = ()
) -> list[tuple[float, int]]:
    """The tenant's placements (and preemptors' claims) in the reserved cell, but `leaving`."""
    cell = (res.tenant, res.region, res.gpu_class)
    return [
        (r.expected_end_ms, r.milli)
        for r in s.tenancy.holding_in(res.region)
        if (r.tenant, r.region, r.gpu_class) == cell and r.job_id not in leaving
    ]


def reserve_quota(s: Booked, routed: Mapping[str, Any], region: str) -> QuotaReservation | None:
    """The quota reservation of a tenant's head-of-line job (the earliest over the GPU classes
    it may use). None: its own jobs never free enough, or the cohort's
    idle quota decides (`own_cap`)."""
    spec = s.spec_of(routed)
    prio = s.tenancy.priority(spec)
    if isinstance(prio, str):
        return None
    need, now = spec.gpu_count * spec.gpu_milli, s.clock()
    allowed = set(spec.allowed_gpu_models)
    best: QuotaReservation | None = None
    for cls, models in s.tenancy.classes_in(region).items():
        if allowed and not allowed & set(models):
            continue
        cap = own_cap(s.tenancy.policy, spec.tenant, region, cls, preemptible=prio.preemptible)
        if cap is None:
            continue
        res = QuotaReservation(spec.job_id, spec.tenant, region, cls, need, cap, prio.value, 0.0)
        start = quota_start(_holding(s, res), cap=cap, need=need, now_ms=now)
        if start is not None and (best is None or start < best.start_ms):
            best = dataclasses.replace(res, start_ms=start)
    return best


def _subject(s: Booked, spec: JobSpec, holds: Holds) -> tuple[QuotaReservation, int] | None:
    """The tenant's reservation this job must respect, and the job's priority (None: none)."""
    res = holds.get(spec.tenant)
    if res is None or res.job_id == spec.job_id or res.job_id not in s.queue:
        return None
    prio = s.tenancy.priority(spec)
    if isinstance(prio, str) or prio.value > res.priority:
        return None  # ahead of the reserved job in its tenant's order
    return res, prio.value


def blocking(
    s: Booked,
    routed: Mapping[str, Any],
    result: PlacementResult,
    holds: Holds,
    leaving: Collection[str] = (),
) -> QuotaReservation | None:
    """The reservation that starting `result` now (after evicting `leaving`) would delay
    (None: it delays none)."""
    spec = s.spec_of(routed)
    subject = _subject(s, spec, holds)
    if subject is None or not result.placed:
        return None
    res = subject[0]
    if result.region != res.region or s.tenancy.gpu_class(result.gpu_model) != res.gpu_class:
        return None  # another cell: the reserved quota is not touched
    duration = result.expected_duration_s
    end = s.clock() + duration * 1000 if duration else math.inf
    milli = spec.gpu_count * spec.gpu_milli
    holding = _holding(s, res, leaving)
    return res if delays_quota(holding, res, milli=milli, end_ms=end) else None


def surely_blocked(
    s: Booked, routed: Mapping[str, Any], region: str, holds: Holds
) -> QuotaReservation | None:
    """The reservation the job would delay on every model it may run on in the reserved cell,
    when it could use no other cell (None: ask the placer)."""
    spec = s.spec_of(routed)
    subject = _subject(s, spec, holds)
    if subject is None:
        return None
    res = subject[0]
    classes = s.tenancy.classes_in(region)
    allowed = set(spec.allowed_gpu_models)
    cells = [c for c, models in classes.items() if not allowed or allowed & set(models)]
    if cells != [res.gpu_class]:
        return None
    throughput = s.placer.throughput
    runs = [
        throughput.expected_duration_s(spec, m, throughput.relative_speed(spec, m, True))
        for m in classes[res.gpu_class]
    ]
    fastest = min((r for r in runs if r is not None), default=None)
    end = s.clock() + fastest * 1000 if fastest is not None else math.inf
    milli = spec.gpu_count * spec.gpu_milli
    return res if delays_quota(_holding(s, res), res, milli=milli, end_ms=end) else None


def tell(s: Booked, res: QuotaReservation) -> None:
    """A reserved job its quota refuses is told when its quota is reserved."""
    code, why = s.tenancy.waits.get(res.job_id, ("", ""))
    if code == QUOTA and "its quota is reserved" not in why:
        wait_s = max(0.0, (res.start_ms - s.clock()) / 1000)
        s.tenancy.wait(res.job_id, QUOTA, f"{why}; its quota is reserved in ~{wait_s:.0f}s")


def wait_reason(s: Booked, res: QuotaReservation) -> tuple[str, str]:
    start = max(0.0, (res.start_ms - s.clock()) / 1000)
    return QUOTA_RESERVATION, (
        f"quota reservation: would delay {res.job_id}, which {res.tenant}'s quota in "
        f"{res.region}/{res.gpu_class} is reserved for (in ~{start:.0f}s)"
    )
