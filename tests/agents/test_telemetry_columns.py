"""The columnar NodeTelemetry writer writes exactly what fastavro writes for the same events."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

from agents import Fault, SimulatedFleet, TierPolicy, demo_fleet, generate_nodes
from agents.telemetry_columns import TelemetryWriter, _varint, _varints, fits
from schemas.codec import SingleObjectCodec
from schemas.registry import SchemaSet

T0 = 1_767_225_600_000
SPEC = demo_fleet()
CODEC = SingleObjectCodec()
SCHEMA = CODEC.schemas.get("NodeTelemetry")


def _faulty_fleet(policy: TierPolicy | None) -> SimulatedFleet:
    faults = dataclasses.replace(
        SPEC.faults, gpu_lost_per_node_hour=20.0, node_down_per_node_hour=2.0,
        thermal_throttle_share=0.3,
    )  # fmt: skip
    spec = dataclasses.replace(SPEC, faults=faults)
    return SimulatedFleet(spec, generate_nodes(spec, 120, 3), 3, policy=policy)


@pytest.mark.parametrize("policy", [TierPolicy(full_snapshot_s=1e-3), None], ids=["full", "tiered"])
def test_bodies_equal_fastavro_bytes_and_decode_to_the_events(policy: TierPolicy | None) -> None:
    fleet = _faulty_fleet(policy)
    writer = TelemetryWriter(SCHEMA)
    ecc_node = fleet.nodes[7]["node_id"]
    seen_tiers, extra_with_xids, compared = set(), 0, 0
    for k in range(40):
        if k == 5:
            fleet.inject(Fault("ecc_error", ecc_node, gpu=0))
        tick = fleet.telemetry_tick(T0 + k * 1000)
        events = tick.columnar_events()
        bodies = writer.bodies(tick)
        assert bodies == [CODEC.encode("NodeTelemetry", e) for e in events]
        for body, event in zip(bodies[:25], events[:25], strict=False):
            _, decoded = CODEC.decode(body)
            assert decoded["event_id"] == event["event_id"]
            _assert_gpus_close(decoded["gpus"], event["gpus"])
        compared += len(bodies)
        seen_tiers |= set(tick.tier)
        extra_with_xids += sum(1 for e in tick.extra if any(g["xid_events"] for g in e["gpus"]))
    assert compared > 1000 and extra_with_xids >= 1
    assert "REALTIME" in seen_tiers
    assert (~fleet.twin.healthy).any() and fleet.down  # the faults happened


def _assert_gpus_close(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for key, value in w.items():
            assert g[key] == pytest.approx(value, rel=1e-6), key  # floats travel as float32


def test_a_tick_holds_the_same_events_as_before() -> None:
    a, b = _faulty_fleet(None), _faulty_fleet(None)
    for k in range(30):
        now = T0 + k * 1000
        by_id = {e["event_id"]: e for e in a.telemetry_tick(now).events()}
        assert by_id == {e["event_id"]: e for e in b.telemetry_events(now)}


def test_heartbeat_only_ticks_write_events_without_gpus() -> None:
    fleet = SimulatedFleet(SPEC, generate_nodes(SPEC, 30, 2), 2,
                           policy=TierPolicy(heartbeat_s=1.0, util_delta_pct=1e9,
                                             mem_delta_mib=10**9, temp_delta_c=1e9,
                                             perf_delta=1e9))  # fmt: skip
    fleet.telemetry_tick(T0)
    tick = fleet.telemetry_tick(T0 + 1000)
    assert tick.node and set(tick.tier) == {"HEARTBEAT"} and tick.gpu_row == []
    assert TelemetryWriter(SCHEMA).bodies(tick) == [
        CODEC.encode("NodeTelemetry", e) for e in tick.columnar_events()
    ]


def test_varints_match_the_one_value_encoder_across_the_int64_range() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([
        np.array([0, 1, -1, 63, 64, -64, -65, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]),
        rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64),
        rng.integers(-300, 300, 500),
    ]).astype(np.int64)  # fmt: skip
    rows, lengths = _varints(values)
    for value, row, n in zip(values.tolist(), rows, lengths.tolist(), strict=True):
        assert bytes(row[:n]) == _varint(value)


def test_a_schema_of_another_layout_is_not_written_as_columns() -> None:
    assert fits(SCHEMA)
    source = copy.deepcopy(dict(SCHEMA.source))
    source["fields"] = [*source["fields"], {"name": "rack", "type": ["null", "string"],
                                            "default": None}]  # fmt: skip
    evolved = SchemaSet().add(source, version=SCHEMA.version + 1)
    assert not fits(evolved)
    with pytest.raises(ValueError, match="not the layout"):
        TelemetryWriter(evolved)
