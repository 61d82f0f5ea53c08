"""End-to-end decision latency and throughput on the embedded stack.

    python bench/pipeline.py --nodes 1000 --rate 100 --seconds 60

Starts the embedded broker, one worker, a simulated fleet of `--nodes` at 1 Hz and the
executor twin; submits jobs at `--rate`; measures, in the same run:
  * end to end: JobSubmitted produced -> its first PlacementDecision consumed;
  * the broker's own one hop: produce -> consume on a plain topic at 200 msgs/s;
  * the worker's own time per decision (consumed -> decision produced, summed over the
    router and placer stages), carried in each decision's `worker_us`.
Writes bench/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import NewTopic

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin
from agents.jobgen import generate_jobs, run_jobgen
from bench._common import percentiles, write_result
from gpuflow.stack import Stack
from infra.config import Config, load_config
from infra.kafka import admin, consumer, producer
from infra.topics import DECISIONS_PLACEMENT
from schemas import SingleObjectCodec

HOP_TOPIC = "bench.hop"


def measure_hop(config: Config, stop: threading.Event, rate: float = 200.0) -> list[float]:
    """Produce timestamps to a plain topic and consume them: the broker's one-hop latency."""
    client = admin(config.kafka)
    client.create_topics([NewTopic(HOP_TOPIC, 1, 1)])[HOP_TOPIC].result()
    c = consumer(config.kafka, group_id="bench-hop")
    c.assign([TopicPartition(HOP_TOPIC, 0, OFFSET_END)])
    c.consume(1, timeout=1.0)
    p = producer(config.kafka, **{"linger.ms": 0})
    latencies: list[float] = []
    next_send = time.perf_counter()
    while not stop.is_set():
        now = time.perf_counter()
        if now >= next_send:
            p.produce(HOP_TOPIC, value=struct.pack("<d", now))
            p.poll(0)
            next_send += 1.0 / rate
        for msg in c.consume(100, timeout=0.002):
            value = msg.value()
            if msg.error() is None and value is not None:
                latencies.append((time.perf_counter() - struct.unpack("<d", value)[0]) * 1e3)
    c.close()
    return latencies


class CpuSampler:
    """CPU share of named processes, sampled every `every_s` from /proc."""

    def __init__(self, pids: dict[str, int | None], every_s: float = 10.0) -> None:
        self.pids = {k: v for k, v in pids.items() if v}
        self.every_s = every_s
        self.samples: list[dict[str, float]] = []

    @staticmethod
    def _cpu_s(pid: int) -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def run(self, stop: threading.Event) -> None:
        last = {k: self._cpu_s(p) for k, p in self.pids.items()}
        while not stop.wait(self.every_s):
            try:
                now = {k: self._cpu_s(p) for k, p in self.pids.items()}
            except OSError:
                return
            self.samples.append({k: round((now[k] - last[k]) / self.every_s * 100, 1) for k in now})
            last = now


