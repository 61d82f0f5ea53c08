"""What a release and an arrival cost the worker's own code when the fleet is full and the
queue is long.

    python bench/queue_costs.py [--nodes 1000] [--jobs 6000] [--releases 40] [--arrivals 300]

Submits `--jobs` of the demo mix to one in-process Scheduler (the `gpuflow` preset, re-planning
on, no broker) without any job ending, so the fleet fills and the rest waits; then times, with
the process CPU clock, `--arrivals` more submissions (each is refused, may look for victims,
and queues) and `--releases` job ends (each retries the region's queue and may look for
moves). A pass should not cost more as the queue grows: compare runs at several `--jobs`.
Writes bench/results/queue_costs.json (or --out).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from agents import demo_fleet, generate_nodes
from agents.jobgen import generate_jobs
from bench._common import load_average, report_result
from bench.worker_costs import _scheduler
from infra.topics import JOBS_ROUTED
from streams.scheduler.core import Scheduler


def _submit(s: Scheduler, job: dict[str, Any], placed: list[tuple[str, str]]) -> None:
    pending = s.route(job, started_ns=0)
    while pending:
        msg = pending.pop(0)
        if msg.topic == JOBS_ROUTED:
            pending[:0] = s.place(msg.record, started_ns=0)
        elif msg.event == "PlacementDecision" and msg.record["outcome"] == "PLACED":
            placed.append((msg.record["job_id"], msg.record["region"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=6000, help="submitted before timing")
    ap.add_argument("--arrivals", type=int, default=300, help="timed submissions")
    ap.add_argument("--releases", type=int, default=40, help="timed job ends")
    ap.add_argument("--out", help="result file (default bench/results/queue_costs.json)")
    args = ap.parse_args()
    spec = demo_fleet()
    s = _scheduler(generate_nodes(spec, args.nodes, seed=1), replan=True)
    regions = [r.name for r in spec.regions]
    now = int(time.time() * 1000)
    total = args.jobs + args.arrivals
    jobs = [
        {**j, "event_id": f"e{i}", "ts": now}
        for i, j in enumerate(generate_jobs(total, seed=2, regions=regions, prefix="q"))
    ]
    placed: list[tuple[str, str]] = []
    started = time.process_time()
    for job in jobs[: args.jobs]:
        _submit(s, job, placed)
    fill_s = time.process_time() - started
    waiting_before = len(s.queue)
    s.preemption.search.counts.update(dict.fromkeys(s.preemption.search.counts, 0))
    started = time.process_time()
    for job in jobs[args.jobs :]:
        _submit(s, job, placed)
    arrival_ms = (time.process_time() - started) * 1000 / max(1, args.arrivals)
    search = dict(s.preemption.search.counts)  # during the timed arrivals only
    started = time.process_time()
    ended = placed[: args.releases]
    for job_id, region in ended:
        event = {"event_id": f"f{job_id}", "ts": now, "job_id": job_id, "region": region,
                 "type": "FINISHED", "node_ids": [], "progress": 1.0}  # fmt: skip
        s.on_job_event(event)
    release_ms = (time.process_time() - started) * 1000 / max(1, len(ended))
    result = {
        "nodes": args.nodes,
        "jobs_before": args.jobs,
        "running": len(s.state.jobs),
        "waiting": waiting_before,
        "fill_cpu_ms_per_job": round(fill_s * 1000 / max(1, args.jobs), 2),
        "arrival_cpu_ms": round(arrival_ms, 2),
        "release_cpu_ms": round(release_ms, 2),
        "arrival_victim_search": search,
        "load_average": load_average(),
    }
    report_result("queue_costs", result, out=args.out)


if __name__ == "__main__":
    main()
