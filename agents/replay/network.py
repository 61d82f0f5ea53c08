"""The digital twin's network: a job's step time includes its communication at the bandwidth
it is granted, so a starved link slows every job on it.

For a training job whose traffic is modelled (`scorer.network.comm_demand`) the twin's speed
on its GPUs is multiplied by

    factor = step time with all its GPUs on one node / step time as it is laid out

(the twin's durations are defined consolidated on one server). Inside a region the fabric is
not shared (non-blocking, `CommAssumptions.fabric_gbps` per node). Across regions the links
are shared, and how depends on the quota policy:

- `equal` (the network-blind baseline): each link split equally among the flows on it, all the
  time; a hop's bandwidth is the smallest of its links' shares. Analytic.
- `elastic` (gpuflow): the jobs sharing links are simulated step by step, phase by phase
  (COMPUTE, then COMM while the all-reduce runs), with the bandwidth processor's own
  allocator and quota ledger deciding every `round_s` (a phase change waits for the next
  round, as in the worker). The mean step time of each job over `steps` steps gives its factor.

`TwinNetwork.update(running)` recomputes every cross-region job's factor when the set of
running jobs changes; the twin re-rates the jobs whose factor moved.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.replay.csvio import positive, read_rows, to_float
from agents.replay.errors import TraceError
from scorer import Catalog, JobSpec, default_catalog
from scorer.network import (
    AllocationPolicy,
    BandwidthAllocator,
    CommAssumptions,
    CommDemand,
    Flow,
    Hysteresis,
    Layout,
    Link,
    LinkGraph,
    NetworkError,
    QuotaLedger,
    StepTime,
    demand_on,
    ring_hops,
)

__all__ = ["NetworkTwinConfig", "TwinNetwork", "load_links", "write_links"]

LINK_COLUMNS = ("src", "dst", "rtt_ms", "capacity_gbps")


def load_links(path: str | Path) -> tuple[Link, ...]:
    """links.csv: src, dst, rtt_ms, capacity_gbps[, cost_per_gb, used_gbps] (one direction
    per row)."""
    out: list[Link] = []
    for row in read_rows(path, LINK_COLUMNS):
        try:
            out.append(
                Link(
                    row.get("src"),
                    row.get("dst"),
                    row.required("rtt_ms", positive(to_float, strict=False)),
                    row.required("capacity_gbps", positive(to_float, strict=False)),
                    row.parse("cost_per_gb", positive(to_float, strict=False), 0.0),
                    row.parse("used_gbps", positive(to_float, strict=False), 0.0),
                )
            )
        except NetworkError as exc:
            raise row.error("src", str(exc)) from exc
    if not out:
        raise TraceError(str(path), "no links")
    return tuple(out)


def write_links(path: str | Path, links: Sequence[Link]) -> None:
    with Path(path).open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow((*LINK_COLUMNS, "cost_per_gb", "used_gbps"))
        out.writerows(
            (x.src, x.dst, x.rtt_ms, x.capacity_gbps, x.cost_per_gb, x.used_gbps) for x in links
        )


@dataclass(frozen=True)
class NetworkTwinConfig:
    mode: str = "elastic"  # elastic | equal
    round_s: float = 0.5  # the bandwidth processor's decision round
    idle_gbps: float = 0.1  # a computing job's quota demand
    hysteresis: Hysteresis = field(default_factory=Hysteresis)
    assumptions: CommAssumptions = field(default_factory=CommAssumptions)
    steps: int = 12  # measured steps per job (after `warmup`)
    warmup: int = 2
    seed: int = 0


@dataclass
class _Job:
    """One running job as the network sees it."""

    demand: CommDemand
    layout: Layout
    intra_gbs: float
    flows: list[Flow]
    single: float  # step time consolidated on one node (the twin's reference)


class TwinNetwork:
    """Per-job speed factors from the network, kept for the twin's `rate()`."""

    def __init__(
        self,
        links: Sequence[Link],
        node_regions: Mapping[str, str],
        node_gpus: Mapping[str, int],
        catalog: Catalog,
        config: NetworkTwinConfig | None = None,
    ) -> None:
        self.graph = LinkGraph(links)
        self.node_regions = dict(node_regions)
        self.node_gpus = dict(node_gpus)
        self.catalog = catalog
        self.config = config or NetworkTwinConfig()
        self.policy = AllocationPolicy(self.config.mode, self.config.idle_gbps)
        self.factors: dict[str, float] = {}
        self.sims = 0

    # ---- per job ---------------------------------------------------------------------------
    def _job(self, spec: JobSpec, model: str, gpus_by_node: Mapping[str, int]) -> _Job | None:
        a = self.config.assumptions
        demand = demand_on(spec, model, self.catalog, a)
        if demand is None:
            return None
        per: dict[str, list[int]] = {}
        for node, gpus in gpus_by_node.items():
            entry = per.setdefault(self.node_regions[node], [0, 0])
            entry[0] += gpus
            entry[1] += 1
        regions = sorted(((r, g, n) for r, (g, n) in per.items()), key=lambda t: (-t[1], t[0]))
        width = max(self.node_gpus[n] for n in gpus_by_node)
        layout = Layout(tuple(regions), gpus_per_node=width)
        spec_model = self.catalog.get(model)
        intra = spec_model.interconnect_gbs if spec_model is not None else math.inf
        one = Layout(((regions[0][0], sum(g for _, g, _ in regions), 1),), width)
        single = demand.step_time(one, intra_node_gbs=intra, assumptions=a).total
        volume = demand.ring_bytes(layout.sites) * 8e-9
        need = demand.need_gbps(layout.sites)
        nodes = {r: n for r, _, n in regions}
        flows = [
            Flow(spec.job_id, s, d, volume, need, nodes[s] * a.fabric_gbps, 0.0, demand.weight())
            for s, d in ring_hops(layout)
        ]
        return _Job(demand, layout, intra, flows, single)

    @classmethod
    def for_trace(cls, trace: Any, config: NetworkTwinConfig | None = None) -> TwinNetwork:
        """The network of a Trace (its links and nodes)."""
        return cls(
            trace.links,
            {n.node_id: n.region for n in trace.nodes},
            {n.node_id: n.gpu_count for n in trace.nodes},
            (trace.throughput.catalog if trace.throughput is not None else default_catalog()),
            config,
        )

    def factor(self, job_id: str) -> float:
        return self.factors.get(job_id, 1.0)

    def models(self, spec: JobSpec, model: str) -> bool:
        """Whether this job's traffic is modelled (else the twin's spread penalty applies)."""
        return demand_on(spec, model, self.catalog, self.config.assumptions) is not None

    def update(
        self, running: Mapping[str, tuple[JobSpec, str, Mapping[str, int]]]
    ) -> dict[str, float]:
        """Recompute factors for `running` jobs (spec, GPU model, GPUs per node); returns the
        jobs whose factor changed."""
        jobs = {j: x for j, (spec, m, g) in running.items() if (x := self._job(spec, m, g))}
        new: dict[str, float] = {}
        wide = {j: x for j, x in jobs.items() if x.layout.sites > 1}
        for j, x in jobs.items():
            if j not in wide:
                step = x.demand.step_time(x.layout, intra_node_gbs=x.intra_gbs,
                                          assumptions=self.config.assumptions)  # fmt: skip
                new[j] = x.single / step.total
        for component in self._components(wide):
            steps = self._shared_steps({j: wide[j] for j in component})
            new.update({j: wide[j].single / t for j, t in steps.items()})
        changed = {j: f for j, f in new.items() if abs(self.factors.get(j, 1.0) - f) > 1e-9}
        gone = [j for j in self.factors if j not in new]
        self.factors = new
        changed.update({j: 1.0 for j in gone})
        return changed

    def _components(self, wide: Mapping[str, _Job]) -> list[list[str]]:
        """Jobs that share a link (directly or through others) are decided together."""
        links_of = {
            j: {lid for f in x.flows for lid in (self._path(f) or ())} for j, x in wide.items()
        }
        parent = {j: j for j in wide}

        def root(j: str) -> str:
            while parent[j] != j:
                parent[j] = parent[parent[j]]
                j = parent[j]
            return j

        owner: dict[str, str] = {}
        for j, links in sorted(links_of.items()):
            for lid in links:
                if lid in owner:
                    parent[root(j)] = root(owner[lid])
                else:
                    owner[lid] = j
        groups: dict[str, list[str]] = {}
        for j in sorted(wide):
            groups.setdefault(root(j), []).append(j)
        return list(groups.values())

    def _path(self, f: Flow) -> tuple[str, ...] | None:
        path = self.graph.path(f.src, f.dst)
        return path.links if path is not None else None

    # ---- shared links ----------------------------------------------------------------------
    def _shared_steps(self, jobs: Mapping[str, _Job]) -> dict[str, float]:
        if self.config.mode == "equal":
            return self._equal_steps(jobs)
        self.sims += 1
        return _PhaseSim(self, jobs).run()

    def _equal_steps(self, jobs: Mapping[str, _Job]) -> dict[str, float]:
        allocator = BandwidthAllocator(self.graph, self.policy)
        for j, x in jobs.items():
            allocator.set_job(j, x.flows, "COMM")
        slots, rates, _ = allocator.rates()
        by_job: dict[str, float] = {}
        for slot, rate in zip(slots.tolist(), rates.tolist(), strict=True):
            f = allocator.flows[slot]
            assert f is not None
            by_job[f.job_id] = min(by_job.get(f.job_id, math.inf), rate)
        out = {}
        for j, x in jobs.items():
            step = x.demand.step_time(
                x.layout, wan_gbps=by_job.get(j, 0.0), wan_rtt_ms=self._rtt(x),
                intra_node_gbs=x.intra_gbs, assumptions=self.config.assumptions,
            )  # fmt: skip
            out[j] = step.total
        return out

    def _rtt(self, x: _Job) -> float:
        rtts = [p.rtt_ms for f in x.flows if (p := self.graph.path(f.src, f.dst)) is not None]
        return max(rtts, default=0.0)

    def fixed_part(self, x: _Job) -> tuple[float, float, float]:
        """(COMPUTE phase, the overlap window, fixed COMM time) of one step: compute, tensor
        and pipeline time run before the all-reduce, whose last `overlap` seconds hide it; the
        in-region ring and the WAN round trips add to the transfer (as `StepTime` does)."""
        a = self.config.assumptions
        d = x.demand
        no_dp: StepTime = d.step_time(
            Layout(((x.layout.regions[0][0], 1, x.layout.nodes),), x.layout.gpus_per_node),
            intra_node_gbs=x.intra_gbs, assumptions=a,
        )  # fmt: skip
        local = no_dp.compute + no_dp.tensor_parallel + no_dp.pipeline
        n = x.layout.max_nodes_in_region
        inside = 0.0
        if n > 1:
            ring = d.ring_bytes(n) * 8e-9 / a.fabric_gbps
            inside = ring + 2 * (n - 1) * a.fabric_latency_ms / 1e3
        overlap = min(local, a.overlap_share * d.micro_batch_s)
        wan = (x.layout.sites - 1) * self._rtt(x) / 1000.0
        return local - overlap, overlap, inside + wan


