"""Check the real NVML agent end to end on a machine with an NVIDIA GPU.

    python -m agents.check_real_gpu --seconds 30

Starts an embedded broker, runs the NVML agent for the given time, consumes its events back,
decodes them and prints a summary. Needs nothing else running. Exit 2 when there is no GPU.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from agents.errors import NvmlUnavailable
from agents.node import NodeAgent, NodeIdentity, run_agent
from agents.reader import GpuReader, SimulatedReader
from agents.tiers import TierPolicy
from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import consumer, ensure_topics
from infra.topics import NODE_INVENTORY, NODE_TELEMETRY
from schemas.codec import SingleObjectCodec

__all__ = ["main"]


def _consume_all(config: Any, idle_s: float = 2.0) -> list[tuple[str, dict[str, Any]]]:
    codec = SingleObjectCodec()
    c = consumer(config.kafka, group_id="gpuflow-check-real-gpu")
    try:
        meta = c.list_topics(timeout=5)
        c.assign(
            [
                TopicPartition(t, p, OFFSET_BEGINNING)
                for t in (NODE_INVENTORY, NODE_TELEMETRY)
                for p in meta.topics[t].partitions
            ]
        )
        out, last = [], time.monotonic()
        while time.monotonic() - last < idle_s:  # Tansu watermarks are unreliable: wait for idle
            msg = c.poll(0.2)
            if msg is not None and not msg.error():
                out.append(codec.decode(msg.value() or b""))
                last = time.monotonic()
        return out
    finally:
        c.close()


def _summary(events: list[tuple[str, dict[str, Any]]], stats: Any) -> None:
    inv = [e for n, e in events if n == "NodeInventory"]
    tel = [e for n, e in events if n == "NodeTelemetry"]
    print(f"produced {stats.events} events; consumed and decoded {len(events)}")
    if inv:
        i = inv[-1]
        print(
            f"inventory: {i['gpu_count']} x {i['gpu_model']} ({i['gpu_memory_mib']} MiB), "
            f"cc {i['compute_capability']}, driver {i['driver_version']}, "
            f"interconnect {i['interconnect']}, islands {i['nvlink_islands']}, "
            f"MIG {i['mig_enabled']}, labels {i['labels']}"
        )
    print("telemetry by tier:", dict(Counter(e["tier"] for e in tel)))
    print("full snapshots:", sum(e["full_snapshot"] for e in tel))
    for e in [e for e in tel if e["gpus"]][-1:]:
        for g in e["gpus"]:
            print(
                f"  gpu {g['index']}: healthy={g['healthy']} util={g['util_pct']:.1f}% "
                f"mem={g['mem_used_mib']} MiB bw={g['mem_bw_util_pct']:.1f}% "
                f"temp={g['temperature_c']:.1f}C power={g['power_w']:.1f}W "
                f"clock={g['sm_clock_mhz']}MHz "
                f"throttle=0x{g['throttle_reasons']:x} ecc={g['ecc_errors']} "
                f"nvlink tx/rx={g['nvlink_tx_mbps']:.1f}/{g['nvlink_rx_mbps']:.1f} MB/s "
                f"perf={g['perf_factor']:.3f} xid={g['xid_events']}"
            )
    for e in [e for e in tel if e["tier"] in ("NEARLINE", "SLOW")][-2:]:
        print(
            f"  {e['tier']}: disk r/w={e['disk_read_mbps']}/{e['disk_write_mbps']} MB/s "
            f"net rx/tx={e['net_rx_mbps']}/{e['net_tx_mbps']} MB/s energy={e['energy_j']} J "
            f"perf/W={e['perf_per_watt']}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--simulate", action="store_true", help="dry run with a simulated node")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from agents.nvml import NvmlReader

    reader: GpuReader
    try:
        reader = SimulatedReader("H100", 4) if args.simulate else NvmlReader()
    except NvmlUnavailable as exc:
        print(f"check_real_gpu: {exc}", file=sys.stderr)
        return 2
    # Short cadences so a 30 s run shows every tier.
    policy = TierPolicy(nearline_s=5, slow_s=10, full_snapshot_s=10, heartbeat_s=3)
    base = load_config(env={})
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(base.broker, Path(tmp)) as broker:
        config = base.with_bootstrap(broker.bootstrap_servers)
        ensure_topics(config.kafka)
        agent = NodeAgent(NodeIdentity("check-node", "local"), reader, policy)
        stats = run_agent(config, agent, stop=threading.Event(), duration_s=args.seconds)
        reader.close()
        _summary(_consume_all(config), stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
