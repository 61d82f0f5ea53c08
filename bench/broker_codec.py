"""What the fleet's telemetry costs the embedded broker's memory, per producer codec.

    python bench/broker_codec.py [--codecs none,lz4,zstd] [--nodes 1000] [--seconds 70]

For each codec (`kafka.compression`), a fresh embedded broker and the simulated fleet of
`--nodes` publishing at 1 Hz with the agents' tiered cadence (as `gpuflow up` and
`bench/soak.py` run it), nothing consuming. Tansu 0.6 keeps every batch for ever, so its RSS
grows by what is published; the figure is the least-squares slope of the broker's RSS sampled
every 5 s after the first 10 s, in MB per minute, beside the bytes the fleet handed the
producer (uncompressed Avro). Writes bench/results/broker_codec.json, or `--out`.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from bench._common import ProcessClock, load_average, report_result, rss_mb
from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import ensure_topics


def one_codec(codec: str, nodes: int, seconds: float) -> dict[str, Any]:
    spec = demo_fleet()
    base = load_config(env={}, data_dir=tempfile.mkdtemp(prefix="gpuflow-bench-codec-"))
    base = base.with_regions(r.name for r in spec.regions)
    tansu = dataclasses.replace(base.broker, engine="tansu")  # what this bench measures
    with EmbeddedBroker(tansu, Path(base.data_dir)) as broker:
        assert broker.pid is not None
        cfg = base.with_bootstrap(broker.bootstrap_servers)
        cfg = dataclasses.replace(cfg, kafka=dataclasses.replace(cfg.kafka, compression=codec))
        ensure_topics(cfg.kafka)
        fleet = SimulatedFleet(spec, generate_nodes(spec, nodes, seed=1), seed=1)
        stop = threading.Event()
        stats: list[Any] = []
        publisher = threading.Thread(target=lambda: stats.append(run_fleet(cfg, fleet, stop=stop)))
        cpu = ProcessClock({"broker": broker.pid})
        start = time.monotonic()
        publisher.start()
        samples: list[tuple[float, float]] = []
        while (elapsed := time.monotonic() - start) < seconds:
            time.sleep(5.0)
            samples.append((time.monotonic() - start, rss_mb(broker.pid)))
        broker_cpu_s = cpu.cpu_s()["broker"]
        stop.set()
        publisher.join(30)
    kept = [(t, mb) for t, mb in samples if t >= 10.0]
    slope = float(np.polyfit([t / 60 for t, _ in kept], [mb for _, mb in kept], 1)[0])
    published = stats[0] if stats else None
    return {
        "broker_rss_growth_mb_per_min": round(slope, 2),
        "broker_rss_mb_first_last": [round(samples[0][1], 1), round(samples[-1][1], 1)],
        "broker_cpu_share": round(broker_cpu_s / elapsed, 3),
        "events_published": published.events if published else 0,
        "uncompressed_mb_per_min": round(published.bytes / 1e6 / (elapsed / 60), 2)
        if published
        else 0.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--codecs", default="none,lz4,zstd")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=70.0)
    ap.add_argument("--out", help="result file (default bench/results/broker_codec.json)")
    args = ap.parse_args()
    if args.seconds < 30:
        ap.error("--seconds: at least 30 (the slope needs samples after the first 10 s)")
    load_before = load_average()
    by_codec = {c: one_codec(c, args.nodes, args.seconds) for c in args.codecs.split(",")}
    report_result(
        "broker_codec",
        {"nodes": args.nodes, "seconds": args.seconds, "by_codec": by_codec,
         "load_average": load_before},
        out=args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
