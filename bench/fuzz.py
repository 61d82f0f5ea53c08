"""Hostile records on every topic the worker consumes, on the real broker and worker.

    python bench/fuzz.py --per-topic 10000 [--rate 800] [--seed 0] [--out FILE]

Starts the embedded broker and one worker (history sink on), announces a small sane fleet,
runs the executor twin, then sends `--per-topic` records from `agents.hostile.HostileRecords`
to each of the six consumed topics (random bytes, truncated and bit-flipped records, wrong
event types, hostile values, duplicate ids, old and future timestamps, unknown references,
plain valid records), interleaved. It then waits until the worker has consumed them all and
reports, per topic: sent, dead-lettered (the worker's count and the dead-letter topic's),
processed, and how many the codec + `streams.validation` call invalid (the expectation);
for the run: worker restarts (the worker is restarted if it dies), stalls (/health/ not live,
or consumption stuck for 30 s), processing faults caught, and GPUs promised twice according
to the decision and job-event logs. Writes bench/results/fuzz.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from agents.executor import ExecutorTwin
from agents.hostile import CONSUMED, CONSUMER_OF, HostileRecords
from bench._common import write_result
from gpuflow.stack import Stack, WorkerProcess
from infra.config import load_config
from infra.kafka import consumer, producer
from infra.topics import (
    DEADLETTER,
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    JOBS_EVENTS,
    NODE_INVENTORY,
)
from schemas import CodecError, SingleObjectCodec
from streams.scheduler.overbooking import overbooked
from streams.scheduler.validation import Rules, problems

CODEC = SingleObjectCodec()


RULES = Rules()  # one instance: it remembers the regions seen, as the worker's does


def _expected_invalid(event: str, value: bytes) -> bool:
    try:
        name, record = CODEC.decode(value)
    except CodecError:
        return True
    return name != event or bool(problems(name, record, RULES))


def _read_all(config: Any, topic: str, *, log_time: bool = False) -> list[dict[str, Any]]:
    """Every decodable record of `topic`; with `log_time`, `ts` is when it was produced (the
    Kafka timestamp), which a hostile sender's `ts` does not tell."""
    c = consumer(config.kafka, group_id=f"bench-fuzz-{time.monotonic_ns()}",
                 **{"enable.partition.eof": True})  # fmt: skip
    out: list[dict[str, Any]] = []
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending, deadline = set(parts), time.monotonic() + 120
        while pending and time.monotonic() < deadline:
            for msg in c.consume(10_000, timeout=0.5):
                error = msg.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                try:
                    record = CODEC.decode(msg.value())[1]
                except CodecError:
                    continue
                if log_time:
                    record["ts"] = msg.timestamp()[1]
                out.append(record)
    finally:
        c.close()
    return out


