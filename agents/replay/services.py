"""Service replay on the virtual clock: per minute, each service's scaler sets its replicas,
new ones come from the tiers (warm, a free GPU paying the model load, a GPU reclaimed from
training paying the cold start, else degrade), and the minute is judged by the p99 latency an
M/M/c queue of the serving replicas gives at that minute's rate (docs/services.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from agents.replay.service_fleet import FleetZone, ServiceFleet, training_demand
from agents.replay.service_report import (
    MinuteLook,
    ServiceReport,
    ServiceSeries,
    minute_look,
    service_report,
)
from agents.replay.service_scalers import Scaler, ScalingMinute
from scorer.services import (
    Held,
    Look,
    ServiceSpec,
    Tier,
    plan_look,
    ready_minutes,
    service_ms_on,
    service_pool,
    serving_of,
    warm_target,
)

__all__ = ["MinuteLook", "ServiceReport", "replay_services", "service_zones", "zone_key"]


@dataclass
class _Replica:
    zone: str  # the fleet's zone name
    ready_at: int  # first minute it serves (or stands by loaded)


def service_zones(spec: ServiceSpec, zones: Sequence[FleetZone]) -> list[FleetZone]:
    """Zones a service may use: in its regions (and its zones, if named), of its GPU models."""
    return [
        z
        for z in zones
        if z.region in spec.regions
        and (not spec.zones or z.zone in spec.zones)
        and (not spec.gpu_models or z.gpu_model in spec.gpu_models)
    ]


def zone_key(z: FleetZone) -> str:
    """A zone as the autoscaler names it (`region/zone`: zone names may repeat by region)."""
    return f"{z.region}/{z.zone}"


@dataclass
class _Run:
    spec: ServiceSpec
    zones: list[FleetZone]
    pool: NDArray[np.float64]  # requests/s n replicas serve within the SLO
    serving: int  # the serving count the last look set (at first min_replicas, as `decide`'s)
    replicas: dict[int, _Replica] = field(default_factory=dict)  # by index
    series: ServiceSeries = field(default_factory=ServiceSeries)


def _look(run: _Run, fleet: ServiceFleet, target: int, standbys: int, minute: int) -> Look:
    names = {z.zone: zone_key(z) for z in run.zones}
    held = [Held(i, names[r.zone], r.ready_at <= minute) for i, r in run.replicas.items()]
    rooms = {
        zone_key(z): (fleet.free(z.zone), fleet.training_gpus[z.zone])
        for z in run.zones
        if z.zone not in fleet.down
    }
    return plan_look(run.spec, run.serving, target, standbys, held, rooms)


def _apply(run: _Run, fleet: ServiceFleet, look: Look, minute: int) -> None:
    """Start the look's new replicas (a free GPU pays the model load, a reclaimed one the cold
    start), then stop the replicas it no longer wants."""
    gpr = run.spec.gpus_per_replica
    for start in look.starts:
        zone = start.zone.split("/", 1)[1]
        if start.tier is Tier.NEIGHBOUR:
            fleet.take_free(zone, gpr)
        else:
            fleet.reclaim(zone, gpr)
        run.replicas[start.index] = _Replica(zone, minute + ready_minutes(run.spec, start.tier))
    for index in look.stops:
        fleet.release(run.replicas.pop(index).zone, gpr)


def _step(
    run: _Run, fleet: ServiceFleet, scaler: Scaler, rates: NDArray[np.float64], t: int
) -> None:
    target, _ = scaler.target(ScalingMinute(run.spec, run.pool, t, rates[:t]))
    standbys = warm_target(run.spec, target) if scaler.keeps_warm else 0
    look = _look(run, fleet, target, standbys, t)
    _apply(run, fleet, look, t)
    run.series.count(look)
    run.series.looks.append(minute_look(t, run.spec.name, run.serving, look))
    run.serving = target
    models = {z.zone: z.gpu_model for z in run.zones}
    held = [Held(i, r.zone, r.ready_at <= t) for i, r in run.replicas.items()]
    zones = [h.zone for h in serving_of(target, held)]
    slot = [service_ms_on(run.spec, models[z]) for z in zones]
    run.series.minute(zones, slot, len(run.replicas), look.degraded)


def _outages(
    fleet: ServiceFleet, runs: Sequence[_Run], outages: Mapping[str, tuple[int, int]], t: int
) -> None:
    for zone, (start, end) in outages.items():
        if t == start:
            fleet.lose(zone)
            for run in runs:
                gone = [i for i, r in run.replicas.items() if r.zone == zone]
                run.series.lost += len(gone)
                for i in gone:
                    del run.replicas[i]
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
        pool = service_pool(spec, [z.gpu_model for z in allowed])
        runs.append(_Run(spec, allowed, pool, spec.min_replicas))
    training = 0.0
    for t in range(minutes):
        _outages(fleet, runs, outages or {}, t)
        for run in sorted(runs, key=lambda r: r.spec.name):  # as the autoscaler looks
            _step(run, fleet, scaler, rates[run.spec.name], t)
        fleet.settle_training(t)
        if t >= warmup:
            training += sum(fleet.training_gpus.values())
    share = training / (fleet.total_gpus * max(1, minutes - warmup))
    reports = [
        service_report(run.spec, scaler.name, run.series, rates[run.spec.name], warmup)
        for run in runs
    ]
    return reports, share
