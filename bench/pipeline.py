"""End-to-end decision latency and throughput on the embedded stack.

    python bench/pipeline.py --nodes 1000 --rate 100 --seconds 60
    python bench/pipeline.py --sweep [--rates 100,200,400,700,1000,1400] [--seconds 30]

Starts the embedded broker, one worker, a simulated fleet of `--nodes` at 1 Hz and the
executor twin; submits jobs at `--rate`; measures, in the same run:
  * end to end: JobSubmitted produced -> its first PlacementDecision consumed;
  * the broker's own one hop: produce -> consume on a plain topic at 20 msgs/s (a probe, not
    a load: at 200 msgs/s it wrote more records than the jobs did);
  * the worker's own time per decision (consumed -> decision produced, summed over the
    router and placer stages), carried in each decision's `worker_us`.
Writes bench/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import NewTopic

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from agents.executor import ExecutorTwin
from agents.jobgen import generate_jobs, run_jobgen
from bench._common import (
    ProcessClock,
    child_pids,
    cpu_seconds,
    load_average,
    percentiles,
    report_result,
    wait_worker_ready,
    write_result,
)
from gpuflow.stack import Stack
from infra.config import Config, load_config
from infra.kafka import admin, consumer, producer
from infra.topics import DECISIONS_PLACEMENT
from schemas import SingleObjectCodec

HOP_TOPIC = "bench.hop"


def measure_hop(config: Config, stop: threading.Event, rate: float = 20.0) -> list[float]:
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

    _cpu_s = staticmethod(cpu_seconds)

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
    """Consumes decisions from their end; records, per job, when its first decision arrived.

    `on_decision(received_ms, record)`, when given, gets every decision instead (the soak keeps
    only what it needs, so its own memory stays flat).
    """

    def __init__(
        self,
        config: Config,
        on_decision: Callable[[float, dict[str, Any]], None] | None = None,
    ) -> None:
        self.codec = SingleObjectCodec()
        self.c = consumer(config.kafka, group_id=f"bench-decisions-{time.time_ns()}")
        meta = self.c.list_topics(DECISIONS_PLACEMENT, timeout=10).topics[DECISIONS_PLACEMENT]
        self.c.assign([TopicPartition(DECISIONS_PLACEMENT, p, OFFSET_END) for p in meta.partitions])
        self.first: dict[str, tuple[float, dict[str, Any]]] = {}
        self.outcomes: dict[str, int] = {}
        self.on_decision = on_decision or self._keep_first

    def _keep_first(self, received: float, d: dict[str, Any]) -> None:
        self.outcomes[d["outcome"]] = self.outcomes.get(d["outcome"], 0) + 1
        self.first.setdefault(d["job_id"], (received, d))

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            for msg in self.c.consume(1000, timeout=0.05):
                if msg.error():
                    continue
                self.on_decision(time.time() * 1000, self.codec.decode(msg.value())[1])
        self.c.close()


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=100.0, help="jobs submitted per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to submit")
    ap.add_argument("--warmup", type=float, default=10.0, help="seconds excluded at the start")
    ap.add_argument("--sweep", action="store_true", help="rising rates until one is not held")
    ap.add_argument("--rates", default="100,200,400,700,1000,1400,2000")
    ap.add_argument("--no-history", action="store_true", help="run without the history sink")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of baseline CPU")
    ap.add_argument("--dump", help="write per-job latencies to this file")
    ap.add_argument("--out", help="result file (default bench/results/pipeline[_sweep].json)")
    return ap.parse_args()


def main() -> None:
    args = _args()
    if not args.sweep:
        result = run_once(args, args.rate, args.seconds)
        report_result("pipeline", result, out=args.out)
        return
    runs: list[dict[str, Any]] = []
    for rate in [float(r) for r in args.rates.split(",")]:
        result = run_once(args, rate, args.seconds)
        runs.append(result)
        print(_sweep_line(result), flush=True)
        if not result["sustained"]:
            break
    held = [r["rate_submitted_per_s"] for r in runs if r["sustained"]]
    summary = {
        "max_sustained_jobs_per_s": max(held) if held else 0.0,
        "criterion": "all decided within 2 s of the end of submission and e2e p99 < 1000 ms",
        "nodes": args.nodes,
        "seconds_per_rate": args.seconds,
        "runs": runs,
    }
    path = write_result("pipeline_sweep", summary, out=args.out)
    print(f"max_sustained_jobs_per_s: {summary['max_sustained_jobs_per_s']}")
    print(f"wrote {path}")


def _sweep_line(r: dict[str, Any]) -> str:
    cpu = r["cpu_ms_per_decided_job"]
    return (
        f"rate {r['rate_submitted_per_s']:>6.0f}/s "
        f"decided {r['jobs_decided']}/{r['jobs_submitted']}"
        f" (late {r['decided_late']}) p50 {r['p50_ms']} ms p99 {r['p99_ms']} ms"
        f" sustained={r['sustained']} cpu ms/job {cpu} load {r['load_average']}"
    )


def run_once(args: Any, rate: float, seconds: float) -> dict[str, Any]:
    """One fresh embedded stack at `rate` jobs/s for `seconds`; the measured figures."""
    spec = demo_fleet()
    config = load_config(data_dir=f"/tmp/gpuflow-bench-{time.time_ns()}")
    if args.no_history:
        config = dataclasses.replace(config, store=dataclasses.replace(config.store, enabled=False))
    config = config.with_regions(r.name for r in spec.regions)  # as `gpuflow up` runs
    fleet = SimulatedFleet(spec, generate_nodes(spec, args.nodes, seed=1), seed=1)
    with Stack(config) as stack:
        cfg = stack.config
        stack.spawn("fleet", run_fleet, cfg, fleet)
        stack.spawn("executor", ExecutorTwin(cfg, time_scale=1.0).run)
        clock = DecisionClock(cfg)
        stack.spawn("clock", clock.run)
        # without the history sink there is no child process to wait for
        child_of = stack.worker.pid if stack.worker and cfg.store.enabled else None
        ready_s = wait_worker_ready(cfg.worker.web_host, cfg.worker.web_port, child_of)
        first_s = _first_decision(cfg, clock, regions=[r.name for r in spec.regions])
        hop_stop = threading.Event()
        hops: list[float] = []
        hop_thread = threading.Thread(target=lambda: hops.extend(measure_hop(cfg, hop_stop)))
        hop_thread.start()
        pids = _pids(stack)
        idle = ProcessClock(pids)
        time.sleep(args.idle)  # the fleet and the hop probe alone: the baseline to subtract
        idle_s = {k: v / args.idle for k, v in idle.cpu_s().items()}
        cpu = CpuSampler(pids)
        stack.spawn("cpu", cpu.run)
        regions = [r.name for r in spec.regions]
        n = int(rate * seconds)
        jobs = generate_jobs(n, seed=2, regions=regions, mean_duration_s=20.0, prefix="bench")
        ends_before = _topic_ends(cfg)
        cpu_clock = ProcessClock(pids)
        t0 = time.time() * 1000
        sent = run_jobgen(cfg, jobs, rate_per_s=rate, stop=threading.Event())
        send_s = time.time() - t0 / 1000
        deadline = time.monotonic() + 30
        while len(clock.first) < sent and time.monotonic() < deadline:
            time.sleep(0.2)
        cpu_s = cpu_clock.cpu_s()
        run_s = time.time() - t0 / 1000
        written = {t: n - ends_before.get(t, 0) for t, n in _topic_ends(cfg).items()}
        taken = _batches_taken(cfg)
        hop_stop.set()
        hop_thread.join()
        stack.check_worker()
    result = report(args, rate, clock, hops, t0, sent, send_s, cfg, cpu.samples, cpu_s)
    decided = max(1, result["jobs_decided"])
    marginal = {k: round((cpu_s[k] - idle_s[k] * run_s) * 1000 / decided, 3) for k in cpu_s}
    return {
        **result,
        "worker_ready_s": ready_s,
        "first_decision_s": first_s,
        "idle_cpu_pct": {k: round(v * 100, 1) for k, v in idle_s.items()},
        # CPU above the idle baseline (fleet telemetry, timers) per decided job
        "cpu_ms_per_decided_job_above_idle": marginal,
        # what the broker was asked to store during the run, per topic (the hop probe's too)
        # events per batch each decision agent took (streams.worker.batching; warm-up included)
        "mean_batch_per_agent": taken,
        "records_written_per_decided_job": {
            t: round(n / decided, 2) for t, n in sorted(written.items(), key=lambda kv: -kv[1]) if n
        },
    }


def _topic_ends(cfg: Config) -> dict[str, int]:
    """Records written so far to each topic: the sum of its partitions' high watermarks."""
    c = consumer(cfg.kafka, group_id=f"bench-ends-{time.time_ns()}")
    try:
        ends = {}
        for name, meta in c.list_topics(timeout=10).topics.items():
            ends[name] = sum(
                c.get_watermark_offsets(TopicPartition(name, p), timeout=10)[1]
                for p in meta.partitions
            )
        return ends
    finally:
        c.close()


