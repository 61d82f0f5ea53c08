"""Tenancy policy, pure: priority classes, quotas with cohorts and borrowing, DRF fair share,
victim selection for preemption and reclaim, and EASY backfill reservations (of GPUs for a
waiting gang, of quota for a tenant's head-of-line job).

The mechanism that commits these proposals (holds, PreemptionDecision events, requeues) lives
in `streams/tenancy.py` and `streams/preemption.py`.
"""

from __future__ import annotations

from scorer.tenancy.backfill import Reservation, earliest_start, held_now
from scorer.tenancy.classes import (
    DEFAULT_CLASSES,
    JobPriority,
    PriorityClass,
    class_for,
    resolve_priority,
)
from scorer.tenancy.drf import (
    RESOURCES,
    dominant_share,
    dominant_shares,
    drf_allocation,
    fair_next,
)
from scorer.tenancy.errors import PolicyError
from scorer.tenancy.policy import (
    ANY,
    RECLAIM_MODES,
    BackfillPolicy,
    PreemptionPolicy,
    QuotaRule,
    TenancyPolicy,
    TenantPolicy,
    parse_policy,
)
from scorer.tenancy.quota import (
    Admission,
    Cell,
    admit,
    allowance_left,
    borrowed,
    limit_of,
    nominal_of,
)
from scorer.tenancy.quota_reservation import (
    QuotaReservation,
    delays_quota,
    own_cap,
    quota_start,
    used_at,
)
from scorer.tenancy.victims import (
    PRIORITY,
    RECLAIM,
    Candidate,
    VictimPlan,
    eligibility,
    plan_cost,
    select_victims,
)

__all__ = [
    "ANY",
    "DEFAULT_CLASSES",
    "PRIORITY",
    "RECLAIM",
    "RECLAIM_MODES",
    "RESOURCES",
    "Admission",
    "BackfillPolicy",
    "Candidate",
    "Cell",
    "JobPriority",
    "PolicyError",
    "PreemptionPolicy",
    "PriorityClass",
    "QuotaReservation",
    "QuotaRule",
    "Reservation",
    "TenancyPolicy",
    "TenantPolicy",
    "VictimPlan",
    "admit",
    "allowance_left",
    "borrowed",
    "class_for",
    "delays_quota",
    "dominant_share",
    "dominant_shares",
    "drf_allocation",
    "earliest_start",
    "eligibility",
    "fair_next",
    "held_now",
    "limit_of",
    "nominal_of",
    "own_cap",
    "parse_policy",
    "plan_cost",
    "quota_start",
    "resolve_priority",
    "select_victims",
    "used_at",
]