def _windows(rows: list[tuple[float, dict[str, Any]]], t0: float) -> list[dict[str, float]]:
    """End-to-end p50/p99 per 10 s of submissions: shows whether latency drifts."""
    by: dict[int, list[float]] = {}
    for recv, d in rows:
        by.setdefault(int((d["submitted_ts"] - t0) // 10_000), []).append(recv - d["submitted_ts"])
    return [
        {"from_s": k * 10, **{f"{q}_ms": round(v, 1) for q, v in percentiles(lat).items()}}
        for k, lat in sorted(by.items())
    ]


class DecisionClock:
    """Consumes decisions and records, per job, when its first decision arrived."""

    def __init__(self, config: Config) -> None:
        self.codec = SingleObjectCodec()
        self.c = consumer(config.kafka, group_id="bench-decisions")
        meta = self.c.list_topics(DECISIONS_PLACEMENT, timeout=10).topics[DECISIONS_PLACEMENT]
        self.c.assign([TopicPartition(DECISIONS_PLACEMENT, p, OFFSET_END) for p in meta.partitions])
        self.first: dict[str, tuple[float, dict[str, Any]]] = {}
        self.outcomes: dict[str, int] = {}

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            for msg in self.c.consume(1000, timeout=0.05):
                if msg.error():
                    continue
                received = time.time() * 1000
                _, d = self.codec.decode(msg.value())
                self.outcomes[d["outcome"]] = self.outcomes.get(d["outcome"], 0) + 1
                self.first.setdefault(d["job_id"], (received, d))
        self.c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100.0, help="jobs submitted per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to submit")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds excluded at the start")
    ap.add_argument("--dump", help="write per-job latencies to this file")
    args = ap.parse_args()

    spec = demo_fleet()
    config = load_config(data_dir=f"/tmp/gpuflow-bench-{int(time.time())}")
    config = config.with_regions(r.name for r in spec.regions)  # as `gpuflow up` runs
    fleet = SimulatedFleet(spec, generate_nodes(spec, args.nodes, seed=1), seed=1)
    with Stack(config) as stack:
        cfg = stack.config
        stack.spawn("fleet", run_fleet, cfg, fleet)
        stack.spawn("executor", ExecutorTwin(cfg, time_scale=1.0).run)
        clock = DecisionClock(cfg)
        stack.spawn("clock", clock.run)
        time.sleep(8.0)  # worker joins its group and reads the fleet
        hop_stop = threading.Event()
        hops: list[float] = []
        hop_thread = threading.Thread(target=lambda: hops.extend(measure_hop(cfg, hop_stop)))
        hop_thread.start()
        cpu = CpuSampler({"broker": stack.broker.pid, "worker": stack.worker.pid})  # type: ignore[union-attr]
        stack.spawn("cpu", cpu.run)
        regions = [r.name for r in spec.regions]
        n = int(args.rate * args.seconds)
        jobs = generate_jobs(n, seed=2, regions=regions, mean_duration_s=20.0, prefix="bench")
        t0 = time.time() * 1000
        sent = run_jobgen(cfg, jobs, rate_per_s=args.rate, stop=threading.Event())
        send_s = time.time() - t0 / 1000
        deadline = time.monotonic() + 30
        while len(clock.first) < sent and time.monotonic() < deadline:
            time.sleep(0.2)
        hop_stop.set()
        hop_thread.join()
        stack.check_worker()
    report(args, clock, hops, t0, sent, send_s, cfg, cpu.samples)


def report(
    args: Any,
    clock: DecisionClock,
    hops: list[float],
    t0: float,
    sent: int,
    send_s: float,
    cfg: Config,
    cpu: list[dict[str, float]],
) -> None:
    warm = t0 + args.warmup * 1000
    rows = [(recv, d) for recv, d in clock.first.values() if d["submitted_ts"] >= warm]
    e2e = [recv - d["submitted_ts"] for recv, d in rows]
    worker = [d["worker_us"] / 1000 for _, d in rows]
    to_decision = percentiles([d["ts"] - d["submitted_ts"] for _, d in rows])
    delivery = percentiles([recv - d["ts"] for recv, d in rows])
    attempts = [d["attempt"] for _, d in rows]
    decided = [recv for recv, _ in clock.first.values()]
    span_s = (max(decided) - min(decided)) / 1000 if decided else float("nan")
    e2e_p, hop_p, worker_p = percentiles(e2e), percentiles(hops), percentiles(worker)
    mean_hops = 2 + sum(attempts) / len(attempts) if attempts else float("nan")
    result = {
        "nodes": args.nodes,
        "rate_submitted_per_s": args.rate,
        "jobs_submitted": sent,
        "jobs_decided": len(clock.first),
        "jobs_per_s": round(len(clock.first) / span_s, 1),
        "submit_span_s": round(send_s, 1),
        "decide_span_s": round(span_s, 1),
        "p50_ms": round(e2e_p["p50"], 1),
        "p99_ms": round(e2e_p["p99"], 1),
        "hop_p50_ms": round(hop_p["p50"], 1),
        "hop_p99_ms": round(hop_p["p99"], 1),
        "hop_samples": len(hops),
        "hops": 3,
        "hops_mean": round(mean_hops, 2),
        "worker_p50_ms": round(worker_p["p50"], 3),
        "worker_p99_ms": round(worker_p["p99"], 3),
        "submit_to_decision_p50_ms": round(to_decision["p50"], 1),
        "submit_to_decision_p99_ms": round(to_decision["p99"], 1),
        "decision_to_consumer_p50_ms": round(delivery["p50"], 1),
        "decision_to_consumer_p99_ms": round(delivery["p99"], 1),
        "outcomes": clock.outcomes,
        "history_sink": cfg.store.enabled,
        "fetch_wait_ms": cfg.kafka.fetch_wait_ms,
        "partitions": cfg.kafka.partitions,
        "e2e_budget_ms": round(3 * hop_p["p99"] + 50, 1),
        "windows_10s": _windows(rows, t0),
        "cpu_pct_every_10s": cpu,
    }
    if args.dump:
        with open(args.dump, "w") as out:
            for recv, d in sorted(rows, key=lambda r: r[1]["submitted_ts"]):
                at_s = (d["submitted_ts"] - t0) / 1000
                e2e, inside = recv - d["submitted_ts"], d["ts"] - d["submitted_ts"]
                out.write(f"{at_s:.3f} {e2e:.1f} {inside} {d['attempt']} {d['outcome']}\n")
    path = write_result("pipeline", result)
    for key, value in result.items():
        print(f"{key:>22}: {value}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
