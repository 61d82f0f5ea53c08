"""Soak: the embedded stack at a steady load for minutes; latency and memory per minute.

    python bench/soak.py [--minutes 10] [--rate 100] [--nodes 1000]

Starts the embedded broker, one worker (with its history child), a simulated fleet of
`--nodes` at 1 Hz, the executor twin and a job generator at `--rate` jobs/s, and keeps them
running for `--minutes`. Reports, per minute of submissions, the end-to-end decision latency
(JobSubmitted produced -> its first PlacementDecision consumed) p50/p99, and, per process
(broker, worker, history child, clients = this process: fleet, executor twin, generator,
decision clock), the RSS at the end of the minute and the CPU share over it.
Targets: last-minute p99 <= 1.5 x first-minute p99 and <= 1 s; RSS growth of every process
under 1 MB per minute after the first two minutes (least-squares slope of the per-minute RSS
from minute 3 on). Writes bench/results/soak.json, or `--out`.
"""

from __future__ import annotations

import argparse
import math
import os
import threading
import time
from array import array
from typing import Any

import numpy as np

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin, RecentJobs
from agents.jobgen import generate_jobs, run_jobgen
from bench._common import (
    ProcessClock,
    child_pids,
    load_average,
    percentiles,
    rss_file_mb,
    rss_mb,
    wait_worker_ready,
    write_result,
)
from bench.pipeline import DecisionClock
from gpuflow.stack import Stack
from infra.config import load_config


class LatencyClock:
    """First decision per job: (submitted ts ms, end-to-end ms), in 16 bytes a job, so this
    process's own memory does not grow with the run (a second decision of a job, QUEUED then
    PLACED, comes within seconds: a bounded window of recent ids tells them apart)."""

    def __init__(self) -> None:
        self._seen: RecentJobs[str] = RecentJobs(50_000)
        self.submitted = array("q")
        self.latency = array("d")

    def on_decision(self, received: float, d: dict[str, Any]) -> None:
        if d["job_id"] not in self._seen:
            self._seen.add(d["job_id"])
            self.submitted.append(int(d["submitted_ts"]))
            self.latency.append(received - d["submitted_ts"])


class Sampler:
    """RSS and CPU of each process every `every_s`."""

    def __init__(self, pids: dict[str, int | None], every_s: float = 5.0) -> None:
        self.pids = {k: v for k, v in pids.items() if v}
        self.every_s = every_s
        self.rows: list[dict[str, Any]] = []
        self._cpu = ProcessClock(self.pids)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            row: dict[str, Any] = {"t": time.time() * 1000, "cpu_s": self._cpu.cpu_s()}
            try:
                row["rss_mb"] = {k: round(rss_mb(p), 1) for k, p in self.pids.items()}
                row["rss_file_mb"] = {k: round(rss_file_mb(p), 1) for k, p in self.pids.items()}
            except OSError:
                return
            self.rows.append(row)


def minutes_report(
    clock: LatencyClock, samples: list[dict[str, Any]], t0: float, minutes: int
) -> list[dict[str, Any]]:
    """Per minute of submissions: latency percentiles, jobs, RSS at its end, CPU share."""
    sub = np.asarray(clock.submitted, dtype=float)
    lat = np.asarray(clock.latency, dtype=float)
    out = []
    prev_cpu: dict[str, float] | None = None
    for m in range(minutes):
        lo, hi = t0 + m * 60_000, t0 + (m + 1) * 60_000
        sel = lat[(sub >= lo) & (sub < hi)]
        p = percentiles(sel.tolist())
        inside = [s for s in samples if lo <= s["t"] < hi]
        row: dict[str, Any] = {
            "minute": m + 1,
            "jobs_decided": int(sel.size),
            "p50_ms": round(p["p50"], 1),
            "p99_ms": round(p["p99"], 1),
        }
        if inside:
            last = inside[-1]
            row["rss_mb"] = last["rss_mb"]
            row["rss_file_mb"] = last["rss_file_mb"]
            row["rss_max_mb"] = {
                k: max(s["rss_mb"][k] for s in inside if k in s["rss_mb"]) for k in last["rss_mb"]
            }
            if prev_cpu is not None:
                span_s = 60.0
                row["cpu_pct"] = {
                    k: round((last["cpu_s"][k] - prev_cpu[k]) / span_s * 100, 1)
                    for k in last["cpu_s"]
                }
            prev_cpu = last["cpu_s"]
        out.append(row)
    return out


def growth_mb_per_min(
    rows: list[dict[str, Any]], skip: int = 2, key: str = "rss_mb"
) -> dict[str, float]:
    """Least-squares slope of the per-minute RSS (`key`) of each process, after `skip` minutes."""
    tail = [r for r in rows[skip:] if key in r]
    if len(tail) < 2:
        return {}
    x = np.array([r["minute"] for r in tail], dtype=float)
    return {
        name: round(float(np.polyfit(x, [r[key][name] for r in tail], 1)[0]), 2)
        for name in tail[0][key]
    }