def _batches_taken(cfg: Config) -> dict[str, float]:
    """The worker's mean batch per decision agent: events read / batches taken (`/metrics/`)."""
    import httpx

    url = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}/metrics/"
    page = httpx.get(url, timeout=10).json()
    consumed, taken = page.get("consumed", {}), page.get("batches", {})
    return {name: round(consumed.get(name, 0) / n, 2) for name, n in sorted(taken.items()) if n}


def _first_decision(cfg: Config, clock: DecisionClock, regions: list[str]) -> float:
    """Submit one job and wait for its decision: the worker has read the fleet and decides."""
    started = time.monotonic()
    [job] = generate_jobs(1, seed=99, regions=regions, prefix="warmup")
    run_jobgen(cfg, [job], rate_per_s=1.0, stop=threading.Event())
    while job["job_id"] not in clock.first:
        if time.monotonic() - started > 180:
            raise TimeoutError("no decision for the warm-up job within 180 s")
        time.sleep(0.2)
    del clock.first[job["job_id"]]
    return round(time.monotonic() - started, 1)


def _pids(stack: Stack) -> dict[str, int | None]:
    worker = stack.worker.pid if stack.worker else None
    history = child_pids(worker) if worker else []
    return {
        "broker": stack.broker.pid if stack.broker else None,
        "worker": worker,
        "history": history[0] if history else None,
        "clients": os.getpid(),  # fleet, executor twin, job generator, clock: threads here
    }


