"""Inference services: the spec, what one replica serves at the SLO (M/M/c), the replicas a
rate and a forecast need, the scale-out tiers under the spread rule, and the seasonal forecast.
Pure: numpy and domain types only (docs/services.md)."""

from __future__ import annotations

from scorer.services.errors import ServiceSpecError
from scorer.services.look import (
    Held,
    Look,
    Start,
    plan_look,
    ready_after_s,
    ready_minutes,
    serving_of,
)
from scorer.services.policy import (
    Action,
    Decision,
    ScaleState,
    decide,
    hpa_desired,
    lead_minutes,
    pool_capacity,
    replica_capacity_rps,
    replicas_for,
    service_ms_on,
    service_pool,
)
from scorer.services.queueing import (
    capacity_at_slo,
    erlang_c,
    p99_ms,
    p99_ms_many,
    pool_capacity_rps,
)
from scorer.services.seasonal import seasonal_forecast, seasonal_peak
from scorer.services.spec import ServiceSpec, parse_service, replica_job, warm_target
from scorer.services.tiers import Grant, Tier, ZoneRoom, plan_scale_in, plan_scale_out, zone_cap

__all__ = [
    "Action",
    "Decision",
    "Grant",
    "Held",
    "Look",
    "ScaleState",
    "ServiceSpec",
    "ServiceSpecError",
    "Start",
    "Tier",
    "ZoneRoom",
    "capacity_at_slo",
    "decide",
    "erlang_c",
    "hpa_desired",
    "lead_minutes",
    "p99_ms",
    "p99_ms_many",
    "parse_service",
    "plan_look",
    "plan_scale_in",
    "plan_scale_out",
    "pool_capacity",
    "pool_capacity_rps",
    "ready_after_s",
    "ready_minutes",
    "replica_capacity_rps",
    "replica_job",
    "replicas_for",
    "seasonal_forecast",
    "seasonal_peak",
    "service_ms_on",
    "service_pool",
    "serving_of",
    "warm_target",
    "zone_cap",
]
