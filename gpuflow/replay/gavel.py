"""The `gavel` baseline: Gavel's round-based mechanism around its max-min fairness policy
(`gavel_policy`), as a replay Decider that plays the scheduler (Narayanan et al., OSDI '20).

Every round (`ROUND_S`, 6 minutes: the engine's timer) the allocation X is recomputed when the
set of jobs changed (an LP over normalised effective throughputs), each job's priority on each
GPU model is X over the share of time it has had there, and GPUs are handed out highest
priority first. A job kept on the same model keeps its exact GPUs (its lease is renewed: no
checkpoint, no restore). Every other running job is stopped at the round's end with a fresh
checkpoint (a PreemptionDecision with `checkpoint_first`, carried out by the twin: nothing is
lost) and resumed where the round puts it (a PLACED decision: the twin charges the restore). A
gang takes GPUs of one server when one has room, else spreads (the twin charges the spread).
Jobs arriving or finishing mid-round wait for the next round, as in Gavel's simulator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuflow.replay.engine import Decided
from gpuflow.replay.gavel_policy import max_min_fairness, priorities, round_assignment
from infra.topics import DECISIONS_PLACEMENT, DECISIONS_PREEMPTION
from scorer import Catalog, JobSpec, ThroughputModel, default_catalog

__all__ = ["ROUND_S", "GavelDecider"]

ROUND_S = 360.0


@dataclass
class _Job:
    record: Mapping[str, Any]
    speeds: np.ndarray  # relative throughput per model (0: cannot run)
    scale: int
    arrived_ms: int
    received: np.ndarray  # seconds run on each model
    model: int | None = None  # where it runs now
    slices: list[tuple[str, list[int]]] = field(default_factory=list)


class GavelDecider:
    """Gavel's policy and mechanism behind the replay's Decider protocol."""

    def __init__(self, throughput: ThroughputModel | None = None, catalog: Catalog | None = None):
        self.catalog = catalog or default_catalog()
        self.throughput = (throughput or ThroughputModel(self.catalog)).with_catalog(self.catalog)
        self.models: list[str] = []
        self.nodes: dict[int, list[tuple[str, int]]] = {}  # model -> [(node, GPUs)]
        self.region: dict[str, str] = {}
        self.jobs: dict[str, _Job] = {}
        self.allocation: np.ndarray | None = None
        self.last_round_ms: int | None = None

    # ---- Decider ---------------------------------------------------------------------------
    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        for n in nodes:
            if int(n["gpu_count"]) <= 0:
                continue
            model = self.catalog.canonical(n["gpu_model"])
            if model not in self.models:
                self.models.append(model)
            m = self.models.index(model)
            self.nodes.setdefault(m, []).append((n["node_id"], int(n["gpu_count"])))
            self.region[n["node_id"]] = n["region"]

    def submit(self, record: Mapping[str, Any]) -> list[Decided]:
        spec = JobSpec.from_record(record)
        speeds = np.array([self.throughput.relative_speed(spec, m) for m in self.models])
        self.jobs[spec.job_id] = _Job(
            record, speeds, max(1, spec.gpu_count), int(record["ts"]), np.zeros(len(self.models))
        )
        self.allocation = None  # the job set changed: recompute at the next round
        return []

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        if record["type"] in ("FINISHED", "FAILED"):
            job = self.jobs.pop(record["job_id"], None)
            if job is not None and job.model is not None:
                self._account(job, int(record["ts"]))
            self.allocation = None
        return []

    def tick(self, ts_ms: int) -> list[Decided]:
        for job in self.jobs.values():
            if job.model is not None:
                self._account(job, ts_ms)
        self.last_round_ms = ts_ms
        if not self.jobs:
            return []
        ids = list(self.jobs)
        jobs = [self.jobs[j] for j in ids]
        speeds = np.array([j.speeds for j in jobs])
        scale = np.array([j.scale for j in jobs])
        capacity = np.array(
            [sum(c for _, c in self.nodes.get(m, ())) for m in range(len(self.models))]
        )
        if self.allocation is None or self.allocation.shape[0] != len(ids):
            self.allocation = max_min_fairness(speeds, scale, capacity)
        elapsed = np.array([(ts_ms - j.arrived_ms) / 1000 for j in jobs])
        received = np.array([j.received for j in jobs])
        prio = priorities(self.allocation, received, elapsed)
        current = {i: j.model for i, j in enumerate(jobs) if j.model is not None}
        chosen = round_assignment(prio, speeds, scale.tolist(), capacity.tolist(), current)
        return self._carry_out(ids, chosen, ts_ms)

    def close(self) -> None:
        return None

    # ---- mechanism -------------------------------------------------------------------------
    def _account(self, job: _Job, ts_ms: int) -> None:
        since = max(self.last_round_ms or job.arrived_ms, job.arrived_ms)
        if job.model is not None:
            job.received[job.model] += max(0.0, (ts_ms - since) / 1000)

    def _carry_out(self, ids: list[str], chosen: Mapping[int, int], ts_ms: int) -> list[Decided]:
        stop, start = [], []
        kept = {ids[i] for i, m in chosen.items() if self.jobs[ids[i]].model == m}
        for job_id in ids:
            job = self.jobs[job_id]
            if job.model is not None and job_id not in kept:
                stop.append(self._preempt(job_id, job, ts_ms))
        free = self._free_gpus(kept)
        for i, m in sorted(chosen.items()):
            job_id = ids[i]
            if job_id in kept:
                continue
            slices = _take(free[m], self.jobs[job_id].scale)
            if slices is None:
                continue  # fragmented: waits for the next round
            start.append(self._place(job_id, m, slices, ts_ms))
        return stop + start

    def _free_gpus(self, kept: set[str]) -> dict[int, dict[str, list[int]]]:
        """Per model: node -> free GPU indices once the kept jobs keep theirs."""
        free = {
            m: {node: list(range(count)) for node, count in nodes}
            for m, nodes in self.nodes.items()
        }
        for job_id in kept:
            job = self.jobs[job_id]
            for node, gpus in job.slices:
                assert job.model is not None
                free[job.model][node] = [g for g in free[job.model][node] if g not in gpus]
        return free

    def _preempt(self, job_id: str, job: _Job, ts_ms: int) -> Decided:
        node = job.slices[0][0]
        record = {
            "event_id": f"gavel-stop-{job_id}-{ts_ms}",
            "ts": ts_ms,
            "job_id": job_id,
            "for_job_id": "",
            "region": self.region[node],
            "victim_assignments": [
                {"node_id": n, "gpu_indices": g, "gpu_milli": 1000} for n, g in job.slices
            ],
            "checkpoint_first": True,
            "reason": "gavel round: lease not renewed",
        }
        job.model, job.slices = None, []
        return Decided(DECISIONS_PREEMPTION, record)

    def _place(self, job_id: str, m: int, slices: list[tuple[str, list[int]]], ts: int) -> Decided:
        job = self.jobs[job_id]
        job.model, job.slices = m, slices
        record = {
            "event_id": f"gavel-run-{job_id}-{ts}",
            "ts": ts,
            "job_id": job_id,
            "outcome": "PLACED",
            "region": self.region[slices[0][0]],
            "gpu_model": self.models[m],
            "gpu_count": job.scale,
            "assignments": [{"node_id": n, "gpu_indices": g, "gpu_milli": 1000} for n, g in slices],
            "expected_throughput": float(job.speeds[m]),
            "reasons": ["gavel round: max-min fair share"],
        }
        return Decided(DECISIONS_PLACEMENT, record)


def _take(free: dict[str, list[int]], k: int) -> list[tuple[str, list[int]]] | None:
    """k free GPUs: on the server that fits them most tightly, else spread (fullest first)."""
    fitting = [n for n, g in free.items() if len(g) >= k]
    if fitting:
        node = min(fitting, key=lambda n: (len(free[n]), n))
        gpus, free[node] = free[node][:k], free[node][k:]
        return [(node, gpus)]
    if sum(len(g) for g in free.values()) < k:
        return None
    out: list[tuple[str, list[int]]] = []
    for node in sorted(free, key=lambda n: (-len(free[n]), n)):
        take = min(k, len(free[node]))
        if take:
            out.append((node, free[node][:take]))
            free[node] = free[node][take:]
            k -= take
        if k == 0:
            break
    return out
