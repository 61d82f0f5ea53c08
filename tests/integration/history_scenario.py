"""The history scenario: known events on the real broker, one HistorySink run, real ClickHouse.

A broker, a sink run, a replay and garbage bytes, once per module; `test_history.py` checks
each ready query against numbers computed from the events produced here. Runs on the embedded
chDB engine always, and on a ClickHouse server too when CLICKHOUSE_URL is set.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.broker import EmbeddedBroker
from infra.config import Config, load_config
from infra.kafka import consumer, ensure_topics, producer
from infra.store import Store, open_store
from infra.store import samples as S
from infra.topics import DEADLETTER, NODE_TELEMETRY, topic_for_event
from schemas import SingleObjectCodec
from streams.history.sink import HistorySink

CLICKHOUSE_URL = os.environ.get("CLICKHOUSE_URL", "")
REPO = Path(__file__).resolve().parents[2]
CODEC = SingleObjectCodec()
HOUR = 3_600_000
H = (int(time.time() * 1000) // HOUR - 3) * HOUR  # three hours ago, hour-aligned: within TTL


def _send(prod: Any, events: list[tuple[str, dict[str, Any]]]) -> None:
    for name, rec in events:
        prod.produce(topic_for_event(name), CODEC.encode(name, rec), key=b"k")
    prod.flush(10)


def _wait(sink: HistorySink, events: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while sink.stats.events_written + sink.stats.duplicates < events:
        assert time.monotonic() < deadline, f"sink stalled: {sink.stats}"
        sink.flush_now(5)
        time.sleep(0.05)


def _inventory() -> list[tuple[str, dict[str, Any]]]:
    return [
        ("NodeInventory", S.node_inventory(n, r, m, H - 60_000))
        for n, r, m in (("n1", "eu", "H100"), ("n2", "eu", "A100"), ("n3", "us", "H100"))
    ]


def _telemetry() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for minute in range(5):
        for k, sec in enumerate((10, 40)):
            for j, (node, region) in enumerate((("n1", "eu"), ("n2", "eu"), ("n3", "us"))):
                utils = [float((minute * 7 + k * 3 + j * 11 + g * 5) % 100) for g in range(2)]
                rec = S.node_telemetry(node, region, H + minute * 60_000 + sec * 1000, utils)
                for g, gpu in enumerate(rec["gpus"]):
                    gpu["power_w"] = 300.0 + 10 * minute + 20 * g + k
                out.append(("NodeTelemetry", rec))
    return out


def _jobs() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(10):
        sub = H + i * 1000
        wait = (i * 137) % 900 + 10
        kwargs: dict[str, Any] = {
            "submitted_ts": sub,
            "priority": 5 if i % 3 == 0 else 0,
            "tenant": "a" if i % 2 else "b",
            "worker_us": 100 + i * 37,
            "nodes": ("n1",) if i % 4 else ("n1", "n2"),
            "gpus_per_node": 1 + i % 2,
            "price_per_hour": 2.0 + i,
        }
        if i == 9:
            out.append(
                ("PlacementDecision", S.placement(f"j{i}", sub + 5, outcome="QUEUED", **kwargs))
            )
        out.append(("PlacementDecision", S.placement(f"j{i}", sub + wait, **kwargs)))
        out.append(("JobEvent", S.job_event(f"j{i}", "eu", "STARTED", sub + wait + 100)))
        if i != 8:  # j8 still runs: no GPU-hours yet
            out.append(
                (
                    "JobEvent",
                    S.job_event(f"j{i}", "eu", "FINISHED", sub + wait + 100 + (i + 1) * 60_000),
                )
            )
    out.append(
        (
            "PlacementDecision",
            S.placement(
                "jx", H + 50, submitted_ts=H, outcome="REJECTED", region=None, worker_us=9000
            ),
        )
    )
    return out


def _others() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("GridSignal", S.grid_signal("eu", H, carbon=200.0)),
        ("GridSignal", S.grid_signal("eu", H + 1_800_000, carbon=300.0)),
        ("GridSignal", S.grid_signal("us", H, carbon=400.0)),
        ("PreemptionDecision", S.preemption("v1", "j1", "eu", H, gpus=2)),
        ("PreemptionDecision", S.preemption("v2", "j2", "eu", H, gpus=3)),
        ("PreemptionDecision", S.preemption("v3", "j3", "us", H, gpus=1)),
        ("MigrationDecision", S.migration("m1", "eu", "us", H)),
        ("MigrationDecision", S.migration("m2", "eu", "eu", H)),
        ("DemandForecast", S.demand_forecast("eu", "H100", H, 600, [3.0, 5.0, 4.0])),
        ("DemandForecast", S.demand_forecast("eu", "*", H, 600, [10.0, 6.0])),
        ("BandwidthQuota", S.bandwidth_quota("j1", "eu>us", H)),
        ("LinkTelemetry", S.link_telemetry("eu", "us", H)),
        ("RoutedJob", S.routed_job(S.job_submitted("j1", "a", H), "eu", H)),
        ("JobSubmitted", S.job_submitted("j1", "a", H)),
    ]
    for step, free in enumerate(((5, 2), (3, 1), (1, 0))):
        for k in range(2):  # two summaries per 10-minute step
            ts = H + step * 600_000 + k * 240_000 + 1000
            out.append(
                (
                    "RegionSummary",
                    S.region_summary(
                        "eu",
                        ts,
                        total={"H100": 8, "A100": 4},
                        free={"H100": free[0] + k, "A100": free[1]},
                        queue_depth=step + k,
                    ),
                )
            )
    return out


@dataclasses.dataclass
class Scenario:
    store: Store
    events: dict[str, list[dict[str, Any]]]
    sink_stats: Any
    dead_letters: list[Any]


def _config(tmp: Path, servers: str, backend: str) -> Config:
    base = load_config(env={}, data_dir=str(tmp / "data"))
    cfg = dataclasses.replace(
        base.with_bootstrap(servers),
        worker=dataclasses.replace(base.worker, app_id=f"gpuflow-hist-{uuid.uuid4().hex[:8]}"),
    )
    store = dataclasses.replace(cfg.store, batch_rows=500, flush_s=0.3)
    if backend == "server":
        store = dataclasses.replace(store, dsn=CLICKHOUSE_URL)
    return dataclasses.replace(cfg, store=store)


def _run_sink(cfg: Config, database: str) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    prod = producer(cfg.kafka)
    store = open_store(cfg, database=database)
    sink = HistorySink(cfg, store=store).start()
    inv, tel, jobs, others = _inventory(), _telemetry(), _jobs(), _others()
    _send(prod, inv)
    _wait(sink, len(inv))
    unfit = ("JobSubmitted", S.job_submitted("j-unfit", "a", H, gpu_count=-1))  # UInt16 column
    _send(prod, [*tel, *jobs, *others, unfit])
    prod.produce(NODE_TELEMETRY, b"\x00garbage", key=b"bad-key")
    _send(prod, [])
    total = len(inv) + len(tel) + len(jobs) + len(others) + 1
    _wait(sink, total)
    replay = [e for e in jobs if e[0] == "PlacementDecision"] + tel[:6]
    _send(prod, replay)  # at-least-once: the same event ids again
    _wait(sink, total + len(replay) + 2)  # + the two dead letters, stored too
    sink.stop()
    stats = sink.stats
    store.close()
    events: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for name, rec in inv + tel + jobs + others:
        events[name].append(rec)
    return stats, events


def _dead_letters(cfg: Config) -> list[Any]:
    c = consumer(cfg.kafka, f"dl-{uuid.uuid4().hex[:6]}")
    c.subscribe([DEADLETTER])
    found: list[Any] = []
    deadline = time.monotonic() + 15
    while len(found) < 2 and time.monotonic() < deadline:
        found += [m for m in c.consume(100, timeout=0.5) if m.error() is None]
    c.close()
    return [CODEC.decode(m.value())[1] for m in found]


def _count_in_new_process(cfg: Config, database: str) -> int:
    code = (
        "import sys; from infra.config import load_config; from infra.store import open_store;"
        f"s = open_store(load_config(env={{}}, data_dir={str(cfg.data_dir)!r}),"
        f" database={database!r}, migrate=False);"
        "print(s.query('SELECT count() FROM node_telemetry FINAL').scalar()); s.close()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(out.stdout.strip().splitlines()[-1])


# the chDB engine always; a ClickHouse server only when one is named (none installs here):
# CLICKHOUSE_URL=http://user:pass@host:8123 runs the same suite against it
BACKENDS = ["chdb", *(["server"] if CLICKHOUSE_URL else [])]


@pytest.fixture(scope="module", params=BACKENDS)
def scenario(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    tmp = tmp_path_factory.mktemp("history")
    base = load_config(env={})
    database = f"hist_{uuid.uuid4().hex[:8]}"
    with EmbeddedBroker(base.broker, tmp / "broker") as broker:
        cfg = _config(tmp, broker.bootstrap_servers, request.param)
        ensure_topics(cfg.kafka)
        stats, events = _run_sink(cfg, database)
        dead = _dead_letters(cfg)
        if request.param == "chdb":  # the directory outlives this process's client
            assert _count_in_new_process(cfg, database) == 5 * 2 * 3 * 2
        store = open_store(cfg, database=database)  # a fresh client on the same data
        try:
            yield Scenario(store, events, stats, dead)
        finally:
            if request.param == "server":
                store.command(f"DROP DATABASE IF EXISTS {database}")
            store.close()