class _PhaseSim:
    """Jobs alternating COMPUTE and COMM on shared links, quotas decided every round."""

    def __init__(self, net: TwinNetwork, jobs: Mapping[str, _Job]) -> None:
        self.net = net
        self.jobs = dict(jobs)
        cfg = net.config
        self.allocator = BandwidthAllocator(net.graph, net.policy)
        self.ledger = QuotaLedger(cfg.hysteresis)
        self.rng = np.random.default_rng([cfg.seed, len(jobs)])
        self.parts = {j: net.fixed_part(x) for j, x in self.jobs.items()}
        self.paths = {j: [net._path(f) or () for f in x.flows] for j, x in self.jobs.items()}

    def run(self) -> dict[str, float]:
        cfg = self.net.config
        t, round_s = 0.0, cfg.round_s
        state: dict[str, dict[str, Any]] = {}
        for j, x in self.jobs.items():
            compute = self.parts[j][0]
            offset = float(self.rng.uniform(0.0, max(compute, 1e-6)))
            state[j] = {"phase": "COMPUTE", "until": offset, "left": [], "step_start": -offset,
                        "steps": [], "comm_start": 0.0, "sent": math.inf, "now": 0.0}  # fmt: skip
            state[j]["job"] = j
            self.allocator.set_job(j, x.flows, "COMPUTE")
        rates = self._round(0.0)
        next_round, dirty = round_s, False
        target = cfg.warmup + cfg.steps
        horizon = 50.0 * max(self.jobs[j].single * 20 + p[2] for j, p in self.parts.items())
        while any(len(s["steps"]) < target for s in state.values()) and t < horizon:
            nxt = min([next_round, *(self._next(state[j], rates.get(j, [])) for j in state)])
            self._advance(state, rates, nxt - t)
            t = nxt
            for j, s in state.items():
                if s["phase"] == "COMPUTE" and s["until"] <= t + 1e-12:
                    self._to_comm(j, s, t)
                    dirty = True
                elif s["phase"] == "COMM" and self._comm_done(j, s, t):
                    s["steps"].append(t - s["step_start"])
                    s["step_start"] = t
                    s["phase"], s["until"] = "COMPUTE", t + self.parts[j][0]
                    self.allocator.set_phase(j, "COMPUTE")
                    dirty = True
            if t >= next_round - 1e-12:
                if dirty:
                    rates, dirty = self._round(t), False
                next_round = t + round_s
        return {j: self._mean(s["steps"], j) for j, s in state.items()}

    def _mean(self, steps: list[float], j: str) -> float:
        measured = steps[self.net.config.warmup :] or steps
        return float(np.mean(measured)) if measured else math.inf

    def _to_comm(self, j: str, s: dict[str, Any], t: float) -> None:
        s["phase"], s["comm_start"], s["sent"] = "COMM", t, math.inf
        s["left"] = [f.volume_gbit for f in self.jobs[j].flows]
        if not any(left > 1e-9 for left in s["left"]):
            s["sent"] = t
        self.allocator.set_phase(j, "COMM")

    def _comm_done(self, j: str, s: dict[str, Any], t: float) -> bool:
        if any(left > 1e-9 for left in s["left"]):
            return False
        _, overlap, fixed = self.parts[j]
        return t + 1e-9 >= max(s["comm_start"] + overlap, s["sent"] + fixed)

    def _next(self, s: dict[str, Any], rate: list[float]) -> float:
        if s["phase"] == "COMPUTE":
            return float(s["until"])
        if any(left > 1e-9 for left in s["left"]):
            pending = [(left, r) for left, r in zip(s["left"], rate, strict=True) if left > 1e-9]
            if any(r <= 0 for _, r in pending):
                return math.inf  # waits for a quota (the next round)
            return float(s["now"] + min(left / r for left, r in pending))
        _, overlap, fixed = self.parts[s["job"]]
        return float(max(s["comm_start"] + overlap, s["sent"] + fixed))

    def _advance(self, state: dict[str, dict[str, Any]], rates: Mapping[str, list[float]],
                 dt: float) -> None:  # fmt: skip
        for j, s in state.items():
            s["now"] = s.get("now", 0.0) + dt
            if s["phase"] == "COMM":
                pairs = zip(s["left"], rates.get(j, []), strict=True)
                s["left"] = [max(0.0, left - r * dt) for left, r in pairs]
            if s["phase"] == "COMM" and not any(left > 1e-9 for left in s["left"]):
                s["sent"] = min(s["sent"], s["now"])  # the last transfer ended at this event

    def _round(self, now: float) -> dict[str, list[float]]:
        """The processor's round: allocate, pass through the ledger, rates per flow."""
        alloc = self.allocator.allocate()
        self.ledger.decide_arrays(alloc, int(now * 1000))
        keys, gbps = self.ledger.in_force_gbps
        issued = {alloc.label(k): g for k, g in zip(keys.tolist(), gbps.tolist(), strict=True)}
        out: dict[str, list[float]] = {}
        for j, paths in self.paths.items():
            out[j] = [
                min((issued.get((j, lid), 0.0) for lid in path), default=0.0) for path in paths
            ]
        return out
