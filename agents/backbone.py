"""A simulated inter-region backbone that behaves like a real one, reporting `LinkTelemetry`.

Each directed link has a capacity, an RTT and a price per GB (the fleet file's `rtt_ms`,
`link_capacity_gbps` and optional per-link `links:` entries). What a probe measures on it:

- **cross traffic** (`used_gbps`: traffic that is not gpuflow jobs') follows the working day
  at both ends: `quiet_util` of capacity when both regions sleep, `busy_util` when both are
  mid-afternoon (local hour 15), plus a few percent of noise;
- **congestion episodes** start at random (Poisson, `congestion_per_link_hour`) and last an
  exponential time (mean `congestion_minutes`): cross traffic jumps to `congestion_util`, loss
  to `congestion_loss_pct`, and the RTT inflates with queueing;
- **RTT** is the propagation delay x (1 + queueing), queueing = `queueing` x util / (1 - util),
  capped at 3 (bufferbloat on a busy link), plus jitter.

A `link_degraded` fault (agents/faults.py) multiplies RTT and capacity on top.

    backbone = Backbone.from_fleet(spec, rng)
    backbone.events(now_ms)              # one LinkTelemetry dict per directed link
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Backbone", "BackboneSpec", "LinkSpec", "parse_backbone"]

_MS_PER_H = 3_600_000


@dataclass(frozen=True)
class LinkSpec:
    src: str
    dst: str
    rtt_ms: float
    capacity_gbps: float
    cost_per_gb: float = 0.02

    @property
    def link_id(self) -> str:
        return f"{self.src}>{self.dst}"


@dataclass(frozen=True)
class BackboneSpec:
    """How the backbone's links behave (fleet file: `backbone:`)."""

    quiet_util: float = 0.15  # cross traffic / capacity when both ends sleep
    busy_util: float = 0.6  # ... when both ends are mid-afternoon
    noise: float = 0.03
    congestion_per_link_hour: float = 0.05  # about one episode per link every 20 hours
    congestion_minutes: float = 12.0  # mean length of an episode
    congestion_util: float = 0.96
    congestion_loss_pct: float = 2.0
    queueing: float = 0.15
    rtt_jitter: float = 0.03
    links: tuple[LinkSpec, ...] = field(default_factory=tuple)  # per-link capacity / price

    def __post_init__(self) -> None:
        for name in ("quiet_util", "busy_util", "congestion_util"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"backbone.{name}: must be in 0..1, got {getattr(self, name)}")
        if self.congestion_per_link_hour < 0 or self.congestion_minutes <= 0:
            raise ValueError("backbone: congestion rate must be >= 0 and minutes > 0")


def parse_backbone(raw: Mapping[str, object] | None) -> BackboneSpec:
    """`backbone:` of a fleet file; `links:` entries are {src, dst, capacity_gbps, cost_per_gb,
    rtt_ms} overriding the fleet-wide figures for that link (both ways unless given twice)."""
    raw = dict(raw or {})
    entries = raw.pop("links", None) or []
    links = []
    for entry in entries:  # type: ignore[attr-defined]
        e = dict(entry)
        links.append(
            LinkSpec(
                str(e["src"]),
                str(e["dst"]),
                float(e.get("rtt_ms", math.nan)),
                float(e.get("capacity_gbps", math.nan)),
                float(e.get("cost_per_gb", 0.02)),
            )
        )
    return BackboneSpec(**{k: float(v) for k, v in raw.items()}, links=tuple(links))  # type: ignore[arg-type]


def _daytime(hour: float | np.ndarray) -> float | np.ndarray:
    """0 at 03:00 local, 1 at 15:00."""
    return 0.5 + 0.5 * np.sin(2 * np.pi * (hour - 9.0) / 24.0)


