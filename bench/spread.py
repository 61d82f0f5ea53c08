"""How the demo's job mix spreads over the demo fleet: placements and utilisation per region
and GPU model, on a virtual clock, through the worker's own scheduling code (no broker).

    .venv/bin/python bench/spread.py [--nodes 400] [--rate 5] [--seconds 300] [--seed 0]

Runs what `gpuflow up` runs (the demo fleet, `agents.jobgen`'s mix at `--rate` jobs/s, jobs
held for `--time-scale` of their expected duration) through `streams.scheduling.Scheduler`
with in-memory tables: route, place, spill over, queue, release. The judgement it reports is
the issue's: no region holds more than half of the placements, every GPU model runs some job.
Writes bench/results/spread.json.
"""

from __future__ import annotations

import argparse
import heapq
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from agents import demo_fleet, generate_nodes
from agents.jobgen import DEMO_MEAN_DURATION_S, generate_jobs
from bench._common import write_result
from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED
from scorer import ClusterState, make_placer
from streams.scheduler.convert import node_spec
from streams.scheduler.core import Scheduler


def _scheduler(nodes: list[dict[str, Any]], regions: list[str]) -> Scheduler:
    state = ClusterState()
    sched = Scheduler(
        state,
        make_placer("gpuflow", state),
        reservations={},
        queue={},
        nodes={},
        partitions=max(4, len(regions)),
        region_order=regions,
        view_ttl_s=0.0,
    )
    for record in nodes:
        sched.nodes[record["node_id"]] = record
        state.upsert_node(node_spec(record))
    for region in demo_fleet().regions:
        state.set_region_signal(region.name, carbon_g_per_kwh=region.carbon_g_per_kwh)
    return sched


class _Run:
    """A virtual clock: jobs arrive at `rate`, placed ones finish after their scaled duration."""

    def __init__(self, sched: Scheduler, time_scale: float) -> None:
        self.sched, self.time_scale = sched, time_scale
        self.now = 0.0
        self.due: list[tuple[float, str]] = []
        self.outcomes: Counter[str] = Counter()
        self.placed: Counter[tuple[str, str]] = Counter()
        self.held: list[tuple[tuple[str, str], float, float, float]] = []  # key, GPUs, from, to

    def handle(self, messages: list[Any]) -> None:
        while messages:
            msg = messages.pop(0)
            if msg.topic == JOBS_ROUTED:
                messages.extend(self.sched.place(msg.record, started_ns=time.perf_counter_ns()))
            elif msg.topic == DECISIONS_PLACEMENT:
                self._decided(msg.record)

    def _decided(self, d: dict[str, Any]) -> None:
        self.outcomes[d["outcome"]] += 1
        if d["outcome"] != "PLACED":
            return
        key = (d["region"], d["gpu_model"])
        self.placed[key] += 1
        held = sum(len(a["gpu_indices"]) * a["gpu_milli"] / 1000 for a in d["assignments"])
        run_s = float(d.get("expected_duration_s") or 30.0) * self.time_scale
        self.held.append((key, held, self.now, self.now + run_s))
        heapq.heappush(self.due, (self.now + run_s, d["job_id"]))

    def advance(self, until: float) -> None:
        while self.due and self.due[0][0] <= until:
            self.now, job_id = heapq.heappop(self.due)
            self.handle(self.sched.on_job_event({"type": "FINISHED", "job_id": job_id}))
        self.now = until


def run(args: argparse.Namespace) -> dict[str, Any]:
    spec = demo_fleet()
    regions = [r.name for r in spec.regions]
    nodes = generate_nodes(spec, args.nodes, args.seed)
    sched = _scheduler(nodes, regions)
    sim = _Run(sched, args.time_scale)
    n = int(args.rate * args.seconds)
    jobs = generate_jobs(
        n, seed=args.seed, prefix="spread", fleet=spec, mean_duration_s=args.mean_duration
    )
    for i, job in enumerate(jobs):
        at = i / args.rate
        for second in range(int(sim.now) + 1, int(at) + 1):  # the worker's 1 s queue sweep
            sim.advance(float(second))
            for region in regions:
                sim.handle(sched.retry_queue(region))
        sim.advance(at)
        record = {**job, "event_id": f"e{i}", "ts": int(at * 1000)}
        sim.handle(sched.route(record, started_ns=time.perf_counter_ns()))
    return _summary(sim, nodes, args.seconds)


def _summary(sim: _Run, nodes: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    gpus: Counter[tuple[str, str]] = Counter()
    for nd in nodes:
        gpus[(nd["region"], nd["gpu_model"])] += nd["gpu_count"]
    busy: dict[tuple[str, str], float] = defaultdict(float)  # GPU-seconds held in the window
    for key, held, start, end in sim.held:
        busy[key] += held * max(0.0, min(end, seconds) - start)
    total = sum(sim.placed.values()) or 1
    by_region: Counter[str] = Counter()
    for (region, _), k in sim.placed.items():
        by_region[region] += k
    rows = [
        {
            "region": r,
            "gpu_model": m,
            "gpus": g,
            "placements": sim.placed[(r, m)],
            "util_pct": round(100 * busy[(r, m)] / (g * seconds), 1),
        }
        for (r, m), g in sorted(gpus.items())
    ]
    idle = [f"{r['region']} {r['gpu_model']}" for r in rows if r["placements"] == 0]
    models = {m for _, m in gpus}
    used = {m for (_, m), k in sim.placed.items() if k}
    return {
        "outcomes": dict(sim.outcomes),
        "region_share": {r: round(k / total, 3) for r, k in sorted(by_region.items())},
        "max_region_share": round(max(by_region.values(), default=0) / total, 3),
        "models_without_jobs": sorted(models - used),
        "pools_without_jobs": idle,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=400)
    parser.add_argument("--rate", type=float, default=5.0)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--time-scale", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mean-duration", type=float, default=DEMO_MEAN_DURATION_S)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    result = run(args)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    for row in result["rows"]:
        print(f"{row['region']:<13} {row['gpu_model']:<11} {row['gpus']:>5} GPUs "
              f"{row['placements']:>5} placed  {row['util_pct']:>5.1f} %")  # fmt: skip
    print("outcomes", result["outcomes"])
    print("region share", result["region_share"], "max", result["max_region_share"])
    print("GPU models without a job:", result["models_without_jobs"] or "none")
    path = write_result("spread", {**vars(args), "out": None, **result})
    if args.out:
        args.out.write_text(path.read_text())
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
