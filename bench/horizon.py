"""What the worker's horizon costs: a tick, a job, and heap per job remembered.

    python bench/horizon.py [--sizes 1000,20000,60000] [--ticks 50] [--nodes 1000]

A worker remembers decided jobs and released reservations for `worker.horizon_s` (600 s): at
100 jobs/s that is 60,000 of them. One in-process Scheduler (the `gpuflow` preset, re-planning
on, no broker) decides and finishes demo-mix jobs until it remembers each of `--sizes`; at each
it times `--ticks` scheduler ticks (`on_tick`, which forgets what the horizon no longer needs)
and 1,000 more jobs (submit, place, finish), with the process CPU clock. Neither should cost
more as more is remembered. Then, with tracemalloc, the heap each finished job keeps while the
horizon remembers it. Writes bench/results/horizon.json (or --out).
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from itertools import islice
from typing import Any

from agents import demo_fleet, generate_nodes
from agents.jobgen import generate_jobs
from bench._common import load_average, report_result
from bench.queue_costs import _submit
from bench.worker_costs import _scheduler
from streams.scheduler.core import Scheduler

_TIMED = 1000  # jobs timed at each size


def _cycle(s: Scheduler, jobs: list[dict[str, Any]], now: int) -> None:
    """Decide each job and finish it at once: it is then only remembered."""
    for job in jobs:
        placed: list[tuple[str, str]] = []
        _submit(s, job, placed)
        for job_id, region in placed:
            event = {"event_id": f"f{job_id}", "ts": now, "job_id": job_id, "region": region,
                     "type": "FINISHED", "node_ids": [], "progress": 1.0}  # fmt: skip
            s.on_job_event(event)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,20000,60000", help="jobs remembered when timed")
    ap.add_argument("--ticks", type=int, default=50, help="ticks timed at each size")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--out", help="result file (default bench/results/horizon.json)")
    args = ap.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    spec = demo_fleet()
    s = _scheduler(generate_nodes(spec, args.nodes, seed=1), replan=True)
    regions = [r.name for r in spec.regions]
    now = int(time.time() * 1000)
    total = sizes[-1] + _TIMED * (len(sizes) + 1)
    jobs = [
        {**j, "event_id": f"e{i}", "ts": now, "gpu_count": 1}  # every job fits: none waits
        for i, j in enumerate(generate_jobs(total, seed=3, regions=regions, prefix="h"))
    ]
    unused = iter(jobs)
    rows = []
    for size in sizes:
        _cycle(s, list(islice(unused, max(0, size - len(s.final)))), now)
        remembered, held = len(s.final), len(s.reservations)
        started = time.process_time()
        for _ in range(args.ticks):
            s.on_tick(now)
        tick_ms = (time.process_time() - started) * 1000 / args.ticks
        started = time.process_time()
        _cycle(s, list(islice(unused, _TIMED)), now)
        job_ms = (time.process_time() - started) * 1000 / _TIMED
        rows.append({"remembered": remembered, "reservations": held,
                     "tick_cpu_ms": round(tick_ms, 3), "job_cpu_ms": round(job_ms, 3)})  # fmt: skip
        print(rows[-1])
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    _cycle(s, list(islice(unused, _TIMED)), now)
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    kept = sum(d.size_diff for d in after.compare_to(before, "filename"))
    result = {
        "nodes": args.nodes,
        "ticks": args.ticks,
        "by_remembered": rows,
        "heap_bytes_per_finished_job": round(kept / _TIMED),
        "load_average": load_average(),
    }
    report_result("horizon", result, out=args.out)


if __name__ == "__main__":
    main()
