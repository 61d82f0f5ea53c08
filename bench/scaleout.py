"""Scale-out: decisions per second and decision latency with 1, 2 and 3 workers.

    python bench/scaleout.py --workers 1,2,3 --nodes 600 --rate 200 --seconds 30

For each worker count: a fresh embedded broker, N workers of one app (six regions pinned one
to a partition, `agents/fleets/six.yaml`), a simulated fleet of `--nodes` at 1 Hz, the executor
twin, and jobs offered at `--rate` for `--seconds` (more than one worker decides here, so the
figure is the capacity, not the offered rate). Measured per run:
  * throughput: jobs with a decision / the span over which decisions arrived;
  * decision latency: submitted -> decision made (the decision's own ts), p50 / p99;
  * worker time per decision (`worker_us`, router + placer stages), p50 / p99;
  * CPU of the broker and of each worker, and the machine's load average; CPU ms per decided
    job (the fleet's telemetry included), which load on a shared machine changes far less
    than it changes jobs/s.
The history sink is off (it is measured by bench/history.py): this is the scheduler alone.
Writes bench/results/scaleout.json (and `--out FILE` if given).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from agents import SimulatedFleet, generate_nodes, load_fleet, run_fleet
from agents.executor import ExecutorTwin
from agents.jobgen import generate_jobs, run_jobgen
from bench._common import percentiles, write_result
from bench.pipeline import CpuSampler, DecisionClock
from gpuflow.stack import Stack
from infra.config import Config, load_config


def _regions_held(cfg: Config, port: int) -> set[str]:
    try:
        url = f"http://{cfg.worker.web_host}:{port}/state/"
        answer = httpx.get(url, timeout=5).json()
        return set(answer["regions"]) if answer.get("ready") else set()
    except (httpx.HTTPError, ValueError, KeyError):
        return set()


def _wait_split(stack: Stack, regions: set[str], timeout_s: float) -> float:
    """Seconds until every region is held by exactly one worker and each worker holds some."""
    started = time.monotonic()
    ports = [w.config.worker.web_port for w in stack.workers]
    while time.monotonic() - started < timeout_s:
        held = [_regions_held(stack.config, p) for p in ports]
        if all(held) and set().union(*held) == regions and sum(map(len, held)) == len(regions):
            return time.monotonic() - started
        stack.check_worker()
        time.sleep(0.5)
    raise RuntimeError(f"workers did not split the regions in {timeout_s}s")


def run_once(n_workers: int, args: Any) -> dict[str, Any]:
    spec = load_fleet("six")
    regions = [r.name for r in spec.regions]
    config = load_config(
        data_dir=f"/tmp/gpuflow-scaleout-{os.getpid()}-{n_workers}-{int(time.time())}",
        kafka={"partitions": len(regions)},
    ).with_regions(regions)
    config = dataclasses.replace(config, store=dataclasses.replace(config.store, enabled=False))
    fleet = SimulatedFleet(spec, generate_nodes(spec, args.nodes, seed=1), seed=1)
    load_before = os.getloadavg()
    with Stack(config, workers=n_workers) as stack:
        cfg = stack.config
        stack.spawn("fleet", run_fleet, cfg, fleet)
        stack.spawn("executor", ExecutorTwin(cfg, time_scale=1.0).run)
        clock = DecisionClock(cfg)
        stack.spawn("clock", clock.run)
        split_s = _wait_split(stack, set(regions), 180)
        time.sleep(3.0)  # the fleet's inventory reaches every owner
        pids = {"broker": stack.broker.pid if stack.broker else None}
        pids |= {w.name: w.pid for w in stack.workers}
        cpu = CpuSampler(pids, every_s=5.0)
        stack.spawn("cpu", cpu.run)
        n = int(args.rate * args.seconds)
        jobs = generate_jobs(n, seed=2, regions=regions, mean_duration_s=20.0, prefix="scale")
        idle_before, idle_at = _cpu_seconds(pids), time.monotonic()
        time.sleep(args.idle)  # fleet telemetry only: the fixed cost of each process
        idle_s = time.monotonic() - idle_at
        idle = {k: (v - idle_before[k]) / idle_s for k, v in _cpu_seconds(pids).items()}
        cpu_before, load_at = _cpu_seconds(pids), time.monotonic()
        t0 = time.time() * 1000
        sent = run_jobgen(cfg, jobs, rate_per_s=args.rate, stop=threading.Event())
        deadline = time.monotonic() + args.drain
        while len(clock.first) < sent and time.monotonic() < deadline:
            time.sleep(0.2)
        load_s = time.monotonic() - load_at
        cpu_used = {k: v - cpu_before[k] for k, v in _cpu_seconds(pids).items()}
        stack.check_worker()
    run = summarise(n_workers, clock, sent, t0, split_s, cpu.samples, load_before)
    run |= _cpu_figures(cpu_used, idle, load_s, max(1, run["jobs_decided"]))
    return run


def _cpu_figures(
    used: dict[str, float], idle: dict[str, float], load_s: float, decided: int
) -> dict[str, Any]:
    """CPU per decided job, all-in and above the idle (telemetry-only) rate of each process.

    CPU time is what load on a shared machine changes least: a starved process takes longer,
    not more CPU seconds, so these travel to a quiet machine far better than jobs/s do.
    """
    workers = [k for k in used if k != "broker"]
    marginal = {k: max(0.0, used[k] - idle[k] * load_s) for k in used}
    return {
        "cpu_s": {k: round(v, 2) for k, v in used.items()},
        "idle_cpu_pct": {k: round(v * 100, 1) for k, v in idle.items()},
        "worker_cpu_ms_per_job": round(sum(used[k] for k in workers) * 1000 / decided, 2),
        "broker_cpu_ms_per_job": round(used.get("broker", 0.0) * 1000 / decided, 2),
        "worker_cpu_ms_per_job_above_idle": round(
            sum(marginal[k] for k in workers) * 1000 / decided, 2
        ),
        "broker_cpu_ms_per_job_above_idle": round(marginal.get("broker", 0.0) * 1000 / decided, 2),
    }


def _cpu_seconds(pids: dict[str, int | None]) -> dict[str, float]:
    return {k: CpuSampler._cpu_s(p) for k, p in pids.items() if p}


def summarise(
    n_workers: int,
    clock: DecisionClock,
    sent: int,
    t0: float,
    split_s: float,
    cpu: list[dict[str, float]],
    load_before: tuple[float, float, float],
) -> dict[str, Any]:
    rows = list(clock.first.values())
    decided_at = [recv for recv, _ in rows]
    span_s = (max(decided_at) - t0) / 1000 if rows else float("nan")
    latency = percentiles([d["ts"] - d["submitted_ts"] for _, d in rows])
    worker = percentiles([d["worker_us"] / 1000 for _, d in rows])
    mean_cpu = {k: round(sum(s[k] for s in cpu) / len(cpu), 1) for k in (cpu[0] if cpu else {})}
    return {
        "workers": n_workers,
        "jobs_submitted": sent,
        "jobs_decided": len(rows),
        "jobs_per_s": round(len(rows) / span_s, 1),
        "decide_span_s": round(span_s, 1),
        "decision_p50_ms": round(latency["p50"], 1),
        "decision_p99_ms": round(latency["p99"], 1),
        "worker_p50_ms": round(worker["p50"], 3),
        "worker_p99_ms": round(worker["p99"], 3),
        "outcomes": clock.outcomes,
        "split_s": round(split_s, 1),
        "cpu_pct_mean": mean_cpu,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="1,2,3", help="worker counts to run, comma-separated")
    ap.add_argument("--nodes", type=int, default=600)
    ap.add_argument("--rate", type=float, default=200.0, help="jobs offered per second")
    ap.add_argument("--seconds", type=float, default=30.0, help="how long to submit")
    ap.add_argument("--drain", type=float, default=60.0, help="max wait for the backlog")
    ap.add_argument("--idle", type=float, default=15.0, help="seconds of fleet-only load first")
    ap.add_argument("--out", help="also write the result JSON here")
    args = ap.parse_args()
    runs = []
    for n in (int(x) for x in args.workers.split(",")):
        run = run_once(n, args)
        runs.append(run)
        print(json.dumps(run), flush=True)
    result = {
        "nodes": args.nodes,
        "regions": 6,
        "partitions": 6,
        "rate_offered_per_s": args.rate,
        "seconds": args.seconds,
        "history_sink": False,
        "runs": runs,
        "contended": "shared 2-core machine; see loadavg_before/after in each run",
    }
    path = write_result("scaleout", result)
    if args.out:
        Path(args.out).write_text(path.read_text())
    for run in runs:
        print(
            f"{run['workers']} worker(s): {run['jobs_per_s']} jobs/s "
            f"({run['jobs_decided']}/{run['jobs_submitted']}), decision p50 "
            f"{run['decision_p50_ms']} ms p99 {run['decision_p99_ms']} ms, worker p99 "
            f"{run['worker_p99_ms']} ms, cpu ms/job above idle: workers "
            f"{run['worker_cpu_ms_per_job_above_idle']}, broker "
            f"{run['broker_cpu_ms_per_job_above_idle']}; idle {run['idle_cpu_pct']} %, "
            f"load {run['loadavg_after']}"
        )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
