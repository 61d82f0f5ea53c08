"""The service replay's stream engine: the same minutes through the embedded broker and a real
worker on the event clock (`gpuflow replay --services ... --engine stream`).

Each minute: the load reports of the minute before (one per service, timestamped in it), then
one look of the worker's autoscaler at the minute's start (POST /tick/); its replica jobs are
placed by the worker's scheduler, preempting training where the look took the COLD tier, and
its cancels stop replicas. The replay plays the executor (`ServiceTwin`): it carries the
decisions out and reports EVICTED, CANCELLED and FINISHED back, until nothing more is decided.
Training is mirrored into the worker as preemptible one-GPU jobs pinned to their zone, so the
worker sees the same free and reclaimable GPUs as the in-process engine's fleet. Then the
minute is judged as in process (`agents.replay.service_report`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.replay.service_fleet import FleetZone, ServiceFleet, training_demand
from agents.replay.service_report import (
    MinuteLook,
    ServiceReport,
    ServiceSeries,
    service_report,
)
from agents.replay.services import service_zones, zone_key
from agents.replay.trace import TraceJob, TraceNode, job_record, node_record
from gpuflow.replay.engine import BASE_MS
from gpuflow.replay.lockstep import Decisions
from gpuflow.replay.service_worker import ServiceWorker
from infra.servicespec import service_record
from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, SERVICES_SCALING
from scorer import default_catalog
from scorer.services import Held, ServiceSpec, Tier, ready_minutes, service_ms_on, serving_of
from streams.services.replicas import parse_replica_id

__all__ = ["NODE_GPUS", "ServiceTwin", "fleet_nodes", "replay_services_stream"]

NODE_GPUS = 8  # a zone's GPUs come as nodes of this many
_TRAIN_S = 30 * 86_400.0  # training runs until the replay stops it
_WANTED = re.compile(r"of (\d+) wanted")


def fleet_nodes(zones: Sequence[FleetZone]) -> list[TraceNode]:
    """The fleet as nodes: each zone's GPUs in nodes of `NODE_GPUS` (the last one smaller)."""
    catalog, out = default_catalog(), []
    for z in zones:
        spec = catalog.get(z.gpu_model)
        memory = spec.memory_mib if spec is not None else 81920
        for k, first in enumerate(range(0, z.gpus, NODE_GPUS)):
            count = min(NODE_GPUS, z.gpus - first)
            out.append(TraceNode(f"{z.zone}-n{k}", z.region, z.gpu_model, count, zone=z.zone,
                                 rack=f"{z.zone}-r{k}", gpu_memory_mib=memory))  # fmt: skip
    return out


@dataclass
class _Job:
    """A job the executor runs: a replica (service, index) or training (service '')."""

    job_id: str
    zone: str
    region: str
    nodes: tuple[str, ...]
    epoch: int
    service: str = ""
    index: int = 0
    ready_at: int = 0  # the minute a replica has loaded


