"""The columnar telemetry path gives exactly the rows the generic path gives, or steps aside.

The generic path is fastavro -> `to_rows` -> `Store.arrow`; the columnar one is
`decode_telemetry` -> `TelemetryBatch.table`. Same events in, the same Arrow table out (same
schema, same values, same row order); a body the columnar path cannot read plainly is refused
(`ok` false) and left to the generic path, without disturbing its neighbours.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from infra.store import Store
from infra.store import samples as S
from infra.store.rows import RowContext, to_rows
from infra.store.telemetry import TIERS, decode_telemetry
from schemas import SingleObjectCodec, default_schemas
from streams.history.telemetry import TelemetryLane, telemetry_chunk

REPO = Path(__file__).resolve().parents[2]
NOW = int(time.time() * 1000)
CODEC = SingleObjectCodec()
HEADER = 10  # single-object framing: magic (2) + fingerprint (8)
MODELS = {"n-known": "H100", "n-ü": "MI300X"}


def _gpu(index: int, **fields: Any) -> dict[str, Any]:
    return S.gpu_sample(index, 40.0 + index) | fields


def _event(node: str, gpus: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return S.node_telemetry(node, "eu-west", NOW, []) | {"gpus": gpus} | fields


# (what the event shows, the event)
EDGE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("eight GPUs, GPU model known", _event("n-known", [_gpu(i) for i in range(8)])),
    ("a node with 0 GPUs", _event("n-empty", [])),
    ("one GPU, model unknown", _event("n-new", [_gpu(3)])),
    (
        "every optional field set",
        _event(
            "n-known",
            [_gpu(0)],
            disk_read_mbps=1.5,
            disk_write_mbps=2.5,
            net_rx_mbps=3.5,
            net_tx_mbps=4.5,
            energy_j=1e300,
            perf_per_watt=0.25,
        ),
    ),
    (
        "every optional field null",
        _event("n-known", [_gpu(0)], net_rx_mbps=None, net_tx_mbps=None),
    ),
    (
        "XIDs on some GPUs, unhealthy, throttled, big counters",
        _event(
            "n-known",
            [
                _gpu(0, xid_events=[79, 48, -5], healthy=False),
                _gpu(1),
                _gpu(2, xid_events=[2**31 - 1], throttle_reasons=2**40, ecc_errors=2**62),
                _gpu(7, mem_used_mib=2**32 - 1, sm_clock_mhz=0, util_pct=-1.25),
            ],
            node_healthy=False,
            full_snapshot=False,
        ),
    ),
    *[(f"tier {tier}", _event("n-known", [_gpu(0)], tier=tier)) for tier in TIERS],
    ("non-ASCII node id, schema 2", _event("n-ü", [_gpu(0), _gpu(1)], schema=2)),
    ("timestamp at the epoch", _event("n-known", [_gpu(0)], ts=0)),
]


def _generic(store: Store, messages: list[bytes]) -> pa.Table:
    ctx = RowContext(MODELS)
    rows = []
    for message in messages:
        event, record = CODEC.decode(message)
        rows += to_rows(event, record, ctx)[1]
    return store.arrow("node_telemetry", rows)


def _columnar(store: Store, messages: list[bytes]) -> tuple[pa.Table, np.ndarray]:
    batch = decode_telemetry(messages, skip=HEADER)
    fresh = [True] * int(batch.ok.sum())
    return telemetry_chunk(batch, fresh, MODELS, store.columns("node_telemetry")), batch.ok


def test_tiers_are_the_schema_enum() -> None:
    source = json.loads((REPO / "schemas/avro/NodeTelemetry.avsc").read_text())
    tier = next(f for f in source["fields"] if f["name"] == "tier")
    assert tuple(tier["type"]["symbols"]) == TIERS


@pytest.mark.parametrize("shows,event", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_each_edge_case_gives_the_generic_rows(store: Store, shows: str, event: dict) -> None:
    messages = [CODEC.encode("NodeTelemetry", event)]
    table, ok = _columnar(store, messages)
    assert ok.all()
    expected = _generic(store, messages)
    assert table.schema == expected.schema
    assert table.to_pylist() == expected.to_pylist()


def test_a_mixed_batch_gives_the_generic_rows_in_order_and_inserts(store: Store) -> None:
    events = [e for _, e in EDGE_CASES] * 3 + [
        S.node_telemetry(f"n{i}", "us-east", NOW + i, [float(i % 100)] * (i % 9))
        for i in range(500)
    ]
    messages = [CODEC.encode("NodeTelemetry", e) for e in events]
    table, ok = _columnar(store, messages)
    assert ok.all()
    assert table.to_pylist() == _generic(store, messages).to_pylist()
    assert store.insert_arrow("node_telemetry", table) == table.num_rows


def _zero_gpu_body(**fields: Any) -> bytes:
    # a node with no GPUs and no optionals ends: full_snapshot, node_healthy, 0 GPUs, 6 nulls
    return CODEC.encode("NodeTelemetry", _event("n-known", [], net_rx_mbps=None, net_tx_mbps=None))


def _two_blocks() -> bytes:
    """A 2-GPU event with its GPUs in two array blocks of one (as some writers do)."""
    nulls = {"net_rx_mbps": None, "net_tx_mbps": None, "event_id": "e" * 32}
    bodies = [
        CODEC.encode("NodeTelemetry", _event("n-known", [_gpu(i) for i in range(n)], **nulls))
        for n in (0, 1, 2)
    ]
    head = len(bodies[0]) - 7  # up to the GPU count; then 0 GPUs and 6 null unions
    gpu0 = bodies[1][head + 1 : -7]
    gpu1 = bodies[2][head + 1 + len(gpu0) : -7]
    return bodies[0][:head] + b"\x02" + gpu0 + b"\x02" + gpu1 + b"\x00" + bodies[0][-6:]


def test_two_blocks_is_the_same_event_to_the_generic_decoder() -> None:
    nulls = {"net_rx_mbps": None, "net_tx_mbps": None, "event_id": "e" * 32}
    two = _event("n-known", [_gpu(0), _gpu(1)], **nulls)
    assert CODEC.decode(_two_blocks()) == CODEC.decode(CODEC.encode("NodeTelemetry", two))


REFUSED: list[tuple[str, bytes]] = [
    ("truncated body", _zero_gpu_body()[:-1]),
    ("a trailing byte", _zero_gpu_body() + b"\x00"),
    ("boolean byte 2", (b := _zero_gpu_body())[:-9] + b"\x02" + b[-8:]),
    ("union branch 2", _zero_gpu_body()[:-1] + b"\x04"),
    ("GPUs in two blocks (valid Avro, not the plain form)", _two_blocks()),
    (
        "node id not UTF-8",
        CODEC.encode("NodeTelemetry", _event("n-XXXX", [_gpu(0)])).replace(b"XXXX", b"\xff\xfe"),
    ),
    (
        "memory below 0 (UInt32)",
        CODEC.encode("NodeTelemetry", _event("n", [_gpu(0, mem_used_mib=-1)])),
    ),
    ("GPU index above UInt16", CODEC.encode("NodeTelemetry", _event("n", [_gpu(70_000)]))),
    (
        "ECC count below 0 (UInt64)",
        CODEC.encode("NodeTelemetry", _event("n", [_gpu(0, ecc_errors=-3)])),
    ),
    ("timestamp before 1970", CODEC.encode("NodeTelemetry", _event("n", [_gpu(0)], ts=-1))),
    ("a GPU count it has no room for", _zero_gpu_body()[:-7] + b"\x7e" + b"\x00" * 7),
]


@pytest.mark.parametrize("shows,body", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_it_cannot_read_plainly_is_left_to_the_generic_path(
    store: Store, shows: str, body: bytes
) -> None:
    good = [CODEC.encode("NodeTelemetry", e) for _, e in EDGE_CASES[:3]]
    messages = [good[0], body, *good[1:]]
    table, ok = _columnar(store, messages)
    assert ok.tolist() == [True, False, True, True]
    assert table.to_pylist() == _generic(store, good).to_pylist()


def test_the_lane_takes_latest_node_telemetry_only() -> None:
    lane = TelemetryLane(CODEC)
    telemetry = CODEC.encode("NodeTelemetry", _event("n", [_gpu(0)]))
    assert lane.takes(telemetry)
    assert not lane.takes(CODEC.encode("NodeInventory", S.node_inventory("n", "eu", "H100", NOW)))
    assert not lane.takes(b"\x00\x01" + telemetry[2:])  # not single-object framing
    assert not lane.takes(telemetry[:HEADER])  # a header and no body
    assert not lane.takes(None)
    latest = default_schemas().get("NodeTelemetry")
    for fingerprint in latest.fingerprints:  # the same schema by another library's fingerprint
        assert lane.takes(b"\xc3\x01" + fingerprint + telemetry[HEADER:])
    older_link = next(
        s
        for s in default_schemas().by_fingerprint.values()
        if s.name == "LinkTelemetry"
        and s.fingerprint != default_schemas().get("LinkTelemetry").fingerprint
    )
    assert not lane.takes(b"\xc3\x01" + older_link.fingerprint + telemetry[HEADER:])
