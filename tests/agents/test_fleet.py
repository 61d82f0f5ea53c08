"""Fleet specs, the seeded node generator, and the simulated fleet's telemetry and faults."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from agents import Fault, FleetSpecError, SimulatedFleet, TierPolicy, demo_fleet, generate_nodes
from agents.generate import apportion
from agents.spec import load_fleet, parse_fleet
from schemas.codec import SingleObjectCodec

T0 = 1_767_225_600_000  # 2026-01-01 00:00 UTC
SPEC = demo_fleet()


def test_demo_fleet_spans_regions_models_and_links() -> None:
    assert len(SPEC.regions) >= 4
    models = {p.gpu_model for r in SPEC.regions for p in r.pools}
    assert len(models) >= 6 and {"H100", "A100-80", "MI300X", "Ascend910B"} <= models
    assert len(SPEC.links()) == 12  # 4 regions, every directed pair
    assert SPEC.rtt_ms[("eu-west", "us-east")] == SPEC.rtt_ms[("us-east", "eu-west")] == 76


def test_generate_is_deterministic_by_seed() -> None:
    a, b = generate_nodes(SPEC, 300, seed=11), generate_nodes(SPEC, 300, seed=11)
    c = generate_nodes(SPEC, 300, seed=12)
    assert a == b
    assert [n["rack"] for n in a] != [n["rack"] for n in c]
    assert sorted(n["node_id"] for n in a) == sorted(n["node_id"] for n in c)  # same mix


def test_generate_spreads_a_realistic_mix() -> None:
    nodes = generate_nodes(SPEC, 1000, seed=1)
    assert len(nodes) == 1000 and len({n["node_id"] for n in nodes}) == 1000
    regions = Counter(n["region"] for n in nodes)
    models = Counter(n["gpu_model"] for n in nodes)
    assert len(regions) == 4 and min(regions.values()) > 100
    assert len(models) >= 10
    for region in SPEC.regions:
        zones = Counter(n["zone"] for n in nodes if n["region"] == region.name)
        assert set(zones) == set(region.zones)  # every zone used, evenly
        assert max(zones.values()) - min(zones.values()) <= len(region.pools)
    h100 = next(n for n in nodes if n["gpu_model"] == "H100" and n["region"] == "eu-west")
    assert h100["price_per_gpu_hour"] == pytest.approx(3.90 * 1.12)
    assert h100["nvlink_islands"] == [list(range(8))] and h100["compute_capability"] == "9.0"
    mi = next(n for n in nodes if n["gpu_model"] == "MI300X")
    assert mi["driver_version"] is None and mi["labels"]["vendor"] == "amd"


def test_counts_and_weights_apportion() -> None:
    assert apportion(10, [1, 1, 1]) == [4, 3, 3]
    assert apportion(0, [1, 2]) == [0, 0]
    raw = {"regions": {"r1": {"pools": [
        {"gpu_model": "T4", "gpus_per_node": 4, "count": 3},
        {"gpu_model": "L4", "gpus_per_node": 8, "weight": 1},
    ]}}}  # fmt: skip
    spec = parse_fleet(raw)
    assert len(generate_nodes(spec)) == 3  # no n: the counts
    assert Counter(n["gpu_model"] for n in generate_nodes(spec, 10)) == {"T4": 3, "L4": 7}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({}, "regions"),
        ({"regions": {"r": {"pools": []}}}, "regions.r.pools"),
        ({"regions": {"r": {"pools": [{"gpus_per_node": 8}]}}}, "regions.r.pools[0].gpu_model"),
        ({"regions": {"r": {"pools": [{"gpu_model": "T4", "gpus_per_node": "x"}]}}},
         "regions.r.pools[0].gpus_per_node"),
        ({"regions": {"r": {"pools": [{"gpu_model": "T4", "gpus_per_node": 2,
                                       "nvlink_islands": [[0, 5]]}]}}},
         "regions.r.pools[0].nvlink_islands"),
        ({"regions": {"r": {"pools": [{"gpu_model": "T4", "gpus_per_node": 2}]}},
          "rtt_ms": {"r": {"mars": 9}}}, "rtt_ms.r.mars"),
    ],
)  # fmt: skip
def test_spec_errors_name_the_field(raw: dict, field: str) -> None:
    with pytest.raises(FleetSpecError) as info:
        parse_fleet(raw)
    assert info.value.field == field


def test_load_fleet_reads_files_and_names_missing_ones(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("regions: {r: {pools: [{gpu_model: H100, gpus_per_node: 8, count: 2}]}}\n")
    assert load_fleet(path).regions[0].pools[0].gpu_memory_mib == 81559
    with pytest.raises(FleetSpecError, match="cannot read"):
        load_fleet(tmp_path / "missing.yaml")


def _fleet(n: int = 40, seed: int = 5, **policy: Any) -> SimulatedFleet:
    return SimulatedFleet(SPEC, generate_nodes(SPEC, n, seed), seed, policy=TierPolicy(**policy))


def test_first_tick_is_a_full_snapshot_of_every_node_and_encodes() -> None:
    fleet = _fleet()
    events = fleet.telemetry_events(T0)
    realtime = [e for e in events if e["tier"] == "REALTIME"]
    assert len(realtime) == 40 and all(e["full_snapshot"] for e in realtime)
    assert sum(len(e["gpus"]) for e in realtime) == sum(fleet.region_gpu_totals().values())
    codec = SingleObjectCodec()
    for e in events + fleet.inventory_events(T0) + fleet.grid_events(T0) + fleet.link_events(T0):
        codec.encode(_event_name(e), e)


def _event_name(e: dict) -> str:
    if "tier" in e:
        return "NodeTelemetry"
    if "gpu_count" in e:
        return "NodeInventory"
    return "LinkTelemetry" if "link_id" in e else "GridSignal"


def test_steady_state_sends_deltas_and_heartbeats_not_snapshots() -> None:
    fleet = _fleet(200)
    fleet.telemetry_events(T0)
    later = [fleet.telemetry_events(T0 + k * 1000) for k in range(1, 30)]
    n_events = [len([e for e in ev if e["tier"] in ("REALTIME", "HEARTBEAT")]) for ev in later]
    assert max(n_events) < 200 * 0.6  # far fewer than one snapshot per node per second
    sent = {e["node_id"] for ev in later for e in ev}
    assert len(sent) == 200  # yet every node is heard from


def test_thermal_twins_throttle_consistently() -> None:
    fleet = _fleet(300, seed=2)
    for k in range(5):
        fleet.telemetry_events(T0 + k * 1000)
    t = fleet.twin
    throttled = t.busy & ((t.throttle & 0x20) != 0)
    assert throttled.any() and (t.temperature[throttled] > 84).all()
    assert (t.clock[throttled] < t.max_clk[throttled]).all()
    assert ((t.perf >= 0.8) & (t.perf <= 1.0)).all()
    assert (t.perf[throttled] < 0.97).mean() > 0.5
    idle = ~t.busy & t.healthy
    assert ((t.throttle[idle] & 0x1) == 1).all() and (t.util[idle] == 0).all()
    assert (t.power <= t.tdp + 1e-9).all()


def test_gpu_lost_reports_xid_79_once() -> None:
    fleet = _fleet()
    node = fleet.nodes[3]["node_id"]
    fleet.telemetry_events(T0)
    fleet.inject(Fault("gpu_lost", node, gpu=1))
    ev = [e for e in fleet.telemetry_events(T0 + 1000) if e["node_id"] == node]
    gpu = next(g for e in ev for g in e["gpus"] if g["index"] == 1)
    assert gpu == {**gpu, "healthy": False, "xid_events": [79], "util_pct": 0.0}
    later = [g for k in range(2, 40) for e in fleet.telemetry_events(T0 + k * 1000)
             if e["node_id"] == node for g in e["gpus"] if g["index"] == 1]  # fmt: skip
    assert later and all(not g["healthy"] and g["xid_events"] == [] for g in later)


def test_node_down_goes_silent_and_comes_back_with_a_snapshot() -> None:
    fleet = _fleet()
    node = fleet.nodes[0]["node_id"]
    fault = Fault("node_down", node, until_ms=T0 + 20_000)
    fleet.telemetry_events(T0)
    fleet.inject(fault)
    silent = [e for k in range(1, 20) for e in fleet.telemetry_events(T0 + k * 1000)]
    assert node not in {e["node_id"] for e in silent}
    assert node not in {e["node_id"] for e in fleet.inventory_events(T0 + 19_000)}
    back = [e for e in fleet.telemetry_events(T0 + 20_000) if e["node_id"] == node]
    assert any(e["full_snapshot"] for e in back)


def test_link_degraded_raises_rtt_and_cuts_capacity() -> None:
    fleet = _fleet()
    before = {e["link_id"]: e for e in fleet.link_events(T0)}
    fleet.inject(Fault("link_degraded", "us-east>eu-west", until_ms=T0 + 60_000))
    fleet.telemetry_events(T0 + 1000)
    after = {e["link_id"]: e for e in fleet.link_events(T0 + 1000)}
    assert after["us-east>eu-west"]["rtt_ms"] > 3 * before["us-east>eu-west"]["rtt_ms"] * 0.9
    assert after["us-east>eu-west"]["capacity_gbps"] == 25.0
    assert after["eu-west>us-east"]["capacity_gbps"] == 100.0
    fleet.telemetry_events(T0 + 61_000)
    assert {e["link_id"]: e for e in fleet.link_events(T0 + 61_000)}["us-east>eu-west"][
        "capacity_gbps"] == 100.0  # fmt: skip


def test_unknown_fault_targets_are_refused() -> None:
    from agents.errors import AgentError

    with pytest.raises(AgentError, match="unknown target"):
        _fleet().inject(Fault("node_down", "nope"))
    with pytest.raises(ValueError, match="fault kind"):
        Fault("meteor", "x")


def test_grid_signals_follow_the_sun() -> None:
    fleet = _fleet()
    noon_eu = {e["region"]: e for e in fleet.grid_events(T0 + 12 * 3_600_000)}
    night_eu = {e["region"]: e for e in fleet.grid_events(T0 + 2 * 3_600_000)}
    assert noon_eu["eu-west"]["renewable_share"] > night_eu["eu-west"]["renewable_share"]
    assert noon_eu["eu-west"]["carbon_g_per_kwh"] < night_eu["eu-west"]["carbon_g_per_kwh"]
    assert noon_eu["eu-west"]["carbon_g_per_kwh"] < noon_eu["ap-southeast"]["carbon_g_per_kwh"]


def test_random_fault_rates_inject_faults() -> None:
    import dataclasses

    spec = dataclasses.replace(SPEC, faults=dataclasses.replace(
        SPEC.faults, gpu_lost_per_node_hour=36.0, node_down_per_node_hour=3.6))  # fmt: skip
    fleet = SimulatedFleet(spec, generate_nodes(spec, 100, 1), 1)
    for k in range(10):
        fleet.telemetry_events(T0 + k * 1000)
    assert (~fleet.twin.healthy).sum() > 0 and fleet.down
    assert np.isfinite(fleet.twin.temperature).all()