def report(
    args: Any,
    rate: float,
    clock: DecisionClock,
    hops: list[float],
    t0: float,
    sent: int,
    send_s: float,
    cfg: Config,
    cpu: list[dict[str, float]],
    cpu_s: dict[str, float],
) -> dict[str, Any]:
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
    mean_attempts = sum(attempts) / len(attempts) if attempts else float("nan")
    submit_end = t0 + send_s * 1000
    late = sum(1 for recv in decided if recv > submit_end + 2000) + (sent - len(decided))
    sustained = late == 0 and e2e_p["p99"] < 1000.0
    result = {
        "nodes": args.nodes,
        "rate_submitted_per_s": rate,
        "jobs_submitted": sent,
        "jobs_decided": len(clock.first),
        "decided_late": late,
        "sustained": sustained,
        "jobs_per_s": round(len(clock.first) / span_s, 1),
        "submit_span_s": round(send_s, 1),
        "decide_span_s": round(span_s, 1),
        "p50_ms": round(e2e_p["p50"], 1),
        "p99_ms": round(e2e_p["p99"], 1),
        "hop_p50_ms": round(hop_p["p50"], 1),
        "hop_p99_ms": round(hop_p["p99"], 1),
        "hop_samples": len(hops),
        # one worker owns every region: submitted -> worker -> decision, each region tried in
        # the worker; without local placement every attempt is a jobs.routed hop
        "hops": 2 if cfg.worker.local_placement else 3,
        "attempts_mean": round(mean_attempts, 2),
        "worker_p50_ms": round(worker_p["p50"], 3),
        "worker_p99_ms": round(worker_p["p99"], 3),
        "submit_to_decision_p50_ms": round(to_decision["p50"], 1),
        "submit_to_decision_p99_ms": round(to_decision["p99"], 1),
        "decision_to_consumer_p50_ms": round(delivery["p50"], 1),
        "decision_to_consumer_p99_ms": round(delivery["p99"], 1),
        "outcomes": clock.outcomes,
        "history_sink": cfg.store.enabled,
        "broker_engine": cfg.broker.engine,
        "fetch_wait_ms": cfg.kafka.fetch_wait_ms,
        "partitions": cfg.kafka.partitions,
        "e2e_budget_ms": round((2 if cfg.worker.local_placement else 3) * hop_p["p99"] + 50, 1),
        "windows_10s": _windows(rows, t0),
        "cpu_pct_every_10s": cpu,
        "cpu_s_during_run": cpu_s,
        "cpu_ms_per_decided_job": {
            name: round(s * 1000 / max(1, len(clock.first)), 3) for name, s in cpu_s.items()
        },
        "load_average": load_average(),
    }
    if args.dump:
        with open(args.dump, "w") as out:
            for recv, d in sorted(rows, key=lambda r: r[1]["submitted_ts"]):
                at_s = (d["submitted_ts"] - t0) / 1000
                e2e, inside = recv - d["submitted_ts"], d["ts"] - d["submitted_ts"]
                out.write(f"{at_s:.3f} {e2e:.1f} {inside} {d['attempt']} {d['outcome']}\n")
    return result


if __name__ == "__main__":
    main()
