"""Quota admission, Kueue-style: nominal quota per tenant, region and GPU class; borrowing of a
cohort's idle nominal quota up to a limit; non-preemptible work only within nominal.

Usage and quotas are counted in milli-GPUs (a 250-milli share counts a quarter). `usage` maps
(tenant, region, gpu_class) to what the tenant holds there, preemptors already promised GPUs
included.

    admit = used + need <= nominal                                   (within nominal)
         or (preemptible and in a cohort
             and used + need <= nominal + borrowing_limit            (its own cap)
             and cohort_used + need <= cohort_nominal)               (idle quota to lend)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scorer.tenancy.policy import TenancyPolicy

__all__ = ["Admission", "Cell", "admit", "allowance_left", "borrowed", "limit_of", "nominal_of"]

Cell = tuple[str, str, str]  # tenant, region, gpu_class
MILLI = 1000


@dataclass(frozen=True)
class Admission:
    ok: bool
    borrowing: bool = False  # admitted on quota lent by the cohort
    reason: str = ""  # why not, one line (starts with "quota:")


def nominal_of(policy: TenancyPolicy, tenant: str, region: str, gpu_class: str) -> int:
    t = policy.tenant(tenant)
    rule = t.rule(region, gpu_class) if t is not None else None
    return round(rule.nominal * MILLI) if rule is not None else 0


def limit_of(policy: TenancyPolicy, tenant: str, region: str, gpu_class: str) -> int | None:
    """Most a tenant may hold beyond nominal; None: as much as its cohort lends."""
    t = policy.tenant(tenant)
    rule = t.rule(region, gpu_class) if t is not None else None
    if rule is None or rule.borrowing_limit is None:
        return None
    return round(rule.borrowing_limit * MILLI)


def borrowed(
    policy: TenancyPolicy, usage: Mapping[Cell, int], tenant: str, region: str, gpu_class: str
) -> int:
    """Milli-GPUs the tenant holds beyond its nominal quota there."""
    used = usage.get((tenant, region, gpu_class), 0)
    return max(0, used - nominal_of(policy, tenant, region, gpu_class))


def _cohort(
    policy: TenancyPolicy, usage: Mapping[Cell, int], cohort: str, region: str, gpu_class: str
) -> tuple[int, int]:
    members = policy.cohort_members(cohort)
    nominal = sum(nominal_of(policy, m.name, region, gpu_class) for m in members)
    used = sum(usage.get((m.name, region, gpu_class), 0) for m in members)
    return used, nominal


def admit(
    policy: TenancyPolicy,
    usage: Mapping[Cell, int],
    tenant: str,
    region: str,
    gpu_class: str,
    need: int,
    *,
    preemptible: bool = True,
) -> Admission:
    """May `tenant` start `need` milli-GPUs of `gpu_class` in `region` (see the module doc)."""
    if not policy.quotas_enabled:
        return Admission(True)
    t = policy.tenant(tenant)
    if t is None:
        return Admission(False, reason=f"quota: tenant {tenant!r} has no quota in the policy")
    used = usage.get((tenant, region, gpu_class), 0)
    nominal = nominal_of(policy, tenant, region, gpu_class)
    where = f"{region}/{gpu_class}"
    if used + need <= nominal:
        return Admission(True)
    held = f"{used / MILLI:g} of nominal {nominal / MILLI:g} GPUs in {where}"
    if not preemptible:
        return Admission(False, reason=f"quota: non-preemptible work runs within nominal ({held})")
    if t.cohort is None:
        return Admission(False, reason=f"quota: {tenant} holds {held} and is in no cohort")
    limit = limit_of(policy, tenant, region, gpu_class)
    if limit is not None and used + need > nominal + limit:
        cap = (nominal + limit) / MILLI
        return Admission(False, reason=f"quota: {tenant} holds {held}, borrowing limit {cap:g}")
    cohort_used, cohort_nominal = _cohort(policy, usage, t.cohort, region, gpu_class)
    if cohort_used + need > cohort_nominal:
        return Admission(
            False,
            reason=f"quota: cohort {t.cohort} has {cohort_used / MILLI:g} of "
            f"{cohort_nominal / MILLI:g} GPUs in use in {where}, nothing left to lend",
        )
    return Admission(True, borrowing=True)


def allowance_left(
    policy: TenancyPolicy, protected: Mapping[tuple[str, str], int], tenant: str, region: str
) -> int | None:
    """Milli-GPUs the tenant may still run as requested-non-preemptible in a region (None: no
    cap). `protected` maps (tenant, region) to what such jobs hold now."""
    t = policy.tenant(tenant)
    if t is None or t.non_preemptible_gpus is None:
        return None
    return round(t.non_preemptible_gpus * MILLI) - protected.get((tenant, region), 0)
