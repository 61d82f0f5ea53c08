"""Telemetry ingestion by the worker's telemetry processor on the embedded stack.

    python bench/telemetry.py --nodes 10000 --seconds 30 [--full]

Starts the embedded broker and one worker, publishes a simulated fleet of `--nodes` at 1 Hz
(`--full`: every node sends a full snapshot every second, 10,000 events/s at 10k nodes;
default: the agents' tiered cadence, deltas and heartbeats), and reads the worker's
`/metrics/`: NodeTelemetry events ingested per second and lag (ingested - produced ts).
Writes bench/results/telemetry.json.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import httpx

from agents import SimulatedFleet, TierPolicy, demo_fleet, generate_nodes, run_fleet
from agents.publisher import EventPublisher
from bench._common import (
    ProcessClock,
    child_pids,
    load_average,
    wait_worker_ready,
    write_result,
)
from gpuflow.stack import Stack
from infra.config import load_config
from infra.topics import NODE_TELEMETRY


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--full", action="store_true", help="full snapshot from every node each second")
    ap.add_argument("--out", help="result file (default bench/results/telemetry_<mode>.json)")
    args = ap.parse_args()

    spec = demo_fleet()
    config = load_config(data_dir=f"/tmp/gpuflow-bench-tel-{int(time.time())}")
    config = config.with_regions(r.name for r in spec.regions)  # as `gpuflow up` runs
    policy = TierPolicy(full_snapshot_s=1e-3) if args.full else None
    fleet = SimulatedFleet(spec, generate_nodes(spec, args.nodes, seed=1), seed=1, policy=policy)
    stats: list = []
    with Stack(config) as stack:
        cfg = stack.config
        url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}/metrics/"
        stop = threading.Event()
        publisher = EventPublisher(cfg)
        pub = threading.Thread(
            target=lambda: stats.append(run_fleet(cfg, fleet, stop=stop, publisher=publisher))
        )
        pub.start()
        worker = stack.worker.pid if stack.worker else None
        wait_worker_ready(cfg.worker.web_host, cfg.worker.web_port, worker)
        time.sleep(args.warmup)
        history = child_pids(worker) if worker else []
        clock = ProcessClock(
            {
                "broker": stack.broker.pid if stack.broker else None,
                "worker": worker,
                "history": history[0] if history else None,
                "publisher": os.getpid(),
            }
        )
        first = _metrics(url)
        sent = publisher.stats.by_topic.get(NODE_TELEMETRY, 0)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        last = _metrics(url)
        sent = publisher.stats.by_topic.get(NODE_TELEMETRY, 0) - sent
        elapsed = time.monotonic() - t0
        cpu_s = clock.cpu_s()
        stop.set()
        pub.join()
        # after the publisher has flushed: has every event it ever sent been ingested?
        published_total = publisher.stats.by_topic.get(NODE_TELEMETRY, 0)
        ingested_total = _drained(url, published_total, timeout_s=30.0)
        stack.check_worker()
    ingested = last["events"].get("telemetry", 0) - first["events"].get("telemetry", 0)
    published = stats[0]
    result = {
        "nodes": args.nodes,
        "mode": "full" if args.full else "tiered",
        # NodeTelemetry produced in the same window as `ingested` (inventory, grid and link
        # events, and the first full snapshots of a tiered fleet, are not telemetry read here)
        "published_events_per_s": round(sent / elapsed, 1),
        "ingested_per_s": round(ingested / elapsed, 1),
        "lag_p50_ms": round(last["telemetry_lag_ms"]["p50"], 1),
        "lag_p99_ms": round(last["telemetry_lag_ms"]["p99"], 1),
        "late_publisher_ticks": published.late_ticks,
        # every NodeTelemetry of the run, counted once the publisher had flushed and the
        # worker had caught up (or 30 s had passed)
        "published_total": published_total,
        "ingested_total": ingested_total,
        "seconds": args.seconds,
        "history_sink": config.store.enabled,
        "cpu_pct": {k: round(v / elapsed * 100, 1) for k, v in cpu_s.items()},
        "cpu_us_per_ingested_event": {
            k: round(v * 1e6 / max(1, ingested), 1) for k, v in cpu_s.items()
        },
        "load_average": load_average(),
    }
    suffix = "" if config.store.enabled else "_no_history"
    path = write_result(f"telemetry_{result['mode']}{suffix}", result, out=args.out)
    for key, value in result.items():
        print(f"{key:>24}: {value}")
    print(f"wrote {path}")


def _metrics(url: str) -> dict:
    return httpx.get(url, timeout=10).json()


def _drained(url: str, published: int, timeout_s: float) -> int:
    """The worker's ingested NodeTelemetry count once it reaches `published` (or time is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        ingested = int(_metrics(url)["events"].get("telemetry", 0))
        if ingested >= published or time.monotonic() > deadline:
            return ingested
        time.sleep(0.5)


if __name__ == "__main__":
    main()
