"""Service replay on the virtual clock: per minute, each service's scaler sets its replicas,
new ones come from the tiers (warm, a free GPU paying the model load, a GPU reclaimed from
training paying the cold start, else degrade), and the minute is judged by the p99 latency an
M/M/c queue of the serving replicas gives at that minute's rate (docs/services.md)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from agents.replay.service_fleet import FleetZone, ServiceFleet, training_demand
from agents.replay.service_scalers import Scaler, ScalingMinute
from scorer.services import (
    ServiceSpec,
    Tier,
    ZoneRoom,
    p99_ms_many,
    plan_scale_in,
    plan_scale_out,
    pool_capacity,
    service_ms_on,
    warm_target,
)

__all__ = ["ServiceReport", "replay_services", "service_zones"]


@dataclass
class _Replica:
    zone: str
    ready_at: int  # first minute it serves (or stands by)
    warm: bool = False  # a loaded standby, not serving


@dataclass(frozen=True)
class ServiceReport:
    service: str
    scaler: str
    minutes: int
    minutes_within_slo: int
    p99_ms: tuple[float, ...]  # per scored minute (inf: overloaded)
    gpu_hours: float
    utilisation: float  # requests served / what the serving replicas could serve
    utilisation_held: float  # ... / what every replica holding GPUs could (standbys, loading)
    starts_by_tier: Mapping[str, int]
    warm_refills: int
    lost_replicas: int
    replica_minutes_by_zone: Mapping[str, int]  # serving replica-minutes per zone, scored
    degraded_minutes: int
    peak_replicas: int

    @property
    def within_slo(self) -> float:
        return self.minutes_within_slo / self.minutes if self.minutes else 1.0


def service_zones(spec: ServiceSpec, zones: Sequence[FleetZone]) -> list[FleetZone]:
    """Zones a service may use: in its regions (and its zones, if named), of its GPU models."""
    return [
        z
        for z in zones
        if z.region in spec.regions
        and (not spec.zones or z.zone in spec.zones)
        and (not spec.gpu_models or z.gpu_model in spec.gpu_models)
    ]


@dataclass
class _Run:
    spec: ServiceSpec
    zones: list[FleetZone]
    pool: NDArray[np.float64]  # requests/s n replicas serve within the SLO
    replicas: list[_Replica] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=lambda: {t.value: 0 for t in Tier})
    refills: int = 0
    lost: int = 0  # replicas lost with their zone
    zone_minutes: list[dict[str, int]] = field(default_factory=list)  # serving, per minute
    serving: list[int] = field(default_factory=list)  # ready serving replicas per minute
    slot_ms: list[float] = field(default_factory=list)  # their mean slot time per minute
    held: list[int] = field(default_factory=list)  # replicas holding GPUs per minute
    degraded: list[bool] = field(default_factory=list)


def _rooms(run: _Run, fleet: ServiceFleet, minute: int, warm_only: bool) -> list[ZoneRoom]:
    gpr = run.spec.gpus_per_replica
    rooms = []
    for z in (z for z in run.zones if z.zone not in fleet.down):
        mine = [r for r in run.replicas if r.zone == z.zone]
        rooms.append(
            ZoneRoom(
                z.zone,
                replicas=sum(r.warm == warm_only for r in mine),
                warm=0 if warm_only else sum(r.warm and r.ready_at <= minute for r in mine),
                free=fleet.free(z.zone) // gpr,
                reclaimable=fleet.training_gpus[z.zone] // gpr,
            )
        )
    return rooms


def _start(run: _Run, fleet: ServiceFleet, tier: Tier, zone: str, minute: int, warm: bool) -> None:
    spec, gpr = run.spec, run.spec.gpus_per_replica
    if tier is Tier.NEIGHBOUR:
        fleet.take_free(zone, gpr)
        delay = spec.model_load_s
    else:
        fleet.reclaim(zone, gpr)
        delay = spec.cold_start_s
    run.replicas.append(_Replica(zone, minute + math.ceil(delay / 60.0), warm))


def _scale_out(run: _Run, fleet: ServiceFleet, add: int, target: int, minute: int) -> bool:
    grants = plan_scale_out(_rooms(run, fleet, minute, False), add, target, run.spec.max_zone_share)
    for g in grants:
        run.starts[g.tier.value] += g.count
        for _ in range(g.count if g.tier is not Tier.DEGRADE else 0):
            if g.tier is Tier.WARM:
                standby = next(
                    r for r in run.replicas if r.zone == g.zone and r.warm and r.ready_at <= minute
                )
                standby.warm = False
            else:
                _start(run, fleet, g.tier, g.zone, minute, warm=False)
    return any(g.tier is Tier.DEGRADE for g in grants)


def _scale_in(run: _Run, fleet: ServiceFleet, remove: int, keep_warm: int) -> None:
    active = [r for r in run.replicas if not r.warm]
    by_zone: dict[str, int] = {}
    for r in active:
        by_zone[r.zone] = by_zone.get(r.zone, 0) + 1
    for zone, count in plan_scale_in(by_zone, remove).items():
        here = sorted((r for r in active if r.zone == zone), key=lambda r: -r.ready_at)
        for r in here[:count]:  # the ones still loading first
            if sum(x.warm for x in run.replicas) < keep_warm:
                r.warm = True  # loaded already: it stands by instead of stopping
            else:
                run.replicas.remove(r)
                fleet.release(zone, run.spec.gpus_per_replica)


def _refill(run: _Run, fleet: ServiceFleet, minute: int) -> None:
    active = sum(not r.warm for r in run.replicas)
    missing = warm_target(run.spec, active) - sum(r.warm for r in run.replicas)
    if missing <= 0:
        return
    grants = plan_scale_out(_rooms(run, fleet, minute, True), missing, missing, 1.0)
    for g in grants:
        for _ in range(g.count if g.tier in (Tier.NEIGHBOUR, Tier.COLD) else 0):
            _start(run, fleet, g.tier, g.zone, minute, warm=True)
            run.refills += 1


def _step(
    run: _Run, fleet: ServiceFleet, scaler: Scaler, rates: NDArray[np.float64], t: int
) -> None:
    target, _ = scaler.target(ScalingMinute(run.spec, run.pool, t, rates[:t]))
    active = sum(not r.warm for r in run.replicas)
    degraded = False
    if target > active:
        degraded = _scale_out(run, fleet, target - active, target, t)
    elif target < active:
        keep = warm_target(run.spec, target) if scaler.keeps_warm else 0
        _scale_in(run, fleet, active - target, keep)
    if scaler.keeps_warm:
        _refill(run, fleet, t)
    serving = [r for r in run.replicas if not r.warm and r.ready_at <= t]
    models = {z.zone: z.gpu_model for z in run.zones}
    slot = [service_ms_on(run.spec, models[r.zone]) for r in serving]
    run.serving.append(len(serving))
    here: dict[str, int] = {}
    for r in serving:
        here[r.zone] = here.get(r.zone, 0) + 1
    run.zone_minutes.append(here)
    run.slot_ms.append(float(np.mean(slot)) if slot else run.spec.service_ms)
    run.held.append(len(run.replicas))
    run.degraded.append(degraded)


def _by_zone(minutes: Sequence[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for here in minutes:
        for zone, n in here.items():
            total[zone] = total.get(zone, 0) + n
    return total


def _report(run: _Run, scaler: Scaler, rates: NDArray[np.float64], warmup: int) -> ServiceReport:
    spec = run.spec
    n = np.array(run.serving[warmup:])
    slot_ms = np.array(run.slot_ms[warmup:])
    rate = rates[warmup:]
    p99 = np.empty(len(n))
    for ms in np.unique(slot_ms):  # one queue model per slot time (GPU model mix)
        at = slot_ms == ms
        p99[at] = p99_ms_many(rate[at], n[at] * spec.batch, float(ms))
    top = n * spec.batch * 1000.0 / slot_ms
    served = np.minimum(rate, top).sum()
    held_top = float((np.array(run.held[warmup:]) * spec.batch * 1000.0 / slot_ms).sum())
    return ServiceReport(
        service=spec.name,
        scaler=scaler.name,
        minutes=len(n),
        minutes_within_slo=int((p99 <= spec.slo_p99_ms).sum()),
        p99_ms=tuple(float(x) for x in p99),
        gpu_hours=float(np.sum(run.held[warmup:]) * spec.gpus_per_replica / 60.0),
        utilisation=float(served / top.sum()) if top.sum() > 0 else 0.0,
        utilisation_held=float(served / held_top) if held_top > 0 else 0.0,
        starts_by_tier=dict(run.starts),
        warm_refills=run.refills,
        lost_replicas=run.lost,
        replica_minutes_by_zone=_by_zone(run.zone_minutes[warmup:]),
        degraded_minutes=int(np.sum(run.degraded[warmup:])),
        peak_replicas=int(max(run.held[warmup:], default=0)),
    )


def _outages(
    fleet: ServiceFleet, runs: Sequence[_Run], outages: Mapping[str, tuple[int, int]], t: int
) -> None:
    for zone, (start, end) in outages.items():
        if t == start:
            fleet.lose(zone)
            for run in runs:
                gone = [r for r in run.replicas if r.zone == zone]
                run.lost += len(gone)
                run.replicas = [r for r in run.replicas if r.zone != zone]
        elif t == end:
            fleet.restore(zone)


def replay_services(
    specs: Sequence[ServiceSpec],
    rates: Mapping[str, NDArray[np.float64]],
    zones: Sequence[FleetZone],
    scaler: Scaler,
    *,
    warmup: int = 0,
    seed: int = 0,
    outages: Mapping[str, tuple[int, int]] | None = None,
) -> tuple[list[ServiceReport], float]:
    """Replay every service over its per-minute rates; minutes before `warmup` are history
    (simulated, not scored); `outages` takes zones away for minutes [start, end) (their
    replicas are lost and replaced elsewhere). Returns the reports and the share of the
    fleet's GPU-hours over the scored minutes that training (batch work) used."""
    minutes = min(len(rates[s.name]) for s in specs)
    fleet = ServiceFleet(zones, training_demand(zones, minutes, seed))
    runs = []
    for spec in specs:
        allowed = service_zones(spec, zones)
        if not allowed:
            raise ValueError(f"service {spec.name}: no zone of the fleet fits its regions/models")
        pools = [pool_capacity(spec, z.gpu_model) for z in allowed]
        runs.append(_Run(spec, allowed, np.min(np.stack(pools), axis=0)))
    training = 0.0
    for t in range(minutes):
        _outages(fleet, runs, outages or {}, t)
        for run in runs:
            _step(run, fleet, scaler, rates[run.spec.name], t)
        fleet.settle_training(t)
        if t >= warmup:
            training += sum(fleet.training_gpus.values())
    share = training / (fleet.total_gpus * max(1, minutes - warmup))
    return [_report(run, scaler, rates[run.spec.name], warmup) for run in runs], share