class Backbone:
    """Directed links between regions, advanced by the timestamps they are asked about."""

    def __init__(
        self,
        links: Sequence[LinkSpec],
        utc_offset_h: Mapping[str, float],
        spec: BackboneSpec,
        rng: np.random.Generator,
    ) -> None:
        self.links = list(links)
        self.offsets = dict(utc_offset_h)
        self.spec = spec
        self.rng = rng
        self.congested_until: dict[str, int] = {}
        self._last_ms: int | None = None

    @classmethod
    def from_fleet(cls, fleet: object, rng: np.random.Generator) -> Backbone:
        """From a FleetSpec: its rtt_ms pairs, link capacity and `backbone` overrides."""
        spec: BackboneSpec = getattr(fleet, "backbone", BackboneSpec())
        rtt: Mapping[tuple[str, str], float] = getattr(fleet, "rtt_ms")  # noqa: B009
        capacity = float(getattr(fleet, "link_capacity_gbps"))  # noqa: B009
        override = {(o.src, o.dst): o for o in spec.links}
        override.update({(o.dst, o.src): o for o in spec.links if (o.dst, o.src) not in override})
        links = []
        for (src, dst), ms in sorted(rtt.items()):
            o = override.get((src, dst))
            links.append(
                LinkSpec(
                    src,
                    dst,
                    o.rtt_ms if o is not None and not math.isnan(o.rtt_ms) else ms,
                    o.capacity_gbps if o is not None and not math.isnan(o.capacity_gbps)
                    else capacity,
                    o.cost_per_gb if o is not None else 0.02,
                )
            )  # fmt: skip
        offsets = {r.name: r.utc_offset_h for r in getattr(fleet, "regions")}  # noqa: B009
        return cls(links, offsets, spec, rng)

    def step(self, now_ms: int) -> None:
        """Start and end congestion episodes up to `now_ms`."""
        last = self._last_ms if self._last_ms is not None else now_ms
        self._last_ms = now_ms
        hours = max(0.0, (now_ms - last) / _MS_PER_H)
        for lid, until in list(self.congested_until.items()):
            if until <= now_ms:
                del self.congested_until[lid]
        rate = self.spec.congestion_per_link_hour * hours
        if rate <= 0:
            return
        for link in self.links:
            if link.link_id in self.congested_until or self.rng.random() >= 1 - math.exp(-rate):
                continue
            minutes = self.rng.exponential(self.spec.congestion_minutes)
            self.congested_until[link.link_id] = now_ms + int(minutes * 60_000)

    def utilisation(self, link: LinkSpec, now_ms: int) -> float:
        """Cross traffic / capacity on `link` now (before noise)."""
        s = self.spec
        if link.link_id in self.congested_until:
            return s.congestion_util
        hours = now_ms / _MS_PER_H
        day = 0.5 * (
            _daytime((hours + self.offsets.get(link.src, 0.0)) % 24)
            + _daytime((hours + self.offsets.get(link.dst, 0.0)) % 24)
        )
        return float(s.quiet_util + (s.busy_util - s.quiet_util) * day)

    def events(
        self, now_ms: int, degraded: Mapping[str, tuple[float, float]] | None = None
    ) -> list[dict]:
        """One LinkTelemetry per directed link; `degraded[link_id] = (rtt_mult, cap_mult)`."""
        self.step(now_ms)
        degraded = degraded or {}
        s = self.spec
        out = []
        for link in self.links:
            rtt_mult, cap_mult = degraded.get(link.link_id, (1.0, 1.0))
            capacity = link.capacity_gbps * cap_mult
            util = self.utilisation(link, now_ms) + float(self.rng.normal(0.0, s.noise))
            util = min(0.99, max(0.0, util))
            queue = min(3.0, s.queueing * util / (1.0 - util))
            jitter = 1.0 + abs(float(self.rng.normal(0.0, s.rtt_jitter)))
            congested = link.link_id in self.congested_until
            loss = s.congestion_loss_pct * float(self.rng.uniform(0.5, 1.5)) if congested else 0.0
            out.append(
                {
                    "event_id": f"link:{link.link_id}:{now_ms}",
                    "ts": now_ms,
                    "schema": 1,
                    "link_id": link.link_id,
                    "src_region": link.src,
                    "dst_region": link.dst,
                    "rtt_ms": round(link.rtt_ms * (1.0 + queue) * jitter * rtt_mult, 2),
                    "capacity_gbps": round(capacity, 2),
                    "used_gbps": round(capacity * util, 2),
                    "loss_pct": round(loss, 3),
                }
            )
        return out
