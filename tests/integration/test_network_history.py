"""Quotas and link utilisation land in ClickHouse: LinkTelemetry and BandwidthQuota events on
the real broker -> HistorySink -> real chDB; the ready query "busiest links by hour and who
used them" (docs/queries.md) against numbers worked out by hand."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.broker import EmbeddedBroker
from infra.config import load_config
from infra.kafka import ensure_topics, producer
from infra.store import Store, open_store
from infra.store import queries as Q
from infra.store import samples as S
from infra.topics import topic_for_event
from schemas import SingleObjectCodec
from streams.history.sink import HistorySink

pytestmark = pytest.mark.integration

CODEC = SingleObjectCodec()
HOUR = 3_600_000
H = (int(time.time() * 1000) // HOUR - 3) * HOUR  # hour-aligned, within the tables' TTL


def _quota(job: str, link: str, at_s: float, gbps: float, valid_s: float, tenant: str):
    rec = S.bandwidth_quota(job, link, H + int(at_s * 1000), gbps=gbps)
    return rec | {"valid_until_ts": H + int(valid_s * 1000), "tenant": tenant}


def _events() -> list[tuple[str, dict[str, Any]]]:
    links = [
        S.link_telemetry("eu", "us", H + 60_000, used=10.0),  # eu>us 100G: 10 then 30 -> 20 %
        S.link_telemetry("eu", "us", H + 1_800_000, used=30.0),
        S.link_telemetry("us", "eu", H + 60_000, used=5.0) | {"capacity_gbps": 50.0},  # 10 %
        S.link_telemetry("eu", "us", H + HOUR + 60_000, used=50.0),  # next hour: 50 %
    ]
    quotas = [
        # j1: 10G from 0 s, replaced at 10 s by 20G valid to 40 s: 10 x 10 + 20 x 30 = 700 Gbit
        # = 87.5 GB
        _quota("j1", "eu>us", 0, 10.0, 30, "a"),
        _quota("j1", "eu>us", 10, 20.0, 40, "a"),
        # j2: 40G from 100 s, revoked at 115 s: 40 x 15 = 600 Gbit = 75 GB
        _quota("j2", "eu>us", 100, 40.0, 130, "b"),
        _quota("j2", "eu>us", 115, 0.0, 115, "b"),
        # j3 on us>eu: 8G for its 30 s: 240 Gbit = 30 GB
        _quota("j3", "us>eu", 0, 8.0, 30, "b"),
    ]
    return [("LinkTelemetry", r) for r in links] + [("BandwidthQuota", r) for r in quotas]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp: Path = tmp_path_factory.mktemp("network-history")
    base = load_config(env={}, data_dir=str(tmp / "data"))
    with EmbeddedBroker(base.broker, tmp / "broker") as broker:
        cfg = base.with_bootstrap(broker.bootstrap_servers)
        cfg = dataclasses.replace(
            cfg,
            worker=dataclasses.replace(cfg.worker, app_id=f"net-hist-{uuid.uuid4().hex[:8]}"),
            store=dataclasses.replace(cfg.store, flush_s=0.3),
        )
        ensure_topics(cfg.kafka)
        db = open_store(cfg, database=f"net_{uuid.uuid4().hex[:8]}")
        sink = HistorySink(cfg, store=db).start()
        events = _events()
        prod = producer(cfg.kafka)
        for name, rec in [*events, events[-2]]:  # the last quota twice: at-least-once
            prod.produce(topic_for_event(name), CODEC.encode(name, rec), key=b"k")
        prod.flush(10)
        deadline = time.monotonic() + 30
        while sink.stats.events_written + sink.stats.duplicates < len(events) + 1:
            assert time.monotonic() < deadline, f"sink stalled: {sink.stats}"
            sink.flush_now(5)
            time.sleep(0.05)
        sink.stop()
        try:
            yield db
        finally:
            db.close()


def test_busiest_links_by_hour(store: Store) -> None:
    rows = store.query(Q.BUSIEST_LINKS_BY_HOUR).dicts()
    got = [
        (int(r["hour"].timestamp() * 1000), r["link_id"], r["capacity_gbps"],
         r["cross_traffic_pct"], r["granted_gb"], r["granted_pct"], r["busy_pct"],
         [tuple(u) for u in r["top_users"]])
        for r in rows
    ]  # fmt: skip
    assert got == [
        # eu>us, hour H: granted 87.5 + 75 = 162.5 GB = 1300 Gbit over 100G x 3600 s = 0.36 %;
        # busy = 20 % cross traffic + 0.36 %
        (H, "eu>us", 100.0, 20.0, 162.5, 0.36, 20.36, [("j1", "a", 87.5), ("j2", "b", 75.0)]),
        # us>eu, hour H: 30 GB = 240 Gbit over 50G x 3600 s = 0.13 %; busy 10 + 0.13
        (H, "us>eu", 50.0, 10.0, 30.0, 0.13, 10.13, [("j3", "b", 30.0)]),
        # eu>us, the next hour: cross traffic only
        (H + HOUR, "eu>us", 100.0, 50.0, 0.0, 0.0, 50.0, []),
    ]


def test_quota_columns_and_link_rollup(store: Store) -> None:
    quota = store.query(
        "SELECT job_id, src_region, dst_region, tenant, reason FROM bandwidth_quotas FINAL "
        "WHERE job_id = 'j3'"
    ).rows
    assert quota == (("j3", "us", "eu", "b", "new"),)
    util = store.query(
        "SELECT link_id, round(avgMerge(util_avg), 3), maxMerge(used_max) FROM link_util_1m "
        "WHERE minute = toDateTime({m:UInt32}, 'UTC') GROUP BY link_id ORDER BY link_id",
        {"m": str((H + 60_000) // 1000)},
    ).rows
    assert util == (("eu>us", 0.1, 10.0), ("us>eu", 0.1, 5.0))
