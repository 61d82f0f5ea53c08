"""How many replicas a service needs: from the observed rate, the forecast and what one replica
serves at the SLO; when to scale in (hysteresis, never below the forecast's need); and the
reactive baseline (an HPA: target utilisation, the last window's rate, no forecast)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum

import numpy as np
from numpy.typing import NDArray

from scorer.catalog import Catalog, default_catalog
from scorer.services.queueing import capacity_at_slo, pool_capacity_rps
from scorer.services.spec import ServiceSpec

__all__ = [
    "Action",
    "Decision",
    "ScaleState",
    "decide",
    "hpa_desired",
    "lead_minutes",
    "pool_capacity",
    "replica_capacity_rps",
    "replicas_for",
    "service_ms_on",
    "service_pool",
]


class Action(Enum):
    HOLD = "HOLD"
    SCALE_OUT = "SCALE_OUT"
    SCALE_IN = "SCALE_IN"


@dataclass(frozen=True)
class ScaleState:
    """What the autoscaler remembers of a service: replicas it has (serving or on their way)
    and since when the need has stayed below them (None: it has not)."""

    replicas: int
    low_since_s: float | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    target: int  # replicas wanted after this decision
    need_observed: int  # replicas the observed rate alone needs
    need_forecast: int  # replicas the forecast's peak over the horizon needs
    reason: str


def service_ms_on(spec: ServiceSpec, model: str, catalog: Catalog | None = None) -> float:
    """Mean slot time on `model`: `service_ms` scaled by the roofline (decode is bound by
    memory bandwidth, so time goes as 1 / HBM GB/s)."""
    catalog = catalog or default_catalog()
    base = spec.service_ms_on or (spec.gpu_models[0] if spec.gpu_models else model)
    here, there = catalog.get(model), catalog.get(base)
    if here is None or there is None or here.memory_bandwidth_gbs <= 0:
        return spec.service_ms
    return spec.service_ms * there.memory_bandwidth_gbs / here.memory_bandwidth_gbs


def replica_capacity_rps(spec: ServiceSpec, model: str, catalog: Catalog | None = None) -> float:
    """Requests/s one replica on `model` serves within the SLO: given in the file, else from
    the queueing model of one replica alone (cautious: a pool of them does better)."""
    given = spec.capacity_rps.get(model)
    if given is not None:
        return given
    return capacity_at_slo(spec.batch, service_ms_on(spec, model, catalog), spec.slo_p99_ms)


def pool_capacity(
    spec: ServiceSpec, model: str, catalog: Catalog | None = None
) -> NDArray[np.float64]:
    """Requests/s n replicas on `model` serve within the SLO, n = 0..max_replicas: n x the
    file's per-replica figure when it gives one, else the M/M/c pool (pooling helps)."""
    given = spec.capacity_rps.get(model)
    if given is not None:
        return np.arange(spec.max_replicas + 1, dtype=np.float64) * given
    slot_ms = service_ms_on(spec, model, catalog)
    return pool_capacity_rps(spec.batch, slot_ms, spec.slo_p99_ms, spec.max_replicas)


def service_pool(
    spec: ServiceSpec, models: Sequence[str], catalog: Catalog | None = None
) -> NDArray[np.float64]:
    """The pool capacity a service plans with over the GPU models it may get: the slowest's
    (mixed models are approximated; with none known, its first allowed model's, else H100's)."""
    known = sorted(set(models)) or [spec.gpu_models[0] if spec.gpu_models else "H100"]
    return np.min(np.stack([pool_capacity(spec, m, catalog) for m in known]), axis=0)


def replicas_for(rate_rps: float, pool: NDArray[np.float64], spec: ServiceSpec) -> int:
    """Fewest replicas whose pool capacity covers `rate_rps`, within [min, max]_replicas."""
    top = min(spec.max_replicas, len(pool) - 1)
    wanted = int(np.searchsorted(pool[: top + 1], max(0.0, rate_rps) - 1e-9, side="left"))
    return max(spec.min_replicas, min(top, wanted))


def lead_minutes(spec: ServiceSpec) -> int:
    """Minutes ahead scale-out must look: the slowest tier's start, plus the minute it lands."""
    return math.ceil(max(spec.model_load_s, spec.cold_start_s) / 60.0) + 1


def decide(
    spec: ServiceSpec,
    pool: NDArray[np.float64],
    state: ScaleState,
    observed_rps: float,
    forecast_rps: Sequence[float],
    now_s: float,
    previous_rps: float | None = None,
) -> tuple[Decision, ScaleState]:
    """Scale out at once to what the observed rate and the forecast's peak over the lead time
    (`lead_minutes`) need; scale in only after the need has stayed below the replicas for
    `scale_in_after_s`, and never below what the forecast's peak over its whole horizon needs.
    Rates are planned at x (1 + headroom): they move before the next look; a rise since the
    `previous_rps` look is assumed to go on for one more look (a burst's onset)."""
    margin = 1.0 + spec.headroom
    ahead = list(forecast_rps) or [0.0]
    rising = max(0.0, observed_rps - previous_rps) if previous_rps is not None else 0.0
    by_load = replicas_for((observed_rps + rising) * margin, pool, spec)
    by_lead = replicas_for(max(ahead[: lead_minutes(spec)]) * margin, pool, spec)
    by_forecast = replicas_for(max(ahead) * margin, pool, spec)
    grow, floor = max(by_load, by_lead), max(by_load, by_forecast)
    why = (
        f"observed {observed_rps:.1f} rps -> {by_load}, forecast peak {max(ahead):.1f} rps"
        f" -> {by_forecast} ({by_lead} within the lead time)"
    )
    if grow > state.replicas:
        decision = Decision(Action.SCALE_OUT, grow, by_load, by_forecast, why)
        return decision, ScaleState(grow, None)
    if floor >= state.replicas:
        hold = Decision(Action.HOLD, state.replicas, by_load, by_forecast, why)
        return hold, ScaleState(state.replicas, None)
    since = state.low_since_s if state.low_since_s is not None else now_s
    if now_s - since >= spec.scale_in_after_s:
        decision = Decision(Action.SCALE_IN, floor, by_load, by_forecast, why)
        return decision, ScaleState(floor, None)
    waited = (
        f"{why}; below {state.replicas} for {now_s - since:.0f} of {spec.scale_in_after_s:.0f} s"
    )
    hold = Decision(Action.HOLD, state.replicas, by_load, by_forecast, waited)
    return hold, replace(state, low_since_s=since)


def hpa_desired(
    spec: ServiceSpec, window_rps: float, replica_max_rps: float, target_utilisation: float = 0.7
) -> int:
    """The HPA's rule on the window's rate: utilisation = rate / (replicas x what one replica
    can serve at saturation); desired = ceil(rate / (target x per-replica saturation))."""
    per = target_utilisation * replica_max_rps
    wanted = math.ceil(max(0.0, window_rps) / per - 1e-9) if per > 0 else spec.max_replicas
    return max(spec.min_replicas, min(spec.max_replicas, wanted))
