"""History store benchmark: batched telemetry inserts, the 1-minute rollup query, and the live
sink's events/s through the broker.

    .venv/bin/python bench/history.py [--rows 10000000] [--batch 1000000] [--live-events 100000]
    .venv/bin/python bench/history.py --skip-bulk --out /tmp/live.json   (the live sink alone)

Inserts `rows` per-GPU telemetry rows (one day, 8 regions x 6 GPU models) into a temporary
chDB directory with insert_arrow (the materialized view keeps gpu_util_1m as it goes), then
times the 1-minute rollup for the day, and the same rollup computed from the raw rows. Also
times the sink's own path (row dicts -> Arrow -> insert) on a smaller sample. Then the live
sink: `--live-events` NodeTelemetry events (8 GPUs each, the fleet publisher's producer
settings) are produced to a fresh embedded broker, and a HistorySink (consume, decode, rows,
Arrow, insert, commit) is timed from its first consumed message until every event is written
(`live_sink_events_per_s`); the seconds before that (opening the store, joining the consumer
group: ~5 s here) are `live_startup_s`, and `..._from_start` includes them.
Writes bench/results/history.json (or --out).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench._common import report_result
from infra.config import load_config
from infra.store import Store, open_store
from infra.store import samples as S
from infra.store.rows import RowContext, to_rows

REGIONS = [f"region-{i}" for i in range(8)]
MODELS = ["H100", "H200", "A100", "L40S", "MI300X", "B200"]
DAY_MS = 86_400_000
ROLLUP = """SELECT minute, region, gpu_model, avgMerge(util_avg) AS util, maxMerge(util_max)
FROM gpu_util_1m WHERE minute >= {lo:DateTime} AND minute < {hi:DateTime}
GROUP BY minute, region, gpu_model ORDER BY minute, region, gpu_model"""
RAW = """SELECT toStartOfMinute(ts) AS minute, region, gpu_model, avg(util_pct), max(util_pct)
FROM node_telemetry WHERE ts >= {lo:DateTime64(3)} AND ts < {hi:DateTime64(3)}
GROUP BY minute, region, gpu_model ORDER BY minute, region, gpu_model"""


def telemetry_chunk(store: Store, n: int, start: int, day0: int, rng: Any) -> pa.Table:
    cols = dict(store.columns("node_telemetry"))
    node = rng.integers(0, 5000, n)
    data: dict[str, Any] = {
        "ts": pa.array(day0 + rng.integers(0, DAY_MS, n), pa.timestamp("ms", tz="UTC")),
        # 8 GPU rows per event share its 32-hex event id, as the sink writes them
        "event_id": pa.array([f"{(start + i) // 8:032x}" for i in range(n)]),
        "schema": np.ones(n, np.uint16),
        "node_id": pa.array([f"node-{k:05d}" for k in node]),
        # LowCardinality columns go as Arrow dictionaries, as Store.arrow() builds them
        "region": pa.DictionaryArray.from_arrays((node % 8).astype(np.int32), REGIONS),
        "gpu_model": pa.DictionaryArray.from_arrays((node % 6).astype(np.int32), MODELS),
        "tier": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), ["REALTIME"]),
        "gpu_index": (np.arange(n) % 8).astype(np.uint16),
        "util_pct": rng.random(n, np.float32) * 100,
        "power_w": rng.random(n, np.float32) * 700,
    }
    arrays = []
    for name, ch_type in cols.items():
        if name in data:
            arrays.append(
                pa.array(data[name]) if not isinstance(data[name], pa.Array) else data[name]
            )
        elif ch_type.startswith("Nullable"):
            arrays.append(pa.nulls(n, pa.float32()))
        elif ch_type == "Bool":
            arrays.append(pa.array(np.ones(n, bool)))
        elif ch_type.startswith("Array"):
            arrays.append(pa.array([[]] * n, pa.list_(pa.int32())))
        else:
            arrays.append(pa.array(np.zeros(n, np.float32 if "Float" in ch_type else np.uint32)))
    return pa.Table.from_arrays(arrays, names=list(cols))


def time_query(store: Store, sql: str, params: dict[str, Any], runs: int = 3) -> float:
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        store.query(sql, params)
        best = min(best, time.perf_counter() - t)
    return best


def sink_path_rate(store: Store, events: int, day0: int) -> float:
    """Row dicts -> Arrow -> insert, as the sink does (decoding excluded)."""
    ctx = RowContext({"n1": "H100"})
    rows: list[dict[str, Any]] = []
    for i in range(events):
        rows += to_rows("NodeTelemetry", S.node_telemetry("n1", "eu", day0 + i, [50.0] * 8), ctx)[1]
    t = time.perf_counter()
    store.insert_rows("node_telemetry", rows)
    return len(rows) / (time.perf_counter() - t)


def live_sink_rate(events: int, tmp: str, engine: str = "logbroker") -> dict[str, Any]:
    """Events/s the HistorySink stores when `events` telemetry events wait in the broker."""
    from agents.publisher import EventPublisher
    from infra.broker import EmbeddedBroker
    from infra.kafka import ensure_topics
    from infra.topics import NODE_TELEMETRY
    from streams.history.sink import HistorySink

    base = load_config(env={"GPUFLOW_BROKER_ENGINE": engine}, data_dir=tmp)
    with EmbeddedBroker(base.broker, Path(tmp)) as broker:
        config = base.with_bootstrap(broker.bootstrap_servers)
        ensure_topics(config.kafka)
        pub = EventPublisher(config)
        now = int(time.time() * 1000)
        regions = ("us-east", "eu-west", "us-west", "ap-southeast")
        for start in range(0, events, 10_000):
            pub.publish(
                NODE_TELEMETRY,
                (
                    S.node_telemetry(f"n{i % 10_000}", regions[i % 4], now + i, [50.0] * 8)
                    for i in range(start, min(events, start + 10_000))
                ),
            )
        pub.flush(60)
        sink = HistorySink(config, topics=[NODE_TELEMETRY])
        t = time.perf_counter()
        cpu0 = time.process_time()  # this process runs only the sink now: load-insensitive
        sink.start()
        deadline = time.monotonic() + 600
        first: tuple[float, float] | None = None  # (wall, cpu) when the first message came
        while sink.stats.events_written < events and time.monotonic() < deadline:
            if first is None and sink.stats.consumed:
                first = (time.perf_counter(), time.process_time())
            time.sleep(0.005)
        elapsed = time.perf_counter() - t
        cpu_s = time.process_time() - cpu0
        stats = sink.stats
        sink.stop()
    first = first or (t, cpu0)
    steady_s, steady_cpu_s = t + elapsed - first[0], cpu0 + cpu_s - first[1]
    return {
        "live_events": events,
        "live_events_written": stats.events_written,
        "live_rows_written": stats.rows_written,
        # opening the store and joining the consumer group, before the first message
        "live_startup_s": round(first[0] - t, 2),
        "live_s": round(steady_s, 2),
        # from the first message consumed to the last event written: the sink's throughput
        "live_sink_events_per_s": round(stats.events_written / steady_s),
        "live_sink_rows_per_s": round(stats.rows_written / steady_s),
        "live_sink_cpu_s": round(steady_cpu_s, 2),
        "live_sink_events_per_cpu_s": round(stats.events_written / steady_cpu_s),
        # from sink.start(), startup included (what this bench reported before 2026-12)
        "live_sink_events_per_s_from_start": round(stats.events_written / elapsed),
        "live_sink_cpu_s_from_start": round(cpu_s, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=1_000_000)
    ap.add_argument("--no-rollup", action="store_true", help="detach the rollup MV (raw rate)")
    ap.add_argument("--live-events", type=int, default=100_000, help="0: skip the live sink")
    ap.add_argument("--skip-bulk", action="store_true", help="the live sink only")
    ap.add_argument("--engine", default="logbroker", choices=["logbroker", "tansu"])
    ap.add_argument("--out", help="result file (default bench/results/history.json)")
    args = ap.parse_args()
    if args.skip_bulk:
        with tempfile.TemporaryDirectory() as tmp:
            report_result(
                "history", live_sink_rate(args.live_events, tmp, args.engine), out=args.out
            )
        return
    rng = np.random.default_rng(7)
    day0 = (int(time.time() * 1000) // DAY_MS - 1) * DAY_MS  # yesterday, inside the TTL
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        store = open_store(load_config(env={}, data_dir=tmp))
        open_s = time.perf_counter() - t
        if args.no_rollup:
            store.command("DETACH TABLE gpu_util_1m_mv")
        chunk_s = []
        for start in range(0, args.rows, args.batch):
            chunk = telemetry_chunk(store, min(args.batch, args.rows - start), start, day0, rng)
            t = time.perf_counter()
            store.insert_arrow("node_telemetry", chunk)
            chunk_s.append(round(time.perf_counter() - t, 3))
        insert_s = sum(chunk_s)
        count = store.query("SELECT count() FROM node_telemetry").scalar()
        params = {"lo": day0 // 1000, "hi": (day0 + DAY_MS) // 1000}
        rollup_s = None if args.no_rollup else time_query(store, ROLLUP, params)
        raw_s = time_query(store, RAW, {"lo": day0 / 1000, "hi": (day0 + DAY_MS) / 1000}, 1)
        groups = None if args.no_rollup else len(store.query(ROLLUP, params).rows)
        sink_rate = sink_path_rate(store, 25_000, day0)
        store.close()
    live: dict[str, Any] = {}
    if args.live_events:
        with tempfile.TemporaryDirectory() as tmp:
            live = live_sink_rate(args.live_events, tmp, args.engine)
    result = {
        "engine": "chDB (clickhouse-connect chdb://), insert_arrow"
        + ("" if args.no_rollup else ", MV to gpu_util_1m on insert"),
        "rows": int(count),
        "batch_rows": args.batch,
        "open_store_s": round(open_s, 3),
        "insert_s": round(insert_s, 3),
        "chunk_insert_s": chunk_s,
        "rows_per_s": round(count / insert_s),
        "rows_per_s_median_chunk": round(args.batch / sorted(chunk_s)[len(chunk_s) // 2]),
        "rows_per_s_best_chunk": round(args.batch / min(chunk_s)),
        "rollup_query_s": rollup_s and round(rollup_s, 4),
        "rollup_groups": groups,
        "raw_1m_groupby_query_s": round(raw_s, 3),
        "sink_path_rows_per_s": round(sink_rate),
        **live,
    }
    report_result("history", result, out=args.out)


if __name__ == "__main__":
    main()