def offered_load(jobs: list[dict[str, Any]], nodes: list[dict[str, Any]], rate: float) -> float:
    """GPU-seconds asked per second over the fleet's GPUs (1.0: every GPU busy, on average)."""
    asked = sum(
        int(j.get("gpu_count", 1)) * int(j.get("gpu_milli", 1000)) / 1000
        * float(j["expected_duration_s"]) for j in jobs
    ) / max(1, len(jobs))  # fmt: skip
    return rate * asked / max(1, sum(int(n["gpu_count"]) for n in nodes))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=int, default=10)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument(
        "--mean-duration-s", type=float, default=20.0, help="jobs' mean expected duration"
    )
    ap.add_argument("--out", help="result file (default bench/results/soak.json)")
    args = ap.parse_args()
    spec = demo_fleet()
    config = load_config(data_dir=f"/tmp/gpuflow-soak-{time.time_ns()}")
    config = config.with_regions(r.name for r in spec.regions)
    nodes = generate_nodes(spec, args.nodes, seed=1)
    fleet = SimulatedFleet(spec, nodes, seed=1)
    regions = [r.name for r in spec.regions]
    jobs = generate_jobs(
        int(args.rate * args.minutes * 60), seed=5, regions=regions,
        mean_duration_s=args.mean_duration_s, prefix="soak",
    )  # fmt: skip
    load = offered_load(jobs, nodes, args.rate)
    print(f"offered load: {load:.2f} of the fleet's GPUs (above 1 the queue grows without end)")
    with Stack(config) as stack:
        cfg = stack.config
        stack.spawn("fleet", run_fleet, cfg, fleet)
        stack.spawn("executor", ExecutorTwin(cfg, time_scale=1.0).run)
        clock = LatencyClock()
        stack.spawn("clock", DecisionClock(cfg, clock.on_decision).run)
        worker = stack.worker.pid if stack.worker else None
        ready_s = wait_worker_ready(cfg.worker.web_host, cfg.worker.web_port, worker)
        time.sleep(2.0)
        history = child_pids(worker) if worker else []
        pids = {
            "broker": stack.broker.pid if stack.broker else None,
            "worker": worker,
            "history": history[0] if history else None,
            "clients": os.getpid(),
        }
        sampler = Sampler(pids)
        stack.spawn("sampler", sampler.run)
        t0 = time.time() * 1000
        sent = run_jobgen(cfg, jobs, rate_per_s=args.rate, stop=threading.Event())
        deadline = time.monotonic() + 30
        while len(clock.submitted) < sent and time.monotonic() < deadline:
            time.sleep(0.5)
        stack.check_worker()
        samples = list(sampler.rows)
    rows = minutes_report(clock, samples, t0, args.minutes)
    growth = growth_mb_per_min(rows)
    # the worker's horizon and the broker's retention are windows that fill before memory can
    # hold; the slope after them (and two minutes more: the jobs running at their edge, a
    # ledger save) is reported beside the target's, which counts from minute 3
    windows = math.ceil(max(config.worker.horizon_s, config.broker.retention_ms / 1000) / 60)
    after_windows = windows + 2
    first, last = rows[0]["p99_ms"], rows[-1]["p99_ms"]
    result = {
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "nodes": args.nodes,
        "mean_duration_s": args.mean_duration_s,
        "offered_load": round(load, 2),
        # the worker forgets decided jobs this long after their decision (GPUFLOW_WORKER_HORIZON_S):
        # its memory grows for this long, then holds
        "worker_horizon_s": config.worker.horizon_s,
        "broker_engine": config.broker.engine,
        "broker_retention_ms": config.broker.retention_ms,
        "jobs_submitted": sent,
        "jobs_decided": len(clock.submitted),
        "per_minute": rows,
        "first_minute_p99_ms": first,
        "last_minute_p99_ms": last,
        "p99_ratio_last_over_first": round(last / first, 2) if first else None,
        "rss_growth_mb_per_min_after_2": growth,
        "windows_filled_minute": windows,
        f"rss_growth_mb_per_min_after_{after_windows}": growth_mb_per_min(rows, after_windows),
        # the part of that growth in file-backed pages (mapped libraries faulted in as code
        # runs): still RSS, so still counted against the target above
        "rss_file_growth_mb_per_min_after_2": growth_mb_per_min(rows, key="rss_file_mb"),
        "targets": {
            "last_p99_le_1_5x_first": bool(last <= 1.5 * first),
            "last_p99_le_1000_ms": bool(last <= 1000.0),
            "rss_growth_lt_1_mb_per_min": {k: bool(v < 1.0) for k, v in growth.items()},
        },
        "worker_ready_s": ready_s,
        "load_average": load_average(),
    }
    path = write_result("soak", result, out=args.out)
    for row in rows:
        print(row)
    print({k: v for k, v in result.items() if k != "per_minute"})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
