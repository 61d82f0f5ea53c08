"""Bandwidth allocation: the flows of running jobs over the link graph, shared by policy.

Each cross-region job contributes one `Flow` per hop of its all-reduce ring (region k ->
region k+1); a flow follows `LinkGraph.path` and gets one rate on every link of it.

Policies (`AllocationPolicy.mode`):

- `elastic` (gpuflow): weighted max-min water-filling (`waterfill`) where a flow's demand
  follows its job's phase: while communicating (COMM) it may use up to `peak_gbps` (its nodes'
  NICs); while computing (COMPUTE) it asks only max(minimum, idle_gbps), so it releases
  most of its share to the flows that are communicating, and takes it back on its next COMM.
  Weights come from priority; latency-sensitive flows get `min_gbps` guaranteed.
- `equal` (the network-blind baseline): each link split equally among the flows on it, whatever
  their phase, weight or need (capped only by what a flow can push).

Flows live in slots of numpy arrays, updated per job, so a recompute does not rebuild them;
paths are looked up again only when the graph changed materially.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from scorer.network.errors import NetworkError
from scorer.network.links import LinkGraph
from scorer.network.waterfill import equal_split, waterfill

__all__ = ["MODES", "PHASES", "Allocation", "AllocationPolicy", "BandwidthAllocator", "Flow"]

_V = TypeVar("_V")
PHASES = ("COMPUTE", "COMM")
MODES = ("elastic", "equal")
_MAX_HOPS = 6


@dataclass(frozen=True)
class Flow:
    """One directed stream of a job between two regions (a hop of its all-reduce ring)."""

    job_id: str
    src: str
    dst: str
    volume_gbit: float = 0.0  # per optimizer step
    need_gbps: float = 0.0  # average rate that hides the volume behind one step's compute
    peak_gbps: float = float("inf")  # the most it can push (its nodes' NICs)
    min_gbps: float = 0.0  # guaranteed (latency-sensitive traffic)
    weight: float = 1.0
    tenant: str = ""

    def __post_init__(self) -> None:
        if not self.weight > 0:
            raise NetworkError(f"flow of {self.job_id}: weight must be > 0")
        if self.min_gbps < 0 or self.need_gbps < 0 or self.peak_gbps < 0:
            raise NetworkError(f"flow of {self.job_id}: rates must be >= 0")


@dataclass(frozen=True)
class AllocationPolicy:
    mode: str = "elastic"
    idle_gbps: float = 0.1  # what a computing job keeps: control traffic, no all-reduce

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise NetworkError(f"allocation mode {self.mode!r} is not one of {MODES}")


KEY_SHIFT = 20  # key = job index << KEY_SHIFT | link index


@dataclass(frozen=True)
class Allocation:
    """Rates summed per (job, link) as parallel arrays, sorted by key; loads per link."""

    link_ids: tuple[str, ...]
    capacity: np.ndarray  # allocatable per link
    load: np.ndarray  # granted per link
    keys: np.ndarray  # int64: job index << KEY_SHIFT | link index
    gbps: np.ndarray
    demand: np.ndarray  # what the flows asked for in their phase
    comm: np.ndarray  # bool: the job is communicating
    job_names: Sequence[str] = field(default_factory=list)  # job index -> job id
    weight: Mapping[str, float] = field(default_factory=dict)
    tenant: Mapping[str, str] = field(default_factory=dict)

    def label(self, key: int) -> tuple[str, str]:
        return self.job_names[key >> KEY_SHIFT], self.link_ids[key & ((1 << KEY_SHIFT) - 1)]

    @property
    def by_job_link(self) -> dict[tuple[str, str], float]:
        return {
            self.label(k): g for k, g in zip(self.keys.tolist(), self.gbps.tolist(), strict=True)
        }

    @property
    def phase(self) -> dict[str, str]:
        out = {}
        for k, c in zip(self.keys.tolist(), self.comm.tolist(), strict=True):
            out[self.job_names[k >> KEY_SHIFT]] = "COMM" if c else "COMPUTE"
        return out

    def capacity_of(self) -> dict[str, float]:
        return dict(zip(self.link_ids, self.capacity.tolist(), strict=True))


class BandwidthAllocator:
    """The flows of running jobs, their phases, and the policy that shares the links."""

    def __init__(self, graph: LinkGraph, policy: AllocationPolicy | None = None) -> None:
        self.graph = graph
        self.policy = policy or AllocationPolicy()
        self.flows: list[Flow | None] = []
        self._free: list[int] = []
        self._slots: dict[str, list[int]] = {}
        self.phase: dict[str, str] = {}
        n = 64
        self._w, self._peak = np.ones(n), np.zeros(n)
        self._need, self._min = np.zeros(n), np.zeros(n)
        self._comm = np.zeros(n, bool)
        self._active = np.zeros(n, bool)
        self._paths = np.full((n, _MAX_HOPS), -1, np.int64)
        self._job = np.zeros(n, np.int64)  # job index of each slot
        self._job_names: list[str] = []  # job index -> id (a restarted job gets a new index)
        self._ids: list[str] = []
        self._index: dict[str, int] = {}
        self._version = -1
        self._layout = 0  # bumps whenever flows or their paths change (not phases)
        self._shape: tuple[int, _Shape] | None = None

    # ---- jobs ------------------------------------------------------------------------------
    def set_job(self, job_id: str, flows: Sequence[Flow], phase: str = "COMM") -> None:
        """Replace a job's flows (a start, or a move); a job without flows is removed. The same
        flows again (a repeated STARTED) only set the phase: its quotas stay as they are."""
        if flows and self.flows_of(job_id) == list(flows):
            self.set_phase(job_id, phase)
            return
        self.remove(job_id)
        if not flows:
            return
        self._check_phase(phase)
        self.phase[job_id] = phase
        slots = [self._slot() for _ in flows]
        self._slots[job_id] = slots
        self._job_names.append(job_id)
        self._job[slots] = len(self._job_names) - 1
        self._layout += 1
        for slot, f in zip(slots, flows, strict=True):
            self.flows[slot] = f
            self._w[slot], self._peak[slot] = f.weight, f.peak_gbps
            self._need[slot], self._min[slot] = f.need_gbps, f.min_gbps
            self._comm[slot], self._active[slot] = phase == "COMM", True
            self._paths[slot] = self._route(f)

    def set_phase(self, job_id: str, phase: str) -> bool:
        """A job's phase changed; False when the job has no flows here."""
        self._check_phase(phase)
        slots = self._slots.get(job_id)
        if slots is None:
            return False
        self.phase[job_id] = phase
        self._comm[slots] = phase == "COMM"
        return True

    def remove(self, job_id: str) -> bool:
        slots = self._slots.pop(job_id, None)
        self.phase.pop(job_id, None)
        if slots is None:
            return False
        self._layout += 1
        for slot in slots:
            self.flows[slot] = None
            self._active[slot] = False
            self._paths[slot] = -1
            self._free.append(slot)
        return True

    def jobs(self) -> Iterable[str]:
        return self._slots.keys()

    def flows_of(self, job_id: str) -> list[Flow]:
        return [f for s in self._slots.get(job_id, ()) if (f := self.flows[s]) is not None]

    def _check_phase(self, phase: str) -> None:
        if phase not in PHASES:
            raise NetworkError(f"phase {phase!r} is not one of {PHASES}")

    def _slot(self) -> int:
        if self._free:
            return self._free.pop()
        slot = len(self.flows)
        self.flows.append(None)
        if slot >= self._w.shape[0]:
            self._grow(2 * self._w.shape[0])
        return slot

    def _grow(self, n: int) -> None:
        def grown(a: np.ndarray, fill: object) -> np.ndarray:
            out = np.full((n, *a.shape[1:]), fill, a.dtype)
            out[: a.shape[0]] = a
            return out

        self._w, self._peak = grown(self._w, 1.0), grown(self._peak, 0.0)
        self._need, self._min = grown(self._need, 0.0), grown(self._min, 0.0)
        self._comm, self._active = grown(self._comm, False), grown(self._active, False)
        self._paths = grown(self._paths, -1)
        self._job = grown(self._job, 0)

    # ---- paths -----------------------------------------------------------------------------
    def _link_index(self, lid: str) -> int:
        idx = self._index.get(lid)
        if idx is None:
            idx = self._index[lid] = len(self._ids)
            self._ids.append(lid)
        return idx

    def _route(self, f: Flow) -> np.ndarray:
        row = np.full(_MAX_HOPS, -1, np.int64)
        path = self.graph.path(f.src, f.dst)
        if path is not None:
            hops = [self._link_index(lid) for lid in path.links[:_MAX_HOPS]]
            row[: len(hops)] = hops
        return row

    def _refresh_paths(self) -> None:
        if self._version == self.graph.version:
            return
        for slot, f in enumerate(self.flows):
            if f is not None:
                self._paths[slot] = self._route(f)
        for lid in self.graph.links:
            self._link_index(lid)
        self._version = self.graph.version
        self._layout += 1

    # ---- sharing ---------------------------------------------------------------------------
    def rates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(active slots, their rates, allocatable per link) under the policy."""
        self._refresh_paths()
        cap = np.array([self._allocatable(lid) for lid in self._ids], dtype=float)
        shape = self._layout_now()
        slots, paths = shape.slots, shape.paths
        if self.policy.mode == "equal":
            rates = np.minimum(equal_split(cap, paths), self._peak[slots])
        else:
            demand = self.demand(slots)
            rates = waterfill(cap, paths, self._w[slots], demand, self._min[slots])
        return slots, rates, cap

    def demand(self, slots: np.ndarray) -> np.ndarray:
        """Elastic demand by phase: peak while communicating, a trickle while computing."""
        idle = np.maximum(self._min[slots], self.policy.idle_gbps)
        return np.where(self._comm[slots], self._peak[slots], np.minimum(idle, self._peak[slots]))

    def _allocatable(self, lid: str) -> float:
        return self.graph.allocatable(lid) if lid in self.graph.links else 0.0

    def allocate(self) -> Allocation:
        """Rates now, summed per (job, link): what the quotas should say."""
        slots, rates, cap = self.rates()
        shape = self._layout_now()
        flow, link, keys, where = shape.flow, shape.link, shape.keys, shape.where
        demand = self.demand(slots) if slots.size else np.zeros(0)
        return Allocation(
            link_ids=tuple(self._ids),
            capacity=cap,
            load=np.bincount(link, weights=rates[flow], minlength=cap.shape[0]),
            keys=keys.astype(np.int64),
            gbps=np.bincount(where, weights=rates[flow], minlength=keys.shape[0]),
            demand=np.bincount(where, weights=demand[flow], minlength=keys.shape[0]),
            comm=self._comm[slots][shape.first],
            job_names=self._job_names,
            weight=_PerJob(self, self.weight_of),
            tenant=_PerJob(self, self.tenant_of),
        )

    def _layout_now(self) -> _Shape:
        """The routed flows' slots, paths and (job, link) keys: kept until flows or paths
        change, so a round of phase changes does not sort them again."""
        if self._shape is None or self._shape[0] != self._layout:
            self._shape = (self._layout, _Shape.of(self))
        return self._shape[1]

    def weight_of(self, job_id: str) -> float:
        return max((f.weight for f in self.flows_of(job_id)), default=1.0)

    def tenant_of(self, job_id: str) -> str:
        flows = self.flows_of(job_id)
        return flows[0].tenant if flows else ""


@dataclass(frozen=True)
class _Shape:
    """Routed flows (slots, paths), their (flow, link) entries and the sorted (job, link)
    keys they sum into (`where`: each entry's key; `first`: a flow of each key)."""

    slots: np.ndarray
    paths: np.ndarray
    flow: np.ndarray
    link: np.ndarray
    keys: np.ndarray
    where: np.ndarray
    first: np.ndarray

    @classmethod
    def of(cls, a: BandwidthAllocator) -> _Shape:
        slots = np.flatnonzero(a._active[: len(a.flows)])
        paths = a._paths[slots]
        routed = (paths >= 0).any(axis=1)
        slots, paths = slots[routed], paths[routed]  # a flow with no path gets nothing
        flow, hop = np.nonzero(paths >= 0)
        link = paths[flow, hop]
        keys, where = np.unique((a._job[slots][flow] << KEY_SHIFT) | link, return_inverse=True)
        first = np.zeros(keys.shape[0], np.int64)
        first[where] = flow  # any flow of the key: a job's flows share its phase
        return cls(slots, paths, flow, link, keys.astype(np.int64), where, first)


class _PerJob(Mapping[str, _V]):
    """Per-job figures looked up only for the jobs whose quotas are emitted."""

    def __init__(self, allocator: BandwidthAllocator, get: Callable[[str], _V]) -> None:
        self._a = allocator
        self._get = get

    def __getitem__(self, job_id: str) -> _V:
        return self._get(job_id)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._a.jobs()))

    def __len__(self) -> int:
        return len(self._a.phase)
