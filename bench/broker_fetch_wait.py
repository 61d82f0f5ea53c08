"""What a consumer's fetch settings cost the embedded broker while records trickle in.

    python bench/broker_fetch_wait.py [--stored 3000] [--rate 20] [--seconds 20]

Tansu answers a fetch by listing every batch stored in each partition that has data, and holds
the fetch for its wait. This measures, for one consumer per fetch setting, the broker's CPU
while a producer writes `--rate` single-record batches a second into a partition that already
holds `--stored` batches (a fresh topic per setting, filled the same way). The settings: the
decision path's consumers (`fetch.wait.max.ms` 50), the history sink's (1,000 ms and
`fetch.min.bytes` 1 MB), and the sink's wait without the minimum. Also the consumer's fetch
requests (librdkafka's statistics) and how late each record was read. Writes
bench/results/broker_fetch_wait.json, or `--out`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from bench._common import ProcessClock, load_average, percentiles, report_result
from bench.broker_fetch import fill_partition
from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import admin

SETTINGS = {
    "wait50": {"fetch.wait.max.ms": 50, "fetch.min.bytes": 1},
    "wait1000_min1MB": {"fetch.wait.max.ms": 1000, "fetch.min.bytes": 1_000_000},
    "wait1000_min1": {"fetch.wait.max.ms": 1000, "fetch.min.bytes": 1},
    "wait2000_min1": {"fetch.wait.max.ms": 2000, "fetch.min.bytes": 1},
}


def _trickle(bootstrap: str, topic: str, rate: float, stop: threading.Event) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    gap = 1.0 / rate
    next_at = time.monotonic()
    while not stop.is_set():
        p.produce(topic, value=str(time.time()).encode(), partition=0)
        p.poll(0)
        next_at += gap
        time.sleep(max(0.0, next_at - time.monotonic()))
    p.flush(5)


def one_setting(
    broker: EmbeddedBroker, name: str, stored: int, rate: float, seconds: float
) -> dict[str, Any]:
    bootstrap = broker.bootstrap_servers
    topic = f"probe.wait.{name}"
    admin_client = admin(load_config(env={}).with_bootstrap(bootstrap).kafka)
    admin_client.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    fill_partition(bootstrap, topic, 0, stored, 1)
    fetches: list[int] = []

    def stats(raw: str) -> None:
        brokers = json.loads(raw).get("brokers", {})
        fetches.append(sum(int(b.get("req", {}).get("Fetch", 0)) for b in brokers.values()))

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wait-{name}",
                  "enable.auto.commit": False, "statistics.interval.ms": 1000,
                  "stats_cb": stats, **SETTINGS[name]})  # fmt: skip
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    c.consume(10, timeout=1.0)
    stop = threading.Event()
    producer = threading.Thread(target=_trickle, args=(bootstrap, topic, rate, stop))
    clock = ProcessClock({"broker": broker.pid})
    producer.start()
    started = time.monotonic()
    lateness: list[float] = []
    first_fetches = fetches[-1] if fetches else 0
    while time.monotonic() - started < seconds:
        for msg in c.consume(100, timeout=0.2):
            value = msg.value()
            if msg.error() is None and value is not None:
                lateness.append((time.time() - float(value)) * 1000)
    cpu_s = clock.cpu_s()["broker"]
    elapsed = time.monotonic() - started
    requests = (fetches[-1] if fetches else 0) - first_fetches
    stop.set()
    producer.join(10)
    c.close()
    late = percentiles(lateness)
    return {
        **SETTINGS[name],
        "broker_cpu_pct": round(cpu_s / elapsed * 100, 1),
        "fetch_requests_per_s": round(requests / elapsed, 1),
        "records_read": len(lateness),
        "read_late_ms_p50": round(late["p50"], 1),
        "read_late_ms_p99": round(late["p99"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stored", type=int, default=3000, help="batches stored before measuring")
    ap.add_argument("--rate", type=float, default=20.0, help="single-record batches a second")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--out", help="result file (default bench/results/broker_fetch_wait.json)")
    args = ap.parse_args()
    unknown = [s for s in args.settings.split(",") if s not in SETTINGS]
    if unknown:
        ap.error(f"--settings: unknown {unknown[0]!r}; known: {', '.join(SETTINGS)}")
    load_before = load_average()
    base = load_config(env={})
    log_dir = Path(tempfile.mkdtemp(prefix="gpuflow-bench-wait-"))
    tansu = dataclasses.replace(base.broker, engine="tansu")  # what this bench measures
    with EmbeddedBroker(tansu, log_dir) as b:
        by_setting = {
            s: one_setting(b, s, args.stored, args.rate, args.seconds)
            for s in args.settings.split(",")
        }
    report_result(
        "broker_fetch_wait",
        {"stored_batches": args.stored, "rate_per_s": args.rate, "seconds": args.seconds,
         "by_setting": by_setting, "load_average": load_before},
        out=args.out,
    )  # fmt: skip


if __name__ == "__main__":
    main()