class Watch:
    """Polls the worker: restarts it if it died, counts health stalls."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        cfg = stack.config
        self.base = f"http://{cfg.worker.web_host}:{cfg.worker.web_port}"
        self.restarts = 0
        self.stall_polls = 0
        self.stalled_partitions: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            worker = self.stack.worker
            if worker is not None and not worker.alive():
                self.restarts += 1
                self.stack.workers[0] = WorkerProcess(self.stack.config, name="worker-r").start()
                continue
            try:
                body = httpx.get(f"{self.base}/health/", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                continue
            if body.get("stalled"):
                self.stall_polls += 1
                self.stalled_partitions |= set(body["stalled"])

    def metrics(self) -> dict[str, Any]:
        try:
            return httpx.get(f"{self.base}/metrics/", timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return {}


def _announce_fleet(config: Any, gen: HostileRecords) -> None:
    p = producer(config.kafka)
    for node in gen.nodes:
        record = {**gen.base("NodeInventory"), "node_id": node,
                  "region": node.rsplit("-fuzz-", 1)[0]}  # fmt: skip
        p.produce(NODE_INVENTORY, CODEC.encode("NodeInventory", record), node.encode())
    p.flush(10)


def _send(config: Any, gen: HostileRecords, per_topic: int, rate: float) -> dict[str, Counter]:
    p = producer(config.kafka, **{"linger.ms": 5})
    counts: dict[str, Counter] = {t: Counter() for t in CONSUMED}
    started, n = time.monotonic(), 0
    for _ in range(per_topic):
        for topic, event in CONSUMED.items():
            record = gen.draw(topic)
            p.produce(topic, record.value, record.key)
            counts[topic]["sent"] += 1
            counts[topic]["expected_invalid"] += _expected_invalid(event, record.value)
            counts[topic][f"kind:{record.kind}"] += 1
            n += 1
            if (wait := started + n / rate - time.monotonic()) > 0:
                time.sleep(wait)
            p.poll(0)
    p.flush(30)
    return counts


def _drain(watch: Watch, sent: int, timeout_s: float) -> tuple[dict[str, Any], int]:
    """Wait until the worker consumed every record we sent (each consumer at least its share;
    the placer and lifecycle also read the worker's own spill-overs and the executor's events)
    and then went quiet for 5 s; (last metrics, longest stretch without progress, s)."""
    deadline, last, stuck_since, worst = time.monotonic() + timeout_s, -1, time.monotonic(), 0.0
    metrics: dict[str, Any] = {}
    per_consumer = sent // len(CONSUMER_OF)
    while time.monotonic() < deadline:
        metrics = watch.metrics() or metrics
        consumed = metrics.get("consumed") or {}
        done = sum(consumed.get(c, 0) for c in CONSUMER_OF.values())
        all_in = all(consumed.get(c, 0) >= per_consumer for c in CONSUMER_OF.values())
        if done != last:
            last, stuck_since = done, time.monotonic()
        elif all_in and time.monotonic() - stuck_since >= 5.0:
            break
        if not all_in:
            worst = max(worst, time.monotonic() - stuck_since)
        time.sleep(1.0)
    return metrics, int(worst)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-topic", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=800.0, help="records per second, all topics")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--keep-data", action="store_true", help="keep the logs and data dir")
    args = ap.parse_args()

    data_dir = Path(tempfile.mkdtemp(prefix="gpuflow-bench-fuzz-"))
    gen = HostileRecords(args.seed, regions=("us-east", "eu-west"))
    config = load_config(data_dir=str(data_dir)).with_regions(gen.regions)
    began = time.monotonic()
    with Stack(config) as stack:
        cfg = stack.config
        watch = Watch(stack)
        watch.thread.start()
        stop = threading.Event()
        twin = ExecutorTwin(cfg, time_scale=0.01)
        executor = threading.Thread(target=twin.run, args=(stop,), daemon=True)
        executor.start()
        _announce_fleet(cfg, gen)
        counts = _send(cfg, gen, args.per_topic, args.rate)
        sent = sum(c["sent"] for c in counts.values())
        metrics, stuck_s = _drain(watch, sent, timeout_s=900)
        stop.set()
        executor.join(15)
        letters = [r for r in _read_all(cfg, DEADLETTER) if r["consumer"] in CONSUMER_OF.values()]
        decisions = _read_all(cfg, DECISIONS_PLACEMENT)
        moves = _read_all(cfg, DECISIONS_MIGRATION)  # a confirmed move frees what it left
        # a release happens when the worker consumes the event, after it was produced: judge
        # the decision log against produce times (hostile events carry any ts they like)
        events = _read_all(cfg, JOBS_EVENTS, log_time=True)
        watch.stop.set()
        watch.thread.join(5)
    if not args.keep_data:
        shutil.rmtree(data_dir, ignore_errors=True)

    by_source = Counter(r["source_topic"] for r in letters)
    topics: dict[str, dict[str, Any]] = {}
    for topic, c in counts.items():
        name = CONSUMER_OF[topic]
        dead = int((metrics.get("dead_lettered") or {}).get(name, 0))
        consumed = int((metrics.get("consumed") or {}).get(name, 0))
        topics[topic] = {
            "sent": c["sent"],
            "consumed": consumed,
            "dead_lettered": dead,
            "dead_letter_topic": by_source.get(topic, 0),
            "processed": consumed - dead,
            "expected_invalid": c["expected_invalid"],
            "kinds": {k[5:]: v for k, v in sorted(c.items()) if k.startswith("kind:")},
        }
    double = overbooked(decisions, events, moves)
    result = {
        "per_topic": args.per_topic,
        "seed": args.seed,
        "rate_per_s": args.rate,
        "records_sent": sent,
        "dead_lettered": sum(t["dead_lettered"] for t in topics.values()),
        "processed": sum(t["processed"] for t in topics.values()),
        "expected_invalid": sum(t["expected_invalid"] for t in topics.values()),
        "worker_restarts": watch.restarts,
        "stalls": watch.stall_polls + (1 if stuck_s >= 30 else 0),
        "stalled_partitions": sorted(watch.stalled_partitions),
        "longest_no_progress_s": stuck_s,
        "faults_caught": metrics.get("faults", {}),
        "ignored_valid_events": metrics.get("ignored", {}),
        "double_bookings": len(double),
        "double_booked_gpus": double[:10],
        "placed": sum(1 for d in decisions if d.get("outcome") == "PLACED"),
        "decisions": dict(Counter(str(d.get("outcome")) for d in decisions)),
        "top_reasons": Counter(
            str(d["reasons"][0])[:80] for d in decisions if d.get("reasons")
        ).most_common(5),
        "topics": topics,
        "wall_s": round(time.monotonic() - began, 1),
        "loadavg": os.getloadavg(),
    }
    path = write_result("fuzz", result)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, args.out)
        path = args.out
    for topic, t in topics.items():
        print(f"{topic:26s} sent {t['sent']:6d}  dead-lettered {t['dead_lettered']:6d} "
              f"(expected {t['expected_invalid']:6d}, on topic {t['dead_letter_topic']:6d})  "
              f"processed {t['processed']:6d}")  # fmt: skip
    print(f"worker restarts {watch.restarts}, stalls {result['stalls']}, "
          f"double bookings {len(double)}, faults {result['faults_caught']}, "
          f"placed {result['placed']}; wrote {path}")  # fmt: skip


if __name__ == "__main__":
    main()
