"""The telemetry lane applies what the one-event path applies: the same fleet arrays, ignored
counts, protection windows and actions, utilisation; and its column check passes only what
`streams.validation` passes."""

from __future__ import annotations

import copy
import math
import random
import time
from collections import Counter
from typing import Any

import numpy as np
import pytest

from agents import SimulatedFleet, TierPolicy, demo_fleet, generate_nodes
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.history.telemetry import TelemetryLane
from streams.runtime.activity import Activity
from streams.runtime.fleet import FleetTracker
from streams.scheduler.core import Scheduler
from streams.scheduler.validation import Rules, problems
from streams.telemetry.reports import Reports, acceptable

CODEC = SingleObjectCodec()
NOW = int(time.time() * 1000)


def world(inventory: list[dict[str, Any]]) -> tuple[FleetTracker, Activity]:
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    for record in inventory:
        s.nodes[record["node_id"]] = record
    s.rebuild({})
    return FleetTracker(s, stale_after_s=30), Activity()


def reports_stream(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Inventory of 40 nodes and 400 reports of them: full and delta, sick GPUs, throttling,
    ECC and critical XIDs, HBM saturation, heartbeats, replays out of order, unknown nodes."""
    spec = demo_fleet()
    fleet = SimulatedFleet(spec, generate_nodes(spec, 40, seed=seed), seed=seed,
                           policy=TierPolicy(full_snapshot_s=1e-3))  # fmt: skip
    inventory = [CODEC.decode(CODEC.encode("NodeInventory", e))[1]
                 for e in fleet.inventory_events(NOW - 600_000)]  # fmt: skip
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for tick in range(10):
        for event in fleet.telemetry_events(NOW - 600_000 + tick * 30_000):
            r = copy.deepcopy(event)
            for g in r["gpus"]:
                roll = rng.random()
                if roll < 0.05:
                    g["healthy"] = False
                elif roll < 0.15:
                    g["perf_factor"] = rng.choice([0.5, 0.8, 1.0, 2.5])
                if rng.random() < 0.3:
                    g["mem_bw_util_pct"] = 95.0
                if rng.random() < 0.03:
                    g["ecc_errors"] = int(g.get("ecc_errors") or 0) + 1
                if rng.random() < 0.02:
                    g["xid_events"] = [79, 13]
            kind = rng.random()
            if kind < 0.1:
                r["gpus"] = r["gpus"][: rng.randint(0, 2)]  # a delta or a heartbeat
            elif kind < 0.15:
                r["node_healthy"] = False
            out.append(r)
            if rng.random() < 0.05:  # a replay of an older report: out of order
                out.append(
                    {**copy.deepcopy(r), "ts": r["ts"] - 5_000, "event_id": r["event_id"] + "x"}
                )
        out.append({**copy.deepcopy(out[-1]), "node_id": f"ghost-{tick}"})  # unknown node
    return inventory, out


def columns(records: list[dict[str, Any]]) -> Any:
    return TelemetryLane(CODEC).decode([CODEC.encode("NodeTelemetry", r) for r in records])


def health(tracker: FleetTracker) -> dict[str, Any]:
    nodes = tracker.protection.health._nodes
    return {n: (dict(v.bw), dict(v.ecc), list(v.levels), list(v.errors), v.advised,
                v.cordoned, v.saturated_since) for n, v in nodes.items()}  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("batch", [1, 7, 1000])
def test_batches_apply_what_single_reports_apply(seed: int, batch: int) -> None:
    inventory, records = reports_stream(seed)
    one, one_activity = world(inventory)
    many, many_activity = world(inventory)
    sent_one: Counter[tuple[str, str]] = Counter()
    for r in records:  # as the generic path sees it: through Avro (floats are 32-bit there)
        reports = Reports.from_records([CODEC.decode(CODEC.encode("NodeTelemetry", r))[1]])
        sent_one.update((m.topic, m.key) for m in one.on_reports(reports))
        one_activity.on_telemetry(reports, one.s.state)
    sent_many: Counter[tuple[str, str]] = Counter()
    for start in range(0, len(records), batch):
        chunk = records[start : start + batch]
        cols = columns(chunk)
        assert cols.ok.all()
        reports = Reports.from_columns(cols, cols.ok)
        sent_many.update((m.topic, m.key) for m in many.on_reports(reports))
        many_activity.on_telemetry(reports, many.s.state)

    a, b = one.s.state, many.s.state
    assert np.array_equal(a.gpu_ok, b.gpu_ok) and np.array_equal(a.perf, b.perf)
    assert np.array_equal(a.node_ok, b.node_ok) and np.array_equal(a.free_whole, b.free_whole)
    assert one.ignored == many.ignored and one.ignored["telemetry_out_of_order"] > 0
    assert one.ignored["telemetry_unknown_node"] == 10
    assert one._last_ts == many._last_ts and one._heard == many._heard
    assert health(one) == health(many)
    assert any(v[5] for v in health(one).values())  # something was cordoned on the way
    assert sent_one == sent_many and sent_one
    util = one_activity.utilisation(one.s.state)
    assert util and many_activity.utilisation(many.s.state) == pytest.approx(util)
    for region, window in one._windows.items():
        assert many._windows[region].samples == window.samples
        assert many._windows[region].util_sum == pytest.approx(window.util_sum)


def test_rounds_keep_each_nodes_reports_in_order() -> None:
    records = [
        {"node_id": n, "region": "eu", "ts": ts, "gpus": []}
        for n, ts in [("a", 1), ("b", 1), ("a", 2), ("a", 3), ("c", 1), ("b", 2)]
    ]
    rounds = list(Reports.from_records(records).rounds())
    assert [list(zip(r.node_id, r.ts.tolist(), strict=True)) for r in rounds] == [
        [("a", 1), ("b", 1), ("c", 1)],
        [("a", 2), ("b", 2)],
        [("a", 3)],
    ]


def good() -> dict[str, Any]:
    return {
        "event_id": "n1:1", "ts": NOW, "schema": 1, "node_id": "n1", "region": "eu",
        "tier": "REALTIME", "full_snapshot": True, "node_healthy": True,
        "gpus": [
            {"index": i, "healthy": True, "util_pct": 50.0, "mem_used_mib": 100,
             "mem_bw_util_pct": 10.0, "nvlink_tx_mbps": 1.0, "nvlink_rx_mbps": 1.0,
             "temperature_c": 60.0, "power_w": 300.0, "sm_clock_mhz": 1400,
             "throttle_reasons": 0, "ecc_errors": 0, "xid_events": [], "perf_factor": 1.0}
            for i in range(2)
        ],
        "disk_read_mbps": None, "disk_write_mbps": None, "net_rx_mbps": 5.0,
        "net_tx_mbps": None, "energy_j": None, "perf_per_watt": None,
    }  # fmt: skip


def gpu(**kw: Any) -> Any:
    def change(r: dict[str, Any]) -> None:
        r["gpus"][1].update(kw)

    return change


BAD = {
    "empty node_id": lambda r: r.update(node_id=""),
    "blank node_id": lambda r: r.update(node_id="   "),
    "long node_id": lambda r: r.update(node_id="n" * 300),
    "blank event_id": lambda r: r.update(event_id="\t"),
    "empty region": lambda r: r.update(region=""),
    "new region": lambda r: r.update(region="mars"),
    "ts ahead": lambda r: r.update(ts=NOW + 3_600_000),
    "negative net": lambda r: r.update(net_rx_mbps=-1.0),
    "NaN energy": lambda r: r.update(energy_j=math.nan),
    "util > 100": gpu(util_pct=101.0),
    "NaN util": gpu(util_pct=math.nan),
    "hot": gpu(temperature_c=900.0),
    "negative power": gpu(power_w=-5.0),
    "infinite nvlink": gpu(nvlink_tx_mbps=math.inf),
    "perf 11": gpu(perf_factor=11.0),
    "index 128": gpu(index=128),
    "same index twice": gpu(index=0),
    "negative ecc": gpu(ecc_errors=-1),
    "many xids": gpu(xid_events=[13] * 1025),
}


def rules() -> Rules:
    return Rules(known_regions={"eu"}, clock_ms=lambda: NOW)


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_column_check_leaves_every_invalid_report_to_the_generic_path(name: str) -> None:
    record = good()
    BAD[name](record)
    assert problems("NodeTelemetry", record, rules()) or name == "new region"
    batch = columns([good(), record, good()])
    assert acceptable(batch, rules()).tolist() == [True, False, True]


def test_what_the_column_check_passes_validation_passes() -> None:
    rng = random.Random(3)
    records = []
    for _ in range(300):
        r = good()
        for name in rng.sample(sorted(BAD), rng.choice([0, 0, 1, 2])):
            BAD[name](r)
        records.append(r)
    passed = acceptable(columns(records), rules())
    for r, ok in zip(records, passed.tolist(), strict=True):
        if ok:
            assert problems("NodeTelemetry", r, rules()) == []
    assert passed.sum() > 50


def test_lags_counted_at_once_read_as_one_by_one() -> None:
    from prometheus_client import CollectorRegistry, Histogram

    from streams.base.prometheus import observe_many

    values = np.array([0.0, 0.004, 0.05, 0.05, 0.7, 3.0, 12.0, 900.0])
    samples = []
    for at_once in (False, True):
        registry = CollectorRegistry()
        h = Histogram("lag_seconds", "lag", buckets=(0.005, 0.05, 1.0, 10.0), registry=registry)
        if at_once:
            observe_many(h, values)
        else:
            for v in values.tolist():
                h.observe(v)
        [family] = registry.collect()
        samples.append({(s.name, s.labels.get("le")): s.value for s in family.samples
                        if not s.name.endswith("_created")})  # fmt: skip
    one, many = samples
    assert many == pytest.approx(one) and one[("lag_seconds_bucket", "0.05")] == 4.0
