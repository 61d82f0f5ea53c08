"""What a service replay records each minute, and the report made of it: the same for the
in-process engine and the stream engine (gpuflow/replay/service_stream.py), so they compare."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from scorer.services import Look, ServiceSpec, Tier, p99_ms_many

__all__ = ["MinuteLook", "ServiceReport", "ServiceSeries", "minute_look", "service_report"]


@dataclass(frozen=True)
class MinuteLook:
    """One scaling decision of one service: serving replicas before and after, the replicas
    wanted with the standbys, the grants ((tier, region/zone, replicas), serving replicas
    only), new replicas started (standbys too) and stopped."""

    minute: int
    service: str
    before: int
    serving: int
    wanted: int
    grants: tuple[tuple[str, str, int], ...]
    started: int
    stopped: int


def minute_look(minute: int, service: str, before: int, look: Look) -> MinuteLook:
    grants = tuple((g.tier.value, g.zone, g.count) for g in look.grants)
    return MinuteLook(
        minute,
        service,
        before,
        look.serving,
        look.wanted,
        grants,
        len(look.starts),
        len(look.stops),
    )


@dataclass
class ServiceSeries:
    """Per minute: serving replicas (loaded, below the serving count), their mean slot time,
    replicas holding GPUs, whether the look degraded, serving replicas per zone; and counts."""

    serving: list[int] = field(default_factory=list)
    slot_ms: list[float] = field(default_factory=list)
    held: list[int] = field(default_factory=list)
    degraded: list[bool] = field(default_factory=list)
    zone_minutes: list[dict[str, int]] = field(default_factory=list)
    starts: dict[str, int] = field(default_factory=lambda: {t.value: 0 for t in Tier})
    refills: int = 0
    lost: int = 0
    looks: list[MinuteLook] = field(default_factory=list)

    def count(self, look: Look) -> None:
        """The look's grants and refills into the counts."""
        for g in look.grants:
            self.starts[g.tier.value] += g.count
        self.refills += look.refills

    def minute(
        self, zones: Sequence[str], slot_ms: Sequence[float], held: int, degraded: bool
    ) -> None:
        """One judged minute: the zone and slot time of each serving replica."""
        self.serving.append(len(zones))
        here: dict[str, int] = {}
        for z in zones:
            here[z] = here.get(z, 0) + 1
        self.zone_minutes.append(here)
        self.slot_ms.append(float(np.mean(slot_ms)) if len(slot_ms) else float("nan"))
        self.held.append(held)
        self.degraded.append(degraded)


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
    looks: tuple[MinuteLook, ...] = ()  # every look, history minutes too

    @property
    def within_slo(self) -> float:
        return self.minutes_within_slo / self.minutes if self.minutes else 1.0


def _by_zone(minutes: Sequence[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for here in minutes:
        for zone, n in here.items():
            total[zone] = total.get(zone, 0) + n
    return total


def service_report(
    spec: ServiceSpec, scaler: str, s: ServiceSeries, rates: NDArray[np.float64], warmup: int
) -> ServiceReport:
    """Each scored minute judged by the M/M/c p99 of its serving replicas at its rate."""
    n = np.array(s.serving[warmup:])
    slot_ms = np.nan_to_num(np.array(s.slot_ms[warmup:]), nan=spec.service_ms)
    rate = rates[warmup : warmup + len(n)]
    p99 = np.empty(len(n))
    for ms in np.unique(slot_ms):  # one queue model per slot time (GPU model mix)
        at = slot_ms == ms
        p99[at] = p99_ms_many(rate[at], n[at] * spec.batch, float(ms))
    top = n * spec.batch * 1000.0 / slot_ms
    served = np.minimum(rate, top).sum()
    held_top = float((np.array(s.held[warmup:]) * spec.batch * 1000.0 / slot_ms).sum())
    return ServiceReport(
        service=spec.name,
        scaler=scaler,
        minutes=len(n),
        minutes_within_slo=int((p99 <= spec.slo_p99_ms).sum()),
        p99_ms=tuple(float(x) for x in p99),
        gpu_hours=float(np.sum(s.held[warmup:]) * spec.gpus_per_replica / 60.0),
        utilisation=float(served / top.sum()) if top.sum() > 0 else 0.0,
        utilisation_held=float(served / held_top) if held_top > 0 else 0.0,
        starts_by_tier=dict(s.starts),
        warm_refills=s.refills,
        lost_replicas=s.lost,
        replica_minutes_by_zone=_by_zone(s.zone_minutes[warmup:]),
        degraded_minutes=int(np.sum(s.degraded[warmup:])),
        peak_replicas=int(max(s.held[warmup:], default=0)),
        looks=tuple(s.looks),
    )
