"""The simulated fleet: thousands of node twins producing the events real agents would.

    spec = load_fleet("demo")
    nodes = generate_nodes(spec, 1000, seed=7)
    fleet = SimulatedFleet(spec, nodes, seed=7)
    fleet.inventory_events(now_ms)      # NodeInventory dicts
    fleet.telemetry_events(now_ms)      # NodeTelemetry dicts, tiered + delta-filtered
    fleet.grid_events(now_ms); fleet.link_events(now_ms)
    fleet.inject(Fault("node_down", node_id))

Telemetry uses the same cadence and delta logic as the real agent (`agents.tiers`), with the
significant-change test vectorised over every GPU of the fleet.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from agents.backbone import Backbone
from agents.environment import diurnal_load, grid_events
from agents.errors import AgentError
from agents.faults import Fault, draw_faults
from agents.generate import generate_nodes
from agents.sim import GpuTwin, TwinGpu
from agents.spec import FleetSpec, demo_fleet, load_fleet
from agents.telemetry import gpu_sample, telemetry_event
from agents.telemetry_columns import TelemetryTick
from agents.tiers import REALTIME_FIELDS, ReportPlan, TierPolicy, TierScheduler, changed_mask

__all__ = ["Fault", "SimulatedFleet", "demo_fleet", "generate_nodes", "load_fleet"]

log = logging.getLogger(__name__)


class SimulatedFleet:
    """Twins of `nodes` (NodeInventory dicts), advanced by the timestamps they are asked for."""

    def __init__(
        self,
        spec: FleetSpec,
        nodes: Sequence[dict],
        seed: int = 0,
        *,
        policy: TierPolicy | None = None,
    ) -> None:
        self.spec = spec
        self.nodes = list(nodes)
        self.policy = policy or spec.tiers
        self.rng = np.random.default_rng(seed)
        self.backbone = Backbone.from_fleet(spec, np.random.default_rng([seed, 13]))
        counts = np.array([nd["gpu_count"] for nd in self.nodes], dtype=np.int64)
        self.gpu_start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.gpu_node = np.repeat(np.arange(len(self.nodes)), counts)
        self._has_gpus = counts > 0
        offsets = {r.name: r.utc_offset_h for r in spec.regions}
        self.node_offset_h = np.array([offsets.get(nd["region"], 0.0) for nd in self.nodes])
        self.node_load = self.rng.uniform(0.55, 1.0, len(self.nodes))
        self.twin = GpuTwin(self._twin_gpus(), self.rng)
        self._stagger = self.rng.uniform(0.0, 3600.0, len(self.nodes))
        self._sched: list[TierScheduler] = []
        self._sent = {f: np.full(self.twin.n, -1e9) for f in REALTIME_FIELDS}
        self._energy_sent = np.zeros(len(self.nodes))
        self._index = {nd["node_id"]: i for i, nd in enumerate(self.nodes)}
        self.down: dict[str, int | None] = {}  # node_id -> until_ms
        self.degraded: dict[str, Fault] = {}  # link_id -> fault
        self._last_ms: int | None = None
        self._revived: set[int] = set()
        self._pending: list[Fault] = []
        self._random_faults = any(v > 0 for k, v in vars(spec.faults).items() if "_per_" in k)

    def _twin_gpus(self) -> list[TwinGpu]:
        share = self.spec.faults.thermal_throttle_share
        out = []
        for nd in self.nodes:
            linked = {i for g in nd["nvlink_islands"] if len(g) > 1 for i in g}
            for i in range(nd["gpu_count"]):
                poor = bool(self.rng.random() < share)
                out.append(TwinGpu(nd["gpu_model"], nd["gpu_memory_mib"], i in linked, poor))
        return out

    # -- inventory, grid, links -----------------------------------------------------------
    def inventory_events(self, now_ms: int) -> list[dict]:
        """Current NodeInventory of every node that is up."""
        self._apply_pending()
        return [
            {**nd, "event_id": f"inv:{nd['node_id']}:{now_ms}", "ts": now_ms}
            for nd in self.nodes
            if nd["node_id"] not in self.down
        ]

    def grid_events(self, now_ms: int) -> list[dict]:
        return grid_events(self.spec, now_ms, self.rng)

    def link_events(self, now_ms: int) -> list[dict]:
        mults = {k: (f.rtt_mult, f.capacity_mult) for k, f in self.degraded.items()}
        return self.backbone.events(now_ms, mults)

    def region_gpu_totals(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for nd in self.nodes:
            out[nd["region"]] = out.get(nd["region"], 0) + nd["gpu_count"]
        return out

    # -- faults ---------------------------------------------------------------------------
    def inject(self, fault: Fault) -> None:
        """Start a fault at the next step (it ends at `fault.until_ms`, or on `clear`).

        Safe to call from another thread than the one publishing: faults are queued.
        """
        links = {f"{a}>{b}" for a, b in self.spec.links()}
        known = links if fault.kind == "link_degraded" else self._index
        if fault.target not in known:
            raise AgentError(f"fault {fault.kind}: unknown target {fault.target!r}")
        self._pending.append(fault)

    def _apply_pending(self) -> None:
        while self._pending:
            self._start(self._pending.pop(0))

    def _start(self, fault: Fault) -> None:
        log.info("fault injected kind=%s target=%s gpu=%s", fault.kind, fault.target, fault.gpu)
        if fault.kind == "link_degraded":
            self.degraded[fault.target] = fault
            return
        i = self._index[fault.target]
        if fault.kind == "node_down":
            self.down[fault.target] = fault.until_ms
        elif fault.kind == "gpu_lost":
            self.twin.lose(int(self.gpu_start[i]) + fault.gpu)
        else:
            self.twin.ecc_error(int(self.gpu_start[i]) + fault.gpu)

    def clear(self, fault: Fault) -> None:
        """End a fault: the link recovers, the node comes back, the GPU is reset."""
        if fault.kind == "link_degraded":
            self.degraded.pop(fault.target, None)
        elif fault.kind == "node_down":
            if self.down.pop(fault.target, "up") != "up":
                self._revived.add(self._index[fault.target])  # full snapshot on return
        else:
            self.twin.recover(int(self.gpu_start[self._index[fault.target]]) + fault.gpu)

    def _expire_faults(self, now_ms: int) -> None:
        for node, until in list(self.down.items()):
            if until is not None and until <= now_ms:
                self.clear(Fault("node_down", node))
        for f in list(self.degraded.values()):
            if f.until_ms is not None and f.until_ms <= now_ms:
                self.clear(f)

    def _draw_faults(self, now_ms: int, dt: float) -> None:
        ids = [(nd["node_id"], nd["gpu_count"]) for nd in self.nodes]
        links = [f"{a}>{b}" for a, b in self.spec.links()]
        for fault in draw_faults(self.spec.faults, ids, links, now_ms, dt, self.rng):
            self._start(fault)

    # -- telemetry ------------------------------------------------------------------------
    def step(self, now_ms: int) -> float:
        """Advance every twin to `now_ms`; returns the step in seconds."""
        dt = 1.0 if self._last_ms is None else max(0.0, min(60.0, (now_ms - self._last_ms) / 1e3))
        if self._last_ms is None:
            start = now_ms / 1000.0
            self._sched = [TierScheduler(self.policy, start, float(s)) for s in self._stagger]
        self._last_ms = now_ms
        self._apply_pending()
        self._expire_faults(now_ms)
        if dt > 0 and self._random_faults:
            self._draw_faults(now_ms, dt)
        for i in self._revived:
            self._sched[i] = TierScheduler(self.policy, now_ms / 1000.0)
        self._revived.clear()
        target = self.node_load * diurnal_load(now_ms, self.node_offset_h) / 0.9
        self.twin.step(dt, target[self.gpu_node])
        return dt

    def telemetry_events(self, now_ms: int) -> list[dict]:
        """Advance to `now_ms` and return the NodeTelemetry events due, as the agents would."""
        return self.telemetry_tick(now_ms).events()

    def telemetry_tick(self, now_ms: int) -> TelemetryTick:
        """`telemetry_events`, kept as columns (`agents.telemetry_columns`) for a fast writer."""
        self.step(now_ms)
        t = self.twin
        cur = {
            "healthy": t.healthy,
            "util_pct": t.util,
            "mem_used_mib": t.mem_used,
            "temperature_c": t.temperature,
            "perf_factor": t.perf,
        }
        changed = changed_mask(self._sent, cur, self.policy)
        for g in t.pending_xid:
            changed[g] = True
        changed_idx = np.flatnonzero(changed)
        by_node: dict[int, list[int]] = {}
        for g, nd in zip(changed_idx.tolist(), self.gpu_node[changed_idx].tolist(), strict=True):
            by_node.setdefault(nd, []).append(g - int(self.gpu_start[nd]))
        tick = TelemetryTick(now_ms, self.nodes, _columns(t))
        any_healthy = np.zeros(len(self.nodes), bool)
        if t.n:
            any_healthy[self._has_gpus] = np.logical_or.reduceat(
                t.healthy, self.gpu_start[self._has_gpus]
            )
        node_healthy = any_healthy.tolist()
        now_s = now_ms / 1000.0
        sent: list[int] = []
        for i, nd in enumerate(self.nodes):
            if self.down and nd["node_id"] in self.down:
                continue
            plan = self._sched[i].plan(now_s, by_node.get(i, ()), nd["gpu_count"])
            if plan is None:
                continue
            base = int(self.gpu_start[i])
            sent.extend(base + k for k in plan.gpu_indices)
            xids = t.pending_xid  # usually empty: skip the per-GPU lookup
            if plan.tier is not None:
                if xids and any(base + k in xids for k in plan.gpu_indices):
                    tick.extra.append(self._xid_event(tick, i, plan, node_healthy[i]))
                else:
                    tick.add(i, plan.tier, plan.full_snapshot, node_healthy[i], base,
                             plan.gpu_indices)  # fmt: skip
            tick.extra.extend(self._node_events(i, nd, now_ms, plan))
        if sent:
            idx = np.array(sent)
            for f in REALTIME_FIELDS:
                self._sent[f][idx] = cur[f][idx]
        return tick

    def _xid_event(self, tick: TelemetryTick, i: int, plan: ReportPlan, healthy: bool) -> dict:
        """Node i's real-time report carrying XIDs (rare: written as a dict, not as columns)."""
        assert plan.tier is not None
        base, nd = int(self.gpu_start[i]), self.nodes[i]
        rows = [base + k for k in plan.gpu_indices]
        cols = {f: v[rows].tolist() for f, v in tick.columns.items()}
        gpus = [gpu_sample(k, j, cols, self.twin.take_xids(base + k))
                for j, k in enumerate(plan.gpu_indices)]  # fmt: skip
        return telemetry_event(nd["node_id"], nd["region"], tick.now_ms, plan.tier,
                               plan.full_snapshot, gpus, node_healthy=healthy)  # fmt: skip

    def _node_events(self, i: int, nd: dict, now_ms: int, plan: ReportPlan) -> list[dict]:
        """The NEARLINE and SLOW reports due with `plan` (the real-time one goes as columns)."""
        node_id, region = nd["node_id"], nd["region"]
        out = []
        if plan.nearline:
            busy = float(self.twin.busy[self.gpu_start[i] : self.gpu_start[i] + nd["gpu_count"]]
                         .mean())  # fmt: skip
            r = self.rng.random(4)
            out.append(telemetry_event(
                node_id, region, now_ms, "NEARLINE", False, [],
                disk_read_mbps=round(50 + 900 * busy * r[0], 1),
                disk_write_mbps=round(10 + 300 * busy * r[1], 1),
                net_rx_mbps=round(20 + 2500 * busy * r[2], 1),
                net_tx_mbps=round(20 + 1500 * busy * r[3], 1),
            ))  # fmt: skip
        if plan.slow:
            out.append(self._slow_event(i, nd, now_ms))
        return out

    def _slow_event(self, i: int, nd: dict, now_ms: int) -> dict:
        lo, hi = int(self.gpu_start[i]), int(self.gpu_start[i]) + nd["gpu_count"]
        t = self.twin
        energy = float(t.energy_j[lo:hi].sum())
        spent, self._energy_sent[i] = energy - self._energy_sent[i], energy
        useful = float((t.util[lo:hi] / 100.0 * t.perf[lo:hi]).sum())
        draw = float((t.power[lo:hi] / t.tdp[lo:hi]).sum())
        ppw = round(useful / draw, 4) if draw > 0 else 0.0
        return telemetry_event(nd["node_id"], nd["region"], now_ms, "SLOW", False, [],
                               energy_j=round(spent, 1), perf_per_watt=ppw)  # fmt: skip


def _columns(t: GpuTwin) -> dict[str, np.ndarray]:
    """Per-GPU readings as the events carry them (rounded and typed once per tick)."""
    link = t.nvlink_mbps()
    return {
        "healthy": t.healthy.astype(bool),
        "util_pct": np.round(t.util, 1),
        "mem_used_mib": t.mem_used.astype(np.int64),
        "mem_bw_util_pct": np.round(t.util * t.job_bw, 1),
        "nvlink_tx_mbps": np.round(link, 1),
        "nvlink_rx_mbps": np.round(link * 0.97, 1),
        "temperature_c": np.round(t.temperature, 1),
        "power_w": np.round(t.power, 1),
        "sm_clock_mhz": t.clock.astype(np.int64),
        "throttle_reasons": t.throttle.astype(np.int64),
        "ecc_errors": t.ecc.astype(np.int64),
        "perf_factor": np.round(t.perf, 3),
    }