@dataclass
class ServiceTwin:
    """The executor of a stream service replay, and the fleet's books (as in process)."""

    specs: Mapping[str, ServiceSpec]
    zones: Sequence[FleetZone]
    fleet: ServiceFleet
    jobs: dict[str, _Job] = field(default_factory=dict)
    cold: set[str] = field(default_factory=set)  # replicas placed by preempting training
    series: dict[str, ServiceSeries] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    new: dict[str, int] = field(default_factory=dict)  # replica jobs first decided this minute
    minute: int = 0
    _seq: int = 0

    def __post_init__(self) -> None:
        self.series = {name: ServiceSeries() for name in self.specs}
        self.zone_of = {n.node_id: n.zone for n in fleet_nodes(self.zones)}
        self.region_of = {z.zone: z.region for z in self.zones}
        self.model_of = {z.zone: z.gpu_model for z in self.zones}

    @property
    def now_ms(self) -> int:
        return BASE_MS + self.minute * 60_000

    # ---- the executor --------------------------------------------------------------------
    def carry(self, d: Decisions) -> list[dict[str, Any]]:
        """Carry out placements and preemptions; the JobEvents the executor reports."""
        preemptions = d.get(DECISIONS_PREEMPTION, [])
        self.cold |= {p["for_job_id"] for p in preemptions if p.get("cause") != "CANCEL"}
        for p in d.get(DECISIONS_PLACEMENT, []):
            self._placed(p)
        reports = []
        for p in preemptions:
            job = self.jobs.get(p["job_id"])
            if job is None or job.epoch != int(p.get("victim_epoch") or 0):
                continue
            kind = "CANCELLED" if p.get("cause") == "CANCEL" else "EVICTED"
            reports.append(self._end(job, kind))
        return reports

    def _placed(self, d: Mapping[str, Any]) -> None:
        job_id = str(d["job_id"])
        replica = parse_replica_id(job_id)
        if replica is not None and job_id not in self.seen:
            self.new[replica[0]] = self.new.get(replica[0], 0) + 1
        self.seen.add(job_id)
        if d["outcome"] != "PLACED":
            return
        nodes = tuple(str(a["node_id"]) for a in d["assignments"])
        zone = self.zone_of[nodes[0]]
        job = _Job(job_id, zone, self.region_of[zone], nodes, int(d.get("epoch") or 0))
        if replica is not None:
            spec = self.specs[replica[0]]
            tier = Tier.COLD if job_id in self.cold else Tier.NEIGHBOUR
            if tier is Tier.COLD:
                self.fleet.reclaim(zone, spec.gpus_per_replica)
            else:
                self.fleet.take_free(zone, spec.gpus_per_replica)
            job.service, job.index = replica[0], replica[1]
            job.ready_at = self.minute + ready_minutes(spec, tier)
        self.jobs[job_id] = job

    def _end(self, job: _Job, kind: str) -> dict[str, Any]:
        del self.jobs[job.job_id]
        if job.service:
            self.fleet.release(job.zone, self.specs[job.service].gpus_per_replica)
        return {
            "event_id": f"{job.job_id}:{kind}:{job.epoch}", "ts": self.now_ms,
            "job_id": job.job_id, "region": job.region, "type": kind,
            "node_ids": list(job.nodes), "progress": 1.0 if kind == "FINISHED" else 0.0,
            "detail": "service replay", "epoch": job.epoch,
        }  # fmt: skip

    # ---- training --------------------------------------------------------------------------
    def training(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Training brought to the fleet's settled figure per zone: (FINISHED reports for what
        it gives up, submissions for what it takes)."""
        finish, submit = [], []
        for z in self.zones:
            running = [j for j in self.jobs.values() if not j.service and j.zone == z.zone]
            want = self.fleet.training_gpus[z.zone]
            finish += [self._end(j, "FINISHED") for j in running[want:]]
            for _ in range(want - len(running)):
                self._seq += 1
                job = TraceJob(f"train-{z.zone}-{self._seq}", 0.0, 1, _TRAIN_S,
                               allowed_regions=(z.region,), checkpointable=False)  # fmt: skip
                record = job_record(job, self.now_ms)
                submit.append({**record, "allowed_zones": [zone_key(z)]})
        return finish, submit

    # ---- the minute ------------------------------------------------------------------------
    def looked(self, scaling: Sequence[Mapping[str, Any]]) -> None:
        """The minute's scaling decisions into the books."""
        for d in scaling:
            spec, s = self.specs[str(d["service"])], self.series[str(d["service"])]
            grants = tuple(
                (str(g["tier"]), str(g["zone"]), int(g["replicas"])) for g in d["grants"]
            )
            for tier, _, n in grants:
                s.starts[tier] += n
            counted = sum(n for tier, _, n in grants if tier in ("NEIGHBOUR", "COLD"))
            new = self.new.get(spec.name, 0)
            s.refills += new - counted
            wanted = _WANTED.search(str(d["reason"]))
            look = MinuteLook(self.minute, spec.name, int(d["replicas_before"]),
                              int(d["replicas_after"]), int(wanted[1]) if wanted else -1,
                              grants, new, sum(d["stopped"].values()))  # fmt: skip
            s.looks.append(look)
            self._judge(spec, s, look.serving, d["action"] == "DEGRADE")

    def _judge(self, spec: ServiceSpec, s: ServiceSeries, serving: int, degraded: bool) -> None:
        mine = [j for j in self.jobs.values() if j.service == spec.name]
        held = [Held(j.index, j.zone, j.ready_at <= self.minute) for j in mine]
        zones = [h.zone for h in serving_of(serving, held)]
        slot = [service_ms_on(spec, self.model_of[z]) for z in zones]
        s.minute(zones, slot, len(mine), degraded)


def _load(spec: ServiceSpec, minute: int, rps: float) -> dict[str, Any]:
    return {
        "event_id": f"load-{spec.name}-{minute}", "ts": BASE_MS + minute * 60_000 + 30_000,
        "schema": 1, "service": spec.name, "window_s": 60, "requests_per_s": float(rps),
        "p99_ms": None, "zone": "",
    }  # fmt: skip


def _carry(worker: ServiceWorker, twin: ServiceTwin, d: Decisions) -> None:
    """Carry decisions out, report back, until the worker decides nothing more."""
    reports = twin.carry(d)
    while reports:
        reports = twin.carry(worker.report(reports))


def replay_services_stream(
    specs: Sequence[ServiceSpec],
    rates: Mapping[str, NDArray[np.float64]],
    zones: Sequence[FleetZone],
    *,
    warmup: int = 0,
    seed: int = 0,
    data_dir: Path | None = None,
) -> tuple[list[ServiceReport], float]:
    """`agents.replay.services.replay_services` under gpuflow's scaler, through the broker
    and a worker: the same reports (their `looks` the worker's decisions) and training share."""
    for spec in specs:
        if not service_zones(spec, zones):
            raise ValueError(f"service {spec.name}: no zone of the fleet fits its regions/models")
    minutes = min(len(rates[s.name]) for s in specs)
    fleet = ServiceFleet(zones, training_demand(zones, minutes, seed))
    twin = ServiceTwin({s.name: s for s in specs}, zones, fleet)
    worker = ServiceWorker(data_dir)
    training = 0.0
    try:
        nodes = [node_record(n, BASE_MS) for n in fleet_nodes(zones)]
        worker.start(nodes, [service_record(s, now_ms=BASE_MS) for s in specs])
        for t in range(minutes):
            twin.minute = t
            if t > 0:
                worker.loads([_load(s, t - 1, rates[s.name][t - 1]) for s in specs])
            twin.new.clear()
            d = worker.look(twin.now_ms)
            _carry(worker, twin, d)
            twin.looked(d.get(SERVICES_SCALING, []))
            fleet.settle_training(t)
            finish, submit = twin.training()
            if finish:
                _carry(worker, twin, worker.report(finish))
            if submit:
                _carry(worker, twin, worker.submit(submit))
            if t >= warmup:
                training += sum(fleet.training_gpus.values())
    finally:
        worker.close()
    share = training / (fleet.total_gpus * max(1, minutes - warmup))
    reports = [
        service_report(s, "gpuflow", twin.series[s.name], rates[s.name], warmup) for s in specs
    ]
    return reports, share
