"""Per-event CPU cost of each step the worker's own code takes, in one process, no broker.

    python bench/worker_costs.py [--nodes 1000] [--jobs 3000]

The worker's processors, stage by stage, on the demo fleet and job mix, timed with the
process CPU clock (not wall time, so other work on the machine matters little):
  router:    decode JobSubmitted -> route (rank regions) -> encode RoutedJob
  placer:    decode RoutedJob -> place (filters, scores, reserve) -> encode PlacementDecision
  lifecycle: decode JobEvent -> release + retry the region's queue
  telemetry: decode NodeTelemetry -> apply to the arrays (full snapshots, 8 GPUs)
What the broker path adds on top (Faust's event handling, aiokafka produce and fetch, commits,
changelog sends) is measured by profiling a running worker: see docs/performance/worker.md.
Writes bench/results/worker_costs.json (or --out).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from agents import SimulatedFleet, TierPolicy, demo_fleet, generate_nodes
from agents.jobgen import generate_jobs
from bench._common import report_result
from infra.topics import JOBS_ROUTED
from schemas import SingleObjectCodec
from scorer import ClusterState, make_placer
from scorer.policies import preset
from scorer.replan import ReplanConfig
from streams.runtime.fleet import FleetTracker
from streams.scheduler.core import Scheduler

CODEC = SingleObjectCodec()


class Stages:
    """CPU microseconds per call, accumulated per stage."""

    def __init__(self) -> None:
        self.cpu_s: dict[str, float] = {}
        self.calls: dict[str, int] = {}

    def run(self, name: str, step: Callable[..., Any], *args: Any) -> Any:
        started = time.process_time()
        out = step(*args)
        self.cpu_s[name] = self.cpu_s.get(name, 0.0) + time.process_time() - started
        self.calls[name] = self.calls.get(name, 0) + 1
        return out

    def us(self) -> dict[str, float]:
        return {k: round(v * 1e6 / self.calls[k], 1) for k, v in self.cpu_s.items()}


def _scheduler(nodes: list[dict[str, Any]], *, replan: bool) -> Scheduler:
    state = ClusterState()
    traits = preset("gpuflow")
    s = Scheduler(
        state, make_placer("gpuflow", state), reservations={}, queue={}, nodes={},
        partitions=4, view_ttl_s=0.2, moves={},
        replan=ReplanConfig() if replan and traits.replan else None, queue_order=traits.queue,
    )  # fmt: skip
    for n in nodes:
        s.nodes[n["node_id"]] = n
    s.rebuild({})
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--hold", type=int, default=400, help="jobs running at once, at most")
    ap.add_argument(
        "--no-replan", action="store_true", help="the preset without re-planning passes"
    )
    ap.add_argument("--out", help="result file (default bench/results/worker_costs.json)")
    args = ap.parse_args()
    spec = demo_fleet()
    nodes = generate_nodes(spec, args.nodes, seed=1)
    s = _scheduler(nodes, replan=not args.no_replan)
    regions = [r.name for r in spec.regions]
    now = int(time.time() * 1000)
    jobs = [
        {**j, "event_id": f"e{i}", "ts": now}
        for i, j in enumerate(generate_jobs(args.jobs, seed=2, regions=regions, prefix="cost"))
    ]
    t = Stages()
    live: list[tuple[str, str]] = []  # (job_id, region) placed, oldest first
    for i, job in enumerate(jobs):
        data = CODEC.encode("JobSubmitted", job)
        record = t.run("decode_JobSubmitted", lambda b: CODEC.decode(b)[1], data)
        pending = t.run("route", lambda r: s.route(r, started_ns=0), record)
        while pending:
            msg = pending.pop(0)
            if msg.topic != JOBS_ROUTED:
                t.run(f"encode_{msg.event}", CODEC.encode, msg.event, msg.record)
                if msg.event == "PlacementDecision" and msg.record["outcome"] == "PLACED":
                    live.append((msg.record["job_id"], msg.record["region"]))
                continue
            data = t.run("encode_RoutedJob", CODEC.encode, "RoutedJob", msg.record)
            routed = t.run("decode_RoutedJob", lambda b: CODEC.decode(b)[1], data)
            pending[:0] = t.run("place", lambda r: s.place(r, started_ns=0), routed)
        # jobs run ~`hold` jobs long, so the fleet stays partly busy as in a steady stream
        while len(live) > args.hold or (i == len(jobs) - 1 and live):
            job_id, region = live.pop(0)
            event = {"event_id": f"f{job_id}", "ts": now, "job_id": job_id, "region": region,
                     "type": "FINISHED", "node_ids": [], "progress": 1.0}  # fmt: skip
            data = CODEC.encode("JobEvent", event)
            decoded = t.run("decode_JobEvent", lambda b: CODEC.decode(b)[1], data)
            t.run("release_and_retry", s.on_job_event, decoded)
    fleet = SimulatedFleet(spec, nodes, seed=1, policy=TierPolicy(full_snapshot_s=1e-3))
    tracker = FleetTracker(s, stale_after_s=10.0)
    for event in fleet.telemetry_events(now):
        data = CODEC.encode("NodeTelemetry", event)
        decoded = t.run("decode_NodeTelemetry", lambda b: CODEC.decode(b)[1], data)
        t.run("apply_telemetry", tracker.on_telemetry, decoded)
    us = t.us()
    # own-code CPU per submitted job: every stage's total over the jobs (spill-overs included)
    per_job = (
        sum(v for k, v in t.cpu_s.items() if k not in ("decode_NodeTelemetry", "apply_telemetry"))
        * 1e6
        / len(jobs)
    )
    placed = t.calls.get("decode_JobEvent", 0)
    result = {
        "nodes": args.nodes,
        "replan": not args.no_replan,
        "jobs": args.jobs,
        "placed": placed,
        "queued_at_end": len(s.queue),
        "calls": t.calls,
        "cpu_us_per_call": us,
        # with the local placement (default) the RoutedJob is neither encoded nor decoded
        "cpu_us_per_job_own_code": round(per_job, 1),
        "cpu_us_per_job_own_code_without_hop": round(
            per_job
            - (t.cpu_s.get("encode_RoutedJob", 0) + t.cpu_s.get("decode_RoutedJob", 0))
            * 1e6
            / len(jobs),
            1,
        ),
        "cpu_us_per_telemetry_event_own_code": round(
            us["decode_NodeTelemetry"] + us["apply_telemetry"], 1
        ),
    }
    report_result("worker_costs", result, out=args.out)


if __name__ == "__main__":
    main()
