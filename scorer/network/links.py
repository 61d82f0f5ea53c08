"""Inter-region links and the backbone graph they form; path choice over it.

A `Link` is directed (`eu-west>us-east`): capacity, RTT and price per GB come from
configuration, and `LinkTelemetry` keeps RTT, capacity, background use and loss current.
`used_gbps` is traffic that is *not* gpuflow's (cross traffic: other services, replication);
what gpuflow may grant on a link is its **allocatable** bandwidth:

    allocatable = max(0, capacity x (1 - headroom) - used)

**Path metric.** Moving V gigabits from a to b over path p takes about

    T(p) = V / B(p) + RTT(p)        B(p) = smallest allocatable bandwidth on p (Gbit/s),
                                    RTT(p) = sum of the links' RTTs (s)

so the chosen path is the one with the smallest T for a reference volume (`ref_volume_gbit`,
1 GB by default; a caller may pass a job's own per-step volume): wide paths win for big
transfers, short ones for small. Congested links (utilisation or loss over the policy's bounds)
are left out whenever a path avoids them. Exact: for every bottleneck threshold b, the
lowest-RTT path over links with allocatable >= b (Dijkstra) is a candidate; the best candidate
wins (ties: fewer hops, then link ids). Paths are cached until the graph changes materially.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from scorer.network.errors import NetworkError, UnknownLinkError

__all__ = ["Link", "LinkGraph", "LinkPolicy", "Path", "link_id"]


def link_id(src: str, dst: str) -> str:
    """The id of the directed link src -> dst."""
    return f"{src}>{dst}"


@dataclass(frozen=True)
class Link:
    """One directed inter-region link."""

    src: str
    dst: str
    rtt_ms: float
    capacity_gbps: float
    cost_per_gb: float = 0.0  # USD per GB carried (egress price)
    used_gbps: float = 0.0  # measured cross traffic, not gpuflow's
    loss_pct: float = 0.0

    def __post_init__(self) -> None:
        if self.src == self.dst:
            raise NetworkError(f"link {self.link_id}: a link joins two regions")
        for name in ("rtt_ms", "capacity_gbps", "cost_per_gb", "used_gbps", "loss_pct"):
            value = getattr(self, name)
            if not value >= 0:  # also refuses NaN
                raise NetworkError(f"link {self.link_id}: {name} must be >= 0, got {value}")

    @property
    def link_id(self) -> str:
        return link_id(self.src, self.dst)

    @property
    def utilisation(self) -> float:
        return self.used_gbps / self.capacity_gbps if self.capacity_gbps > 0 else 1.0


@dataclass(frozen=True)
class LinkPolicy:
    """How links are judged."""

    headroom: float = 0.05  # share of capacity never granted (control traffic, bursts)
    congested_utilisation: float = 0.9  # cross traffic / capacity at or above: congested
    congested_loss_pct: float = 1.0
    material_change: float = 0.1  # relative change in allocatable, capacity or RTT that counts
    ref_volume_gbit: float = 8.0  # the path metric's default transfer (1 GB)
    default_cost_per_gb: float = 0.02  # a link heard of only through telemetry


@dataclass(frozen=True)
class Path:
    """A chosen route between two regions."""

    src: str
    dst: str
    links: tuple[str, ...]
    rtt_ms: float
    bottleneck_gbps: float  # smallest allocatable bandwidth along it
    cost_per_gb: float  # sum over its links
    congested: bool = False  # only congested routes exist

    def transfer_s(self, volume_gbit: float) -> float:
        """The path metric: seconds to move `volume_gbit` (inf when nothing is allocatable)."""
        if self.bottleneck_gbps <= 0:
            return float("inf")
        return volume_gbit / self.bottleneck_gbps + self.rtt_ms / 1000.0


class LinkGraph:
    """The backbone: directed links by id, kept current from telemetry."""

    def __init__(self, links: Iterable[Link] = (), policy: LinkPolicy | None = None) -> None:
        self.policy = policy or LinkPolicy()
        self.links: dict[str, Link] = {}
        self.version = 0  # bumps on every material change; paths are cached per version
        self._paths: dict[tuple[str, str, float], Path | None] = {}
        self._out: dict[str, list[str]] = {}
        for link in links:
            self.put(link)

    # ---- state -----------------------------------------------------------------------------
    def put(self, link: Link) -> bool:
        """Add or replace a link; True when the change is material (paths recomputed)."""
        old = self.links.get(link.link_id)
        self.links[link.link_id] = link
        if old is None:
            self._out.setdefault(link.src, []).append(link.link_id)
            self._out.setdefault(link.dst, [])
        material = old is None or self._material(old, link)
        if material:
            self.version += 1
            self._paths.clear()
        return material

    def observe(
        self,
        src: str,
        dst: str,
        *,
        rtt_ms: float,
        capacity_gbps: float,
        used_gbps: float = 0.0,
        loss_pct: float = 0.0,
    ) -> bool:
        """Apply one LinkTelemetry reading; True when it changed the link materially."""
        old = self.links.get(link_id(src, dst))
        cost = old.cost_per_gb if old is not None else self.policy.default_cost_per_gb
        fresh = Link(src, dst, rtt_ms, capacity_gbps, cost, used_gbps, loss_pct)
        return self.put(fresh)

    def with_capacity(self, lid: str, capacity_gbps: float) -> bool:
        return self.put(replace(self.link(lid), capacity_gbps=capacity_gbps))

    def link(self, lid: str) -> Link:
        try:
            return self.links[lid]
        except KeyError:
            raise UnknownLinkError(f"no link {lid!r}") from None

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(sorted(self._out))

    def allocatable(self, lid: str) -> float:
        link = self.link(lid)
        return max(0.0, link.capacity_gbps * (1.0 - self.policy.headroom) - link.used_gbps)

    def allocatable_all(self, ids: Iterable[str]) -> np.ndarray:
        return np.array([self.allocatable(i) for i in ids], dtype=float)

    def congested(self, lid: str) -> bool:
        link, p = self.link(lid), self.policy
        return link.utilisation >= p.congested_utilisation or link.loss_pct >= p.congested_loss_pct

    def _material(self, old: Link, new: Link) -> bool:
        p = self.policy
        if self._congested_link(old) != self._congested_link(new):
            return True

        def moved(a: float, b: float, scale: float) -> bool:
            return abs(a - b) > p.material_change * max(scale, 1e-9)

        before = max(0.0, old.capacity_gbps * (1 - p.headroom) - old.used_gbps)
        after = max(0.0, new.capacity_gbps * (1 - p.headroom) - new.used_gbps)
        return (
            moved(before, after, max(old.capacity_gbps, new.capacity_gbps))
            or moved(old.capacity_gbps, new.capacity_gbps, old.capacity_gbps)
            or moved(old.rtt_ms, new.rtt_ms, old.rtt_ms)
            or old.cost_per_gb != new.cost_per_gb
        )

    def _congested_link(self, link: Link) -> bool:
        p = self.policy
        return link.utilisation >= p.congested_utilisation or link.loss_pct >= p.congested_loss_pct

    # ---- paths -----------------------------------------------------------------------------
    def path(self, src: str, dst: str, volume_gbit: float | None = None) -> Path | None:
        """The best route src -> dst by the path metric (module docstring); None if none."""
        if src == dst:
            return Path(src, dst, (), 0.0, float("inf"), 0.0)
        volume = self.policy.ref_volume_gbit if volume_gbit is None else float(volume_gbit)
        key = (src, dst, volume)
        if key not in self._paths:
            if len(self._paths) > 65536:
                self._paths.clear()
            clear = [i for i in self.links if not self.congested(i)]
            found = self._best(src, dst, volume, clear)
            if found is None:  # every route is congested: take the best of them, flagged
                found = self._best(src, dst, volume, list(self.links))
                found = replace(found, congested=True) if found is not None else None
            self._paths[key] = found
        return self._paths[key]

    def _best(self, src: str, dst: str, volume: float, usable: list[str]) -> Path | None:
        alloc = {i: self.allocatable(i) for i in usable}
        best: tuple[float, int, tuple[str, ...]] | None = None
        for threshold in sorted({a for a in alloc.values() if a > 0}, reverse=True):
            allowed = {i for i, a in alloc.items() if a >= threshold}
            route = self._shortest(src, dst, allowed)
            if route is None:
                continue
            rtt = sum(self.links[i].rtt_ms for i in route)
            width = min(alloc[i] for i in route)
            key = (volume / width + rtt / 1000.0, len(route), route)
            if best is None or key < best:
                best = key
        if best is None:
            return None
        route = best[2]
        return Path(
            src,
            dst,
            route,
            sum(self.links[i].rtt_ms for i in route),
            min(alloc[i] for i in route),
            sum(self.links[i].cost_per_gb for i in route),
        )

    def _shortest(self, src: str, dst: str, allowed: set[str]) -> tuple[str, ...] | None:
        """Lowest-RTT route over `allowed` links (Dijkstra; ties by fewer hops, then ids)."""
        heap: list[tuple[float, int, tuple[str, ...], str]] = [(0.0, 0, (), src)]
        done: set[str] = set()
        while heap:
            rtt, hops, route, at = heapq.heappop(heap)
            if at == dst:
                return route
            if at in done:
                continue
            done.add(at)
            for lid in self._out.get(at, ()):
                link = self.links[lid]
                if lid in allowed and link.dst not in done:
                    heapq.heappush(heap, (rtt + link.rtt_ms, hops + 1, (*route, lid), link.dst))
        return None

    def rtt_ms(self) -> Mapping[tuple[str, str], float]:
        """Direct RTTs by region pair (what the router's data score reads)."""
        return {(ln.src, ln.dst): ln.rtt_ms for ln in self.links.values()}
