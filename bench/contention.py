"""Contention: one mixed-priority, multi-tenant workload on the digital twin, run with and without
preemption, quotas and backfill.

    .venv/bin/python bench/contention.py [--hours 12] [--seed 0] [--tick-s 30] [--jobs N]
                                         [--only NAME ...] [--out FILE]

Cluster: one region of 16 servers x 8 A100-80 (128 GPUs; 128 cores, 1 TiB each). Three tenants
with the same fair-share weight, in one cohort, each with nominal quota of a third of the GPUs
(42/43/43) and no borrowing limit:
  - research: training gangs of 1-16 GPUs, 1-6 h, checkpoints every 30 min; a fifth of them
    urgent-training, the rest batch;
  - product: fine-tunes and evaluation, 1-2 GPUs, 20 min-2 h, checkpoints every 20 min; a third
    best-effort, the rest batch;
  - serving: online-inference deployments, 1-4 GPUs, 20-90 min, never preempted, at twice
    the rate in two daily peaks (9-12 h, 18-21 h).
Arrivals are Poisson over `--hours`, each tenant's rate set for an offered GPU demand of 0.7
(research), 0.5 (product) and 0.2 (serving, outside its peaks) of the cluster (the realized
load of a seed is in the result: big gangs make it vary); then the queue drains. Host CPU and
memory scale with a job's GPUs up to a node's per-GPU share (see `_job`). Durations are
reference seconds on a V100-16; the twin runs them on the A100s at the throughput model's
speed ratio (roofline: ~1.24x for these FP32 training jobs, ~2.27x for inference), which the
offered load accounts for.

Runs (same trace, in-process engine = the worker's scheduler code, timer every `--tick-s`):
  all            preemption + quotas + backfill
  no-preemption  quotas + backfill
  no-quotas      preemption + backfill (fair order still DRF)
  none           no preemption, no quotas, no backfill
and `all` and `no-preemption` once more with the quotas sized to demand (serving's nominal
covering its peak offered load, the others splitting the rest) instead of equal thirds.
Reported per run: p50/p99 wait of high-priority jobs (online-inference and urgent-training),
each tenant's GPU-hour share against its DRF share while it has demand, GPU allocation over the
arrival window, GPU-hours lost to eviction (work discarded) against GPU-hours used, preemptions
per hour. Targets (issue 11): p99 high-priority wait >= 5x lower with preemption (all vs
no-preemption); every tenant within 10 % of its DRF share (all); allocation of all >= that of
no-quotas; lost GPU-hours < 3 % of the total (all).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents.replay.trace import Trace, TraceJob, TraceNode, job_record
from bench._common import machine, percentiles, write_result
from bench._contention_targets import targets
from gpuflow.replay.engine import ReplayResult, run_replay
from gpuflow.replay.inprocess import InProcessDecider
from gpuflow.replay.summary import time_weighted_alloc
from scorer import JobSpec, ThroughputModel, default_catalog
from scorer.tenancy import drf_allocation, parse_policy

NODES, GPUS_PER_NODE = 16, 8
CPU_MILLI, MEMORY_MIB = 128_000, 1_048_576
TENANTS = ("research", "product", "serving")
HIGH = ("online-inference", "urgent-training")
PEAK = 2.0  # serving's arrival rate in its two daily peaks, times its base rate


def cluster() -> tuple[TraceNode, ...]:
    spec = default_catalog()["A100-80"]

    def server(i: int) -> TraceNode:
        return TraceNode(
            f"a100-{i:02d}", "r1", spec.name, GPUS_PER_NODE, "z1", f"rack{i // 4}", CPU_MILLI,
            MEMORY_MIB, spec.price_per_gpu_hour, spec.interconnect, spec.memory_mib,
        )  # fmt: skip

    return tuple(server(i) for i in range(NODES))


HOST_CAP = (CPU_MILLI // GPUS_PER_NODE, MEMORY_MIB // GPUS_PER_NODE)  # per job, per node


def _job(
    gpus: int, hours: float, cls: str, checkpoint_s: int, cpu: int, mem_gib: int
) -> dict[str, Any]:
    """A job's shape. Host CPU (milli) and memory scale with its GPUs but stop at a node's
    per-GPU share: the twin asks them on every node of a gang, and the scheduler checks them
    against node size only (it does not reserve them), so larger asks would leave placed gangs
    blocked on host resources while holding GPUs. Capped, hosts never bind before GPUs."""
    return {"num_gpus": gpus, "duration_s": hours * 3600, "priority_class": cls,
            "checkpoint_interval_s": checkpoint_s, "cpu_milli": min(cpu * gpus, HOST_CAP[0]),
            "memory_mib": min(mem_gib * 1024 * gpus, HOST_CAP[1])}  # fmt: skip


def _research(rng: np.random.Generator) -> dict[str, Any]:
    gpus = int(rng.choice((1, 2, 4, 8, 16), p=(0.3, 0.2, 0.25, 0.2, 0.05)))
    cls = "urgent-training" if rng.random() < 0.2 else "batch"
    return _job(gpus, float(rng.uniform(1, 6)), cls, 1800, 2000, 16)


def _product(rng: np.random.Generator) -> dict[str, Any]:
    gpus = int(rng.choice((1, 2), p=(0.7, 0.3)))
    cls = "best-effort" if rng.random() < 1 / 3 else "batch"
    return _job(gpus, float(rng.uniform(1 / 3, 2)), cls, 1200, 4000, 32)


def _serving(rng: np.random.Generator) -> dict[str, Any]:
    gpus = int(rng.choice((1, 2, 4), p=(0.5, 0.3, 0.2)))
    job = _job(gpus, float(rng.uniform(1 / 3, 1.5)), "online-inference", 0, 2000, 16)
    return {**job, "kind": "INFERENCE"}


MIX = {"research": (_research, 0.7), "product": (_product, 0.5), "serving": (_serving, 0.2)}


def _a100_gpu_hours(tenant: str, shape: dict[str, Any]) -> float:
    """GPU-hours a job needs on an A100-80, at the speed the twin runs it (the throughput model's
    ratio to the V100-16 its duration is given on)."""
    job = TraceJob("sample", 0.0, tenant=tenant, reference_model="V100-16", **shape)
    spec = JobSpec.from_record(job_record(job, 0))
    speed = ThroughputModel().relative_speed(spec, "A100-80", consolidated=True)
    return job.num_gpus * job.duration_s / 3600 / speed


def offered_load(jobs: tuple[TraceJob, ...], hours: float) -> dict[str, float]:
    """A100 GPU-hours each tenant's arrivals ask for, over the cluster's GPU-hours in the window."""
    out = {}
    for tenant in TENANTS:
        asked = sum(_a100_gpu_hours(tenant, _shape(j)) for j in jobs if j.tenant == tenant)
        out[tenant] = round(asked / (hours * NODES * GPUS_PER_NODE), 3)
    return out


def _shape(job: TraceJob) -> dict[str, Any]:
    keys = ("num_gpus", "duration_s", "priority_class", "checkpoint_interval_s", "cpu_milli",
            "memory_mib", "kind")  # fmt: skip
    return {k: getattr(job, k) for k in keys}


def workload(hours: float, seed: int) -> tuple[TraceJob, ...]:
    """Poisson arrivals per tenant sized to its share of offered demand (A100 GPU-hours per hour
    over the cluster's 128); serving's rate doubles in two daily peaks (9-12 h, 18-21 h)."""
    rng = np.random.default_rng(seed)
    jobs: list[TraceJob] = []
    horizon = hours * 3600
    for tenant, (draw, load) in MIX.items():
        sample = [draw(rng) for _ in range(200)]
        mean_gpu_h = np.mean([_a100_gpu_hours(tenant, j) for j in sample])
        rate = load * NODES * GPUS_PER_NODE / mean_gpu_h / 3600  # jobs per second
        t = 0.0
        while True:
            hour = (t / 3600) % 24
            peak = PEAK if tenant == "serving" and (9 <= hour < 12 or 18 <= hour < 21) else 1.0
            t += rng.exponential(1 / (rate * peak))
            if t >= horizon:
                break
            spec = draw(rng)
            name = f"{tenant}-{len(jobs):05d}"
            jobs.append(
                TraceJob(name, round(t, 1), tenant=tenant, reference_model="V100-16", **spec)
            )
    return tuple(sorted(jobs, key=lambda j: j.submit_s))


def nominal_quotas(sized: bool) -> dict[str, int]:
    """Equal thirds (the tenants' fair-share weights are equal), or sized to demand: serving's
    nominal covers its peak offered load (non-preemptible work never borrows, so an
    online-inference tenant's nominal is its capacity), the other two split the rest."""
    gpus = NODES * GPUS_PER_NODE
    if not sized:
        return {"research": 42, "product": 43, "serving": 43}
    serving = math.ceil(MIX["serving"][1] * PEAK * gpus)
    rest = gpus - serving
    return {"research": rest // 2, "product": rest - rest // 2, "serving": serving}


def policy(
    *, preemption: bool, quotas: bool, backfill: bool, sized: bool = False
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "preemption": {"enabled": preemption},
        "backfill": {"enabled": backfill},
    }
    if quotas:
        raw["tenants"] = {
            t: {"cohort": "org", "quotas": [{"nominal": n}]}
            for t, n in nominal_quotas(sized).items()
        }
    return raw


_ALL = {"preemption": True, "quotas": True, "backfill": True}
_NO_PREEMPTION = {**_ALL, "preemption": False}
CONFIGS: dict[str, dict[str, bool]] = {
    "all": _ALL,
    "no-preemption": _NO_PREEMPTION,
    "no-quotas": {**_ALL, "quotas": False},
    "none": {"preemption": False, "quotas": False, "backfill": False},
    "all, quotas sized to demand": {**_ALL, "sized": True},
    "no-preemption, quotas sized to demand": {**_NO_PREEMPTION, "sized": True},
}


# ---- figures ------------------------------------------------------------------------------


def _steps(
    result: ReplayResult, grid: np.ndarray
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Per tenant on the grid: GPUs held, and demand (gpu, cpu, mem) of its unfinished jobs."""
    held = {t: np.zeros(grid.size) for t in TENANTS}
    demand = {t: np.zeros((grid.size, 3)) for t in TENANTS}
    for run in result.twin.runs.values():
        job = run.job
        for t0, t1, gpus in run.segments:
            held[job.tenant] += np.where((grid >= t0) & (grid < t1), gpus, 0.0)
        end = run.end_s if run.end_s is not None else math.inf
        live = (grid >= run.submit_s) & (grid < end)
        demand[job.tenant][live] += (job.num_gpus, job.cpu_milli, job.memory_mib)
    return held, demand


def fair_shares(result: ReplayResult, until: float, step_s: float = 60.0) -> dict[str, Any]:
    """Each tenant's GPU-hours against its (fluid, weighted) DRF share, over the times it has
    demand: ratio = held GPU-hours / DRF GPU-hours; within 10 % means |ratio - 1| <= 0.10."""
    grid = np.arange(0.0, until, step_s)
    held, demand = _steps(result, grid)
    capacity = np.array([NODES * GPUS_PER_NODE, NODES * CPU_MILLI, NODES * MEMORY_MIB], float)
    fair = {t: np.zeros(grid.size) for t in TENANTS}
    for i in range(grid.size):
        wanting = {t: demand[t][i] for t in TENANTS if demand[t][i][0] > 0}
        for t, vec in drf_allocation(wanting, capacity).items():
            fair[t][i] = vec[0]
    out = {}
    for t in TENANTS:
        active = demand[t][:, 0] > 0
        got, owed = float(held[t][active].sum()), float(fair[t][active].sum())
        dominant = (
            ("gpu", "cpu", "memory")[int(np.argmax(demand[t][active].sum(0) / capacity))]
            if active.any()
            else ""
        )
        out[t] = {
            "gpu_hours": round(got * step_s / 3600, 1),
            "drf_gpu_hours": round(owed * step_s / 3600, 1),
            "ratio": round(got / owed, 3) if owed else None,
            "hours_with_demand": round(active.sum() * step_s / 3600, 2),
            "dominant_resource": dominant,
        }
    return out


def figures(result: ReplayResult, horizon: float) -> dict[str, Any]:
    twin = result.twin
    twin.settle(twin.now)
    runs = list(twin.runs.values())
    high = [
        r.first_start_s - r.submit_s
        for r in runs
        if r.job.priority_class in HIGH and r.first_start_s is not None
    ]
    waits: dict[str, list[float]] = {}
    for r in runs:
        if r.first_start_s is not None:
            waits.setdefault(str(r.job.priority_class), []).append(r.first_start_s - r.submit_s)
    by_class = {cls: percentiles(waits.get(cls, [])) for cls in (*HIGH, "batch", "best-effort")}
    used = sum(r.gpu_seconds for r in runs) / 3600
    lost = sum(r.lost_gpu_seconds for r in runs) / 3600
    end = max([twin.now, *(r.end_s or 0.0 for r in runs)])
    return {
        "jobs": len(runs),
        "completed": sum(r.end_s is not None for r in runs),
        "high_priority_wait_s": {**percentiles(high), "jobs": len(high)},
        "wait_s_by_class": by_class,
        "tenant_shares": fair_shares(result, horizon),
        "gpu_allocation_arrival_window": round(time_weighted_alloc(twin, 0.0, horizon), 4),
        "gpu_hours_used": round(used, 1),
        "gpu_hours_lost": round(lost, 2),
        "lost_fraction": round(lost / used, 4) if used else 0.0,
        "preemptions": len(result.preemptions),
        "preemptions_per_hour": round(len(result.preemptions) / (horizon / 3600), 2),
        "reclaims": sum(1 for p in result.preemptions if p.get("cause") == "RECLAIM"),
        "evictions_checkpoint_first": sum(
            1 for p in result.preemptions if p.get("checkpoint_first")
        ),
        "makespan_h": round(end / 3600, 2),
    }


def run_one(name: str, hours: float, seed: int, tick_s: float) -> dict[str, Any]:
    """One run of `CONFIGS` on the trace of (hours, seed): its figures and wall seconds (a
    process of its own with `--jobs`: the runs share nothing but the trace, rebuilt here)."""
    t0 = time.perf_counter()
    knobs = CONFIGS[name]
    trace = Trace(cluster(), workload(hours, seed), ThroughputModel())
    decider = InProcessDecider("gpuflow", trace.throughput, tenancy=parse_policy(policy(**knobs)))
    replay = run_replay(trace, decider, tick_s=tick_s)
    out = {"knobs": knobs, **figures(replay, hours * 3600)}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=12.0, help="arrival window")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tick-s", type=float, default=30.0, help="scheduler timer, virtual seconds")
    ap.add_argument("--jobs", type=int, default=1, help="runs in parallel processes")
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        help=f"run only this one (repeatable; names hold commas: {'; '.join(CONFIGS)}); "
        "needs --out",
    )
    ap.add_argument(
        "--out", type=Path, default=None, help="result file (default bench/results/contention.json)"
    )
    args = ap.parse_args()
    names = list(CONFIGS) if args.only is None else list(args.only)
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        ap.error(f"unknown run {unknown[0]!r} (known: {', '.join(CONFIGS)})")
    if args.only is not None and args.out is None:
        ap.error("--only writes a partial result: give it --out FILE")
    jobs = workload(args.hours, args.seed)
    started = time.perf_counter()
    with concurrent.futures.ProcessPoolExecutor(max(1, args.jobs)) as pool:
        futures = {
            name: pool.submit(run_one, name, args.hours, args.seed, args.tick_s) for name in names
        }
        runs: dict[str, Any] = {}
        for name, future in futures.items():
            runs[name] = future.result()
            print(f"{name}: {_line(runs[name])}", flush=True)
    doc = {
        "cluster": f"{NODES} x {GPUS_PER_NODE} A100-80 in one region (128 GPUs)",
        "workload": {
            "hours": args.hours,
            "seed": args.seed,
            "jobs": len(jobs),
            "by_tenant": {t: sum(j.tenant == t for j in jobs) for t in TENANTS},
            "offered_load_target": {t: load for t, (_, load) in MIX.items()},
            "offered_load_realized": offered_load(jobs, args.hours),
        },
        "tick_s": args.tick_s,
        "runs": runs,
        "quotas": {"equal": nominal_quotas(False), "sized to demand": nominal_quotas(True)},
        "targets": targets(runs),
        "targets_quotas_sized_to_demand": targets(runs, ", quotas sized to demand"),
        "partial": args.only is not None,
        "loadavg": os.getloadavg(),
        "wall_s": round(time.perf_counter() - started, 1),
        "parallel_runs": max(1, args.jobs),
    }
    if args.out is None:
        path = write_result("contention", doc)
    else:  # the same fields write_result adds, to the file asked for
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        command = " ".join([Path(sys.executable).name, *sys.argv])
        doc |= {"command": command, "machine": machine(), "measured_at": stamp}
        args.out.write_text(json.dumps(doc, indent=2) + "\n")
        path = args.out
    print(f"wrote {path}")


def _line(r: dict[str, Any]) -> str:
    wait = r["high_priority_wait_s"]
    shares = ", ".join(f"{t} {s['ratio']}" for t, s in r["tenant_shares"].items())
    by_class = r["wait_s_by_class"]
    per_class = ", ".join(f"{c} {by_class[c]['p50']:.0f}/{by_class[c]['p99']:.0f}s" for c in HIGH)
    return (
        f"high-priority wait p50 {wait['p50']:.0f}s p99 {wait['p99']:.0f}s (p50/p99: "
        f"{per_class}); allocation "
        f"{r['gpu_allocation_arrival_window']:.1%}; lost {r['gpu_hours_lost']:.1f} of "
        f"{r['gpu_hours_used']:.0f} GPU-h; {r['preemptions_per_hour']:.1f} preemptions/h; "
        f"shares {shares}"
    )


if __name__ == "__main__":
    main()
