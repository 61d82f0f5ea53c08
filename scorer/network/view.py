"""What placement knows about the network: the link graph and the flows of placed jobs.

The placer asks `expected_gbps(src, dst, weight)`: the bandwidth a new flow could expect on the
best path, estimated as the spare capacity after the placed flows' average needs, but never
less than its weighted fair share of each link:

    per link l: max(allocatable_l - sum(need of placed flows on l), allocatable_l x w / (W_l + w))

and the smallest over the path's links. With no graph (or no path) it falls back to
`Settings.default_wan_gbps` / `default_wan_rtt_ms`, so a worker that has heard of no link
still judges a cross-region gang by a plausible WAN rather than for free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scorer.network.allocator import Flow
from scorer.network.demand import CommAssumptions
from scorer.network.links import LinkGraph, Path

__all__ = ["NetworkView", "Settings"]


@dataclass(frozen=True)
class Settings:
    """Placement knobs of the network model (docs/network.md)."""

    assumptions: CommAssumptions = field(default_factory=CommAssumptions)
    min_cross_region_efficiency: float = 0.6  # a gang crosses regions only if it keeps this
    min_tp_efficiency: float = 0.5  # tensor parallel over a node's interconnect
    default_wan_gbps: float = 10.0  # a region pair the graph does not know
    default_wan_rtt_ms: float = 100.0


@dataclass(frozen=True)
class Route:
    """A hop's expected bandwidth, RTT and price as placement sees it."""

    gbps: float
    rtt_ms: float
    cost_per_gb: float
    path: Path | None = None


class NetworkView:
    """The link graph plus the flows of jobs placed (not necessarily started yet)."""

    def __init__(self, graph: LinkGraph | None = None, settings: Settings | None = None) -> None:
        self.graph = graph if graph is not None else LinkGraph()
        self.settings = settings or Settings()
        self.placed: dict[str, tuple[Flow, ...]] = {}
        self._load: dict[str, float] = {}  # link -> sum of placed flows' needs
        self._weights: dict[str, float] = {}
        self._version = -1

    def note_placed(self, job_id: str, flows: Sequence[Flow]) -> None:
        """A job was placed with these cross-region flows (none: nothing to note)."""
        self.placed.pop(job_id, None)
        if flows:
            self.placed[job_id] = tuple(flows)
        self._version = -1

    def clear(self) -> None:
        self.placed.clear()
        self._version = -1

    def note_released(self, job_id: str) -> None:
        if self.placed.pop(job_id, None) is not None:
            self._version = -1

    def flows(self, job_id: str) -> tuple[Flow, ...]:
        return self.placed.get(job_id, ())

    def all_flows(self) -> Iterable[Flow]:
        return (f for flows in self.placed.values() for f in flows)

    def _loads(self) -> tuple[Mapping[str, float], Mapping[str, float]]:
        if self._version != self.graph.version:
            load: dict[str, float] = {}
            weights: dict[str, float] = {}
            for f in self.all_flows():
                path = self.graph.path(f.src, f.dst)
                for lid in path.links if path is not None else ():
                    load[lid] = load.get(lid, 0.0) + f.need_gbps
                    weights[lid] = weights.get(lid, 0.0) + f.weight
            self._load, self._weights = load, weights
            self._version = self.graph.version
        return self._load, self._weights

    def route(self, src: str, dst: str, weight: float = 1.0) -> Route:
        """Expected bandwidth for a new flow src -> dst (module docstring)."""
        s = self.settings
        path = self.graph.path(src, dst)
        if path is None or not path.links:
            return Route(s.default_wan_gbps, s.default_wan_rtt_ms, 0.0, None)
        load, weights = self._loads()
        gbps = float("inf")
        for lid in path.links:
            alloc = self.graph.allocatable(lid)
            spare = alloc - load.get(lid, 0.0)
            fair = alloc * weight / (weights.get(lid, 0.0) + weight)
            gbps = min(gbps, max(spare, fair))
        return Route(gbps, path.rtt_ms, path.cost_per_gb, path)
