"""The queue as an operator reads it (`/queue/`, `gpuflow queue`): per region, each tenant's
usage against its nominal and borrowed quota, and the waiting jobs in the order the next retry
pass will consider them, each with the reason it waits; preemptions in progress first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scorer.tenancy import borrowed, limit_of, nominal_of
from streams.scheduler.fairness import entry_priority
from streams.scheduler.tenancy import CAPACITY, PREEMPTING

if TYPE_CHECKING:
    from streams.scheduler.core import Scheduler

__all__ = ["queue_snapshot"]

MILLI = 1000


def queue_snapshot(s: Scheduler, *, limit: int = 200) -> dict[str, Any]:
    """JSON-ready view of every region this scheduler holds jobs or nodes in."""
    now = s.clock()
    regions = sorted({*s.state.regions, *(r["region"] for r in s.queue.values())})
    return {
        "ts": now,
        "quotas": s.tenancy.policy.quotas_enabled,
        "regions": {r: _region(s, r, now, limit) for r in regions},
    }


def _region(s: Scheduler, region: str, now: int, limit: int) -> dict[str, Any]:
    waiting = [r for r in s.queue.values() if r["region"] == region]
    preempting = [r for r in waiting if r.get("preempting")]
    rest = [r for r in waiting if not r.get("preempting")]
    ordered = [*preempting, *s.tenancy.fair_order(region, rest)]
    hold = s.tenancy.reservations.get(region)
    reservation = hold.reservation if hold is not None else None
    return {
        "free_gpus": sum(s.state.free_gpus(region).values()),
        "total_gpus": int(s.state.gpu_count[s.state.slots(region)].sum()),
        "tenants": _tenants(s, region),
        "waiting": [_job(s, r, now, i + 1) for i, r in enumerate(ordered[:limit])],
        "more_waiting": max(0, len(ordered) - limit),
        "reservation": None
        if reservation is None
        else {
            "job_id": reservation.job_id,
            "start_in_s": round(max(0.0, (reservation.start_ms - now) / 1000), 1),
            "gpus": {n: list(g) for n, g in reservation.gpus.items()},
        },
        "quota_reservations": [
            {
                "tenant": tenant,
                "job_id": res.job_id,
                "gpu_class": res.gpu_class,
                "gpus": res.need / MILLI,
                "start_in_s": round(max(0.0, (res.start_ms - now) / 1000), 1),
            }
            for tenant, res in sorted(s.tenancy.quota_reservations.get(region, {}).items())
            if res.job_id in s.queue
        ],
    }


def _tenants(s: Scheduler, region: str) -> list[dict[str, Any]]:
    """Per tenant: cohort, weight, dominant share, jobs, and quota use per GPU class."""
    policy, tenancy = s.tenancy.policy, s.tenancy
    usage = tenancy.usage()
    waiting = [q for q in s.queue.values() if q["region"] == region]
    tenants = sorted(
        {t for (t, r, _) in usage if r == region}
        | {str(q["job"].get("tenant", "default")) for q in waiting}
        | set(policy.tenants)
    )
    shares, capacity = tenancy.shares(region), tenancy.capacity(region)
    out = []
    for tenant in tenants:
        use = shares.get(tenant)
        share = 0.0
        if use is not None:
            share = max(
                (float(u / c) for u, c in zip(use, capacity, strict=True) if c > 0), default=0.0
            )
        tp = policy.tenant(tenant)
        running = [r for r in tenancy.running.values() if r.tenant == tenant and r.region == region]
        out.append(
            {
                "tenant": tenant,
                "cohort": tp.cohort if tp is not None else None,
                "weight": policy.weight(tenant),
                "dominant_share": round(share, 4),
                "running": len(running),
                "waiting": sum(1 for q in waiting if q["job"].get("tenant", "default") == tenant),
                "cells": _cells(s, usage, tenant, region),
            }
        )
    return out


def _cells(
    s: Scheduler, usage: Mapping[tuple[str, str, str], int], tenant: str, region: str
) -> list[dict[str, Any]]:
    """GPUs in use, nominal, borrowed and the borrowing limit per GPU class (quotas: else None)."""
    policy = s.tenancy.policy
    quotas = policy.quotas_enabled
    cells = []
    for cls in sorted(s.tenancy.classes_in(region)):
        used = usage.get((tenant, region, cls), 0)
        nominal = nominal_of(policy, tenant, region, cls) if quotas else None
        if not used and not nominal:
            continue
        limit = limit_of(policy, tenant, region, cls)
        cells.append(
            {
                "gpu_class": cls,
                "used": used / MILLI,
                "nominal": None if nominal is None else nominal / MILLI,
                "borrowed": borrowed(policy, usage, tenant, region, cls) / MILLI if quotas else 0.0,
                "borrowing_limit": None if limit is None else limit / MILLI,
            }
        )
    return cells


def _job(s: Scheduler, routed: Mapping[str, Any], now: int, position: int) -> dict[str, Any]:
    job = routed["job"]
    job_id = job["job_id"]
    code, reason = s.tenancy.waits.get(job_id, (CAPACITY, "waiting for the next retry"))
    pending = routed.get("preempting")
    if pending:
        left = [v for v in pending["victims"] if v not in pending["gone"]]
        code = PREEMPTING
        reason = f"preempting {', '.join(left) or 'nothing left'}; deadline in " + (
            f"{max(0.0, (int(pending['deadline_ms']) - now) / 1000):.0f}s"
        )
    prio = s.tenancy.priority(s.spec_of(routed))
    return {
        "position": position,
        "job_id": job_id,
        "tenant": job.get("tenant", "default"),
        "priority_class": prio.class_name if not isinstance(prio, str) else "",
        "priority": entry_priority(routed),
        "gpus": int(job.get("gpu_count", 1)) * int(job.get("gpu_milli", 1000)) / MILLI,
        "epoch": int(routed.get("epoch") or 0),
        "waited_s": round(max(0.0, (now - int(routed.get("queued_ts") or now)) / 1000), 1),
        "reason_code": code,
        "reason": reason,
    }
