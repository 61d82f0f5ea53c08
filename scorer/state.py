"""Cluster state as numpy arrays, updated incrementally (never rebuilt per decision).

Nodes live in slots (rows); per-GPU facts are (slot, gpu) matrices. Derived per-node columns
(free whole GPUs, largest free share, most free GPUs in one NVLink island) are refreshed only
for the rows an event touches, so a decision reads them without recomputing. Beside the rows:
what each job holds (`scorer.holdings`), each region's free totals (`scorer.region_totals`);
whether a reservation fits is `scorer.reservation_check`, a region's summary `scorer.views`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from scorer.catalog import Catalog, default_catalog
from scorer.errors import ReservationError, UnknownNodeError
from scorer.holdings import Holdings
from scorer.node_rows import (
    FULL_GPU,
    SHARE_THRESHOLDS,
    Interner,
    island_ids,
    row_summary,
    sm_version,
)
from scorer.region_totals import RegionTotals
from scorer.reservation_check import reservation_need
from scorer.stacks import node_stack
from scorer.types import Assignment, NodeSpec, RegionView
from scorer.views import region_views

__all__ = ["FULL_GPU", "SHARE_THRESHOLDS", "ClusterState"]

DEFAULT_CARBON_G_PER_KWH = 400.0  # world-average grid intensity when a region sends no signal


class ClusterState:
    """Inventory, health, speed factors, grid signals and reservations of a fleet."""

    def __init__(self, catalog: Catalog | None = None, *, capacity: int = 1024, gpus: int = 8):
        self.catalog = catalog or default_catalog()
        self._region_ix, self._zone_ix, self._rack_ix = Interner(), Interner(), Interner()
        self._model_ix = Interner()
        self._stack_ix = Interner()  # software stack families (cuda, rocm, cann, ...)
        self._slot_of: dict[str, int] = {}
        self._specs: list[NodeSpec | None] = []
        self._free_slots: list[int] = []
        self._holdings = Holdings()
        self._region_slots: dict[int, np.ndarray] = {}
        self._all_slots: np.ndarray | None = None
        self._versions = 0
        self._inventory_version = 0  # bumped when a node's inventory (static columns) changes
        self.carbon = np.zeros(0)
        self.kwh_price = np.zeros(0)
        self.queue_depth: dict[str, int] = {}
        self._totals = RegionTotals(self._region_ix.index)  # kept as each row changes
        self._alloc(max(1, capacity), max(1, gpus))

    # ---- storage -------------------------------------------------------------------------
    def _alloc(self, n: int, g: int) -> None:
        self.active = np.zeros(n, bool)
        self.node_ok = np.zeros(n, bool)
        self.model = np.zeros(n, np.int32)
        self.region = np.zeros(n, np.int32)
        self.zone = np.zeros(n, np.int32)
        self.rack = np.zeros(n, np.int32)
        self.gpu_count = np.zeros(n, np.int32)
        self.gpu_memory_mib = np.zeros(n, np.int64)
        self.cpu_milli = np.zeros(n, np.int64)
        self.memory_mib = np.zeros(n, np.int64)
        self.free_cpu = np.zeros(n, np.int64)  # declared CPU minus what reservations hold
        self.free_mem = np.zeros(n, np.int64)
        self.price = np.zeros(n)
        self.stack_family = np.zeros(n, np.int32)
        self.stack_version = np.zeros(n, np.int64)  # Stack.code; 0 = unknown
        self.compute_capability = np.zeros(n)  # CUDA SM version; 0 = unknown / not CUDA
        self.gpu_exists = np.zeros((n, g), bool)
        self.gpu_ok = np.zeros((n, g), bool)
        self.free_milli = np.zeros((n, g), np.int32)
        self.perf = np.ones((n, g))
        self.island = np.zeros((n, g), np.int32)
        self.free_whole = np.zeros(n, np.int32)
        self.max_share = np.zeros(n, np.int32)
        self.island_free = np.zeros(n, np.int32)
        self.healthy_count = np.zeros(n, np.int32)
        self.free_milli_total = np.zeros(n, np.int64)
        self.perf_mean = np.ones(n)
        # per threshold T: free milli on healthy GPUs with less than T free, and GPUs with >= T
        self.share_below = np.zeros((n, SHARE_THRESHOLDS.shape[0]), np.int64)
        self.share_atleast = np.zeros((n, SHARE_THRESHOLDS.shape[0]), np.int32)
        # bumped whenever a row's free capacity or health changes (caches key on it)
        self.row_version = np.zeros(n, np.int64)

    def _grow(self, n: int, g: int) -> None:
        old = {
            k: v
            for k, v in vars(self).items()
            if isinstance(v, np.ndarray) and k not in ("carbon", "kwh_price")
        }
        self._alloc(n, g)
        for name, arr in old.items():
            if arr.ndim == 1 and name != "_all_slots":
                getattr(self, name)[: arr.shape[0]] = arr
            elif arr.ndim == 2:
                getattr(self, name)[: arr.shape[0], : arr.shape[1]] = arr
        self._all_slots = None

    def _new_slot(self, gpus: int) -> int:
        n, g = self.active.shape[0], max(self.free_milli.shape[1], gpus)
        slot = self._free_slots.pop() if self._free_slots else len(self._specs)
        if slot >= n or g > self.free_milli.shape[1]:
            self._grow(2 * n if slot >= n else n, g)
        if slot < len(self._specs):
            return slot
        self._specs.append(None)
        return slot

    def _region_index(self, region: str) -> int:
        idx = self._region_ix(region)
        if idx >= self.carbon.shape[0]:
            self.carbon = np.append(self.carbon, DEFAULT_CARBON_G_PER_KWH)
            self.kwh_price = np.append(self.kwh_price, 0.0)
            self._totals.add_region()
        return idx

    # ---- inventory -----------------------------------------------------------------------
    def upsert_node(self, node: NodeSpec) -> None:
        """Add a node or update its inventory; reservations on it are kept."""
        slot = self._slot_of.get(node.node_id)
        previous = self._specs[slot] if slot is not None else None
        if previous != node:
            self._inventory_version += 1
        if slot is None:
            slot = self._new_slot(node.gpu_count)
            self._slot_of[node.node_id] = slot
            self.node_ok[slot] = True
        elif node.gpu_count > self.free_milli.shape[1]:
            self._grow(self.active.shape[0], node.gpu_count)
        self._specs[slot] = node
        self.active[slot] = True
        self.model[slot] = self._model_ix(self.catalog.canonical(node.gpu_model))
        self.region[slot] = self._region_index(node.region)
        self.zone[slot] = self._zone_ix((node.region, node.zone))
        self.rack[slot] = self._rack_ix((node.region, node.zone, node.rack))
        self.gpu_count[slot], self.gpu_memory_mib[slot] = node.gpu_count, node.gpu_memory_mib
        self.cpu_milli[slot], self.memory_mib[slot] = node.cpu_milli, node.memory_mib
        spec = self.catalog.get(node.gpu_model)
        self.price[slot] = node.price_per_gpu_hour or (spec.price_per_gpu_hour if spec else 0.0)
        stack = node_stack(node.software_stack, spec.vendor if spec else "")
        self.stack_family[slot] = self._stack_ix(stack.family)
        self.stack_version[slot] = stack.code
        self.compute_capability[slot] = sm_version(node.compute_capability, spec)
        if previous is None or previous.gpu_count != node.gpu_count:
            self._reset_gpus(slot, node.gpu_count)
        self.island[slot, : node.gpu_count] = island_ids(node)
        self._recount_free(node.node_id)  # counts the row in its region's totals too
        self._refresh_perf(slot)  # only the inventory (and speed factors) move the mean speed
        if previous is None or previous.region != node.region:
            self._region_slots.clear()
            self._all_slots = None

    def _reset_gpus(self, slot: int, count: int) -> None:
        self.gpu_exists[slot] = False
        self.gpu_exists[slot, :count] = True
        self.gpu_ok[slot] = self.gpu_exists[slot]
        self.perf[slot] = 1.0

    def _recount_free(self, node_id: str) -> None:
        """Free milli of every GPU of a node (and its free host CPU and memory) = capacity
        minus what reservations hold."""
        slot = self._slot_of[node_id]
        free = np.where(self.gpu_exists[slot], FULL_GPU, 0).astype(np.int32)
        taken, cpu_taken, mem_taken = self._holdings.taken_on(node_id, free.shape[0])
        cpu, mem = int(self.cpu_milli[slot]) - cpu_taken, int(self.memory_mib[slot]) - mem_taken
        self.free_milli[slot] = np.maximum(free - taken, 0)
        self.free_cpu[slot], self.free_mem[slot] = max(cpu, 0), max(mem, 0)
        self._refresh(slot)

    def _bump(self, slot: int) -> None:
        """The node's row changed: caches keyed on its version are stale."""
        self._versions += 1
        self.row_version[slot] = self._versions

    def _refresh(self, slot: int) -> None:
        """The row's derived columns from its GPUs, and its part in the region totals."""
        self._bump(slot)
        r = row_summary(*(a[slot].tolist() for a in (self.gpu_exists, self.gpu_ok,
                                                        self.free_milli, self.island)))  # fmt: skip
        self.free_whole[slot], self.healthy_count[slot] = r.free_whole, r.healthy
        self.free_milli_total[slot], self.max_share[slot] = r.free_total, r.max_share
        self.share_below[slot], self.share_atleast[slot] = r.share_below, r.share_atleast
        self.island_free[slot] = r.island_free
        self._count(slot)

    def _count(self, slot: int) -> None:
        """Move the slot's free milli-GPU and GPUs into its region's totals (out when gone)."""
        if not self.active[slot]:
            self._totals.count(slot, None)
            return
        part = (int(self.region[slot]), int(self.free_milli_total[slot]),
                int(self.gpu_count[slot]), int(self.model[slot]))  # fmt: skip
        self._totals.count(slot, part)

    def free_by_model(self, region: str | None = None) -> np.ndarray:
        """Free milli-GPU of live nodes per GPU model index (in one region), as floats: kept
        as rows change, equal to summing `free_milli_total` over `slots(region)` by model."""
        return self._totals.free_by_model(region, len(self.models))

    def free_share(self, region: str | None = None) -> float:
        """Free share of the GPUs of live nodes (in one region); 1.0 where there are none.
        Kept per region as rows change, not summed over the nodes."""
        return self._totals.free_share(region)

    def _refresh_perf(self, slot: int) -> None:
        perf = self.perf[slot][self.gpu_exists[slot]]
        self.perf_mean[slot] = float(perf.mean()) if perf.size else 1.0

    def remove_node(self, node_id: str) -> None:
        """Forget a node; reservations naming it stay until released (then no-ops there)."""
        slot = self._slot_of.pop(node_id, None)
        if slot is None:
            return
        self.active[slot] = False
        self._count(slot)
        self._specs[slot] = None
        self._free_slots.append(slot)
        self._inventory_version += 1
        self._region_slots.clear()
        self._all_slots = None

    def set_gpu_health(self, node_id: str, healthy: Sequence[bool]) -> None:
        slot = self._slot(node_id)
        count = min(len(healthy), int(self.gpu_count[slot]))
        self.gpu_ok[slot, :count] = np.asarray(healthy[:count], bool)
        self._refresh(slot)

    def set_node_healthy(self, node_id: str, healthy: bool) -> None:
        slot = self._slot(node_id)
        if self.node_ok[slot] == bool(healthy):
            return  # every telemetry report says so: the node's summary stands
        self.node_ok[slot] = bool(healthy)
        self._refresh(slot)

    def set_perf_factor(self, node_id: str, factors: Sequence[float]) -> None:
        """Measured speed over nominal, per GPU (1.0 nominal, 0.7 = throttled 30 %)."""
        slot = self._slot(node_id)
        count = min(len(factors), int(self.gpu_count[slot]))
        self.perf[slot, :count] = np.clip(np.asarray(factors[:count], float), 0.0, 2.0)
        self._bump(slot)  # only the speed changed: of the summary, just its mean speed
        self._refresh_perf(slot)

    def set_region_signal(
        self,
        region: str,
        *,
        carbon_g_per_kwh: float | None = None,
        price_per_kwh: float | None = None,
    ) -> None:
        idx = self._region_index(region)
        if carbon_g_per_kwh is not None:
            self.carbon[idx] = carbon_g_per_kwh
        if price_per_kwh is not None:
            self.kwh_price[idx] = price_per_kwh

    def set_queue_depth(self, region: str, depth: int) -> None:
        self.queue_depth[region] = int(depth)

    # ---- reservations --------------------------------------------------------------------
    def reserve(self, job_id: str, assignments: Sequence[Assignment]) -> None:
        """Hold GPUs for a job, all or nothing. Re-reserving the same placement is a no-op.

        Only over-allocation is refused: health is the filters' concern, and a recovering
        worker must be able to replay reservations onto GPUs that have since gone sick.
        """
        assignments = tuple(assignments)
        held = self._holdings.get(job_id)
        if held is not None:
            if held == assignments:
                return
            raise ReservationError(f"job {job_id} already holds a different reservation")
        need = reservation_need(self, job_id, assignments)
        for (slot, gpu), milli in need.items():
            self.free_milli[slot, gpu] -= milli
        for a in assignments:
            slot = self._slot_of[a.node_id]
            self.free_cpu[slot] -= a.cpu_milli if self.cpu_milli[slot] else 0
            self.free_mem[slot] -= a.memory_mib if self.memory_mib[slot] else 0
        self._holdings.add(job_id, assignments)
        for slot in {self._slot_of[a.node_id] for a in assignments}:
            self._refresh(slot)

    def release(self, job_id: str) -> bool:
        """Give a job's GPUs back. Idempotent: False when nothing was held."""
        assignments = self._holdings.pop(job_id)
        if assignments is None:
            return False
        for node_id in {a.node_id for a in assignments}:
            if node_id in self._slot_of:
                self._recount_free(node_id)
        return True

    def reservation(self, job_id: str) -> tuple[Assignment, ...] | None:
        return self._holdings.get(job_id)

    # ---- reading -------------------------------------------------------------------------
    def _slot(self, node_id: str) -> int:
        try:
            return self._slot_of[node_id]
        except KeyError:
            raise UnknownNodeError(f"unknown node {node_id!r}") from None

    def slot_of(self, node_id: str) -> int:
        return self._slot(node_id)

    @property
    def inventory_version(self) -> int:
        """Changes whenever a node is added, removed or its inventory (model, region, memory,
        host capacity, software stack...) changes: what static filters read."""
        return self._inventory_version

    def spec(self, slot: int) -> NodeSpec:
        node = self._specs[slot]
        assert node is not None, f"slot {slot} is empty"
        return node

    def node(self, node_id: str) -> NodeSpec:
        return self.spec(self._slot(node_id))

    def slots(self, region: str | None = None) -> np.ndarray:
        """Slots of live nodes (in one region), cached until membership changes."""
        if region is None:
            if self._all_slots is None:
                self._all_slots = np.flatnonzero(self.active[: len(self._specs)])
            return self._all_slots
        idx = self._region_ix.index.get(region)
        if idx is None:
            return np.zeros(0, np.intp)
        cached = self._region_slots.get(idx)
        if cached is None:
            mask = self.active[: len(self._specs)] & (self.region[: len(self._specs)] == idx)
            cached = self._region_slots[idx] = np.flatnonzero(mask)
        return cached

    @property
    def nodes(self) -> Iterator[NodeSpec]:
        return (n for n in self._specs if n is not None)

    @property
    def regions(self) -> tuple[str, ...]:
        return self._region_ix.labels

    @property
    def models(self) -> tuple[str, ...]:
        """GPU model names by model index (catalogue names where known)."""
        return self._model_ix.labels

    @property
    def stack_families(self) -> tuple[str, ...]:
        """Software stack family names by index (`stack_family` holds these indices)."""
        return self._stack_ix.labels

    def stack_index(self, family: str) -> int | None:
        return self._stack_ix.index.get(family)

    @property
    def jobs(self) -> Mapping[str, tuple[Assignment, ...]]:
        return self._holdings.jobs

    def jobs_on(self, node_id: str) -> frozenset[str]:
        """Jobs holding GPUs on the node."""
        return self._holdings.jobs_on(node_id)

    def region_name(self, idx: int) -> str:
        return str(self._region_ix.names[idx])

    def region_index(self, region: str) -> int | None:
        return self._region_ix.index.get(region)

    def gpu_free_milli(self, node_id: str) -> tuple[int, ...]:
        slot = self._slot(node_id)
        return tuple(int(x) for x in self.free_milli[slot, : self.gpu_count[slot]])

    def free_gpus(self, region: str | None = None) -> dict[str, int]:
        """Whole free healthy GPUs by model, on healthy nodes."""
        slots = self.slots(region)
        slots = slots[self.node_ok[slots]]
        counts = np.bincount(self.model[slots], weights=self.free_whole[slots])
        return {self.models[i]: int(c) for i, c in enumerate(counts) if c > 0}

    def region_views(self) -> dict[str, RegionView]:
        """Each region's summary for the router (`scorer.views`)."""
        return region_views(self)
