"""Quota reservation: EASY backfill applied to a tenant's quota (Kueue's StrictFIFO with
backfill; a Slurm reservation on an account's limit).

A tenant's oldest waiting job of its highest priority gets a reservation on its quota in a
cell (tenant, region, GPU class): the earliest time the tenant's placements there, ending as
expected, leave room for it (now, when it waits for GPUs within its quota). Another job of the
same tenant that would take quota in the same cell starts only where it does not delay that
time: it is expected to end by then, or the quota then has room for both. Jobs of other
tenants are not touched (their quota is their own).

Only a cap the tenant's own jobs free is reserved (`own_cap`): the nominal quota for
non-preemptible work (it never borrows) or a tenant in no cohort, nominal + borrowing limit
for a preemptible job at its limit. A preemptible job waiting on idle quota of its cohort
depends on other tenants' ends: no reservation, it waits as before (BestEffortFIFO).

`holding` lists the tenant's placements in the cell as (expected end ms, milli-GPUs): inf when
unknown; an overdue one (end <= now) counts as ending now.

    used(t)  = sum(milli for end, milli in holding if end > t)
    start    = min t in {now} | ends, t >= now, with used(t) + need <= cap      (None: never)
    harmless = end_c <= start  or  used(start) + milli_c + need <= cap
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scorer.tenancy.policy import TenancyPolicy
from scorer.tenancy.quota import limit_of, nominal_of

__all__ = ["QuotaReservation", "delays_quota", "own_cap", "quota_start", "used_at"]

Holding = Sequence[tuple[float, int]]  # (expected end ms, milli-GPUs) per placement


@dataclass(frozen=True)
class QuotaReservation:
    """Quota of one cell reserved for a tenant's head-of-line job from `start_ms`."""

    job_id: str
    tenant: str
    region: str
    gpu_class: str
    need: int  # milli-GPUs the job asks
    cap: int  # milli-GPUs the tenant may hold there (`own_cap`)
    priority: int  # jobs of higher priority are ahead of it, never held back
    start_ms: float


def own_cap(
    policy: TenancyPolicy, tenant: str, region: str, gpu_class: str, *, preemptible: bool
) -> int | None:
    """Milli-GPUs the tenant may hold in the cell, when only its own jobs decide (see the
    module doc); None: no quotas, no such tenant, or the cohort's idle quota decides."""
    t = policy.tenant(tenant) if policy.quotas_enabled else None
    if t is None:
        return None
    nominal = nominal_of(policy, tenant, region, gpu_class)
    if not preemptible or t.cohort is None:
        return nominal
    limit = limit_of(policy, tenant, region, gpu_class)
    return None if limit is None else nominal + limit


def used_at(holding: Iterable[tuple[float, int]], t: float) -> int:
    """Milli-GPUs still held at `t` (placements expected to end after it)."""
    return sum(milli for end, milli in holding if end > t)


def quota_start(holding: Holding, *, cap: int, need: int, now_ms: float) -> float | None:
    """Earliest time the tenant's quota has room for `need` (see the module doc)."""
    if need > cap:
        return None
    ends = sorted({max(float(end), now_ms) for end, _ in holding if math.isfinite(end)})
    for t in (now_ms, *ends):
        if used_at(holding, t) + need <= cap:
            return t
    return None


def delays_quota(
    holding: Holding, reservation: QuotaReservation, *, milli: int, end_ms: float
) -> bool:
    """Would a job of `milli` milli-GPUs, expected to end at `end_ms`, started now in the
    reservation's cell, delay it? (`holding`: the tenant's placements there now.)"""
    if end_ms <= reservation.start_ms:
        return False
    held = used_at(holding, reservation.start_ms)
    return held + milli + reservation.need > reservation.cap
