"""Producer-side capacity of the fleet publisher against a fresh embedded broker.

    python -m agents.bench_fleet --nodes 10000 --seconds 20            # tiered + deltas
    python -m agents.bench_fleet --nodes 10000 --seconds 20 --full     # every node, every GPU,
                                                                       # every tick (worst case)
Prints events/s, ticks that overran their period, and the process CPU time.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

from agents.fleet import SimulatedFleet
from agents.generate import generate_nodes
from agents.publisher import run_fleet
from agents.spec import demo_fleet
from agents.tiers import TierPolicy
from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import ensure_topics

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fleet publisher capacity")
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--hz", type=float, default=1.0)
    parser.add_argument("--full", action="store_true", help="a full snapshot every tick")
    args = parser.parse_args(argv)
    base = load_config(env={})
    spec = demo_fleet()
    policy = TierPolicy(full_snapshot_s=1e-3) if args.full else spec.tiers
    fleet = SimulatedFleet(spec, generate_nodes(spec, args.nodes, seed=1), 1, policy=policy)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(base.broker, Path(tmp)) as broker:
        config = base.with_bootstrap(broker.bootstrap_servers)
        ensure_topics(config.kafka)
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        stats = run_fleet(config, fleet, hz=args.hz, duration_s=args.seconds)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(f"nodes={args.nodes} hz={args.hz} full={args.full} events={stats.events} "
          f"events/s={stats.events_per_s:.0f} MB/s={stats.bytes / 1e6 / stats.elapsed_s:.1f} "
          f"ticks={stats.ticks} late_ticks={stats.late_ticks} "
          f"publisher_cpu={cpu / stats.elapsed_s:.0%} tiers={stats.by_tier}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
