"""The simulated backbone: diurnal cross traffic, congestion episodes, per-link overrides."""

from __future__ import annotations

import numpy as np
import pytest

from agents import FleetSpecError, demo_fleet
from agents.backbone import Backbone, BackboneSpec, LinkSpec
from agents.spec import parse_fleet
from schemas import SingleObjectCodec

HOUR = 3_600_000
DAY0 = 1_700_006_400_000  # a UTC midnight


def _backbone(spec: BackboneSpec, seed: int = 1) -> Backbone:
    links = [LinkSpec("a", "b", 50.0, 100.0), LinkSpec("b", "a", 50.0, 100.0)]
    return Backbone(links, {"a": 0.0, "b": 0.0}, spec, np.random.default_rng(seed))


def test_cross_traffic_follows_the_working_day() -> None:
    bb = _backbone(BackboneSpec(congestion_per_link_hour=0.0, noise=0.0))
    link = bb.links[0]
    # both ends at UTC+0: 03:00 is the quietest (15 %), 15:00 the busiest (60 %)
    assert bb.utilisation(link, DAY0 + 3 * HOUR) == pytest.approx(0.15)
    assert bb.utilisation(link, DAY0 + 15 * HOUR) == pytest.approx(0.60)
    quiet, busy = (bb.events(DAY0 + h * HOUR)[0] for h in (3, 15))
    assert quiet["used_gbps"] == pytest.approx(15.0) and busy["used_gbps"] == pytest.approx(60.0)
    # queueing inflates the RTT on the busy link: 50 x (1 + 0.15 x 0.6 / 0.4) = 61.25 (+ jitter)
    assert busy["rtt_ms"] >= 61.25 > quiet["rtt_ms"] >= 50 * (1 + 0.15 * 0.15 / 0.85)


def test_congestion_episodes_come_and_go() -> None:
    bb = _backbone(BackboneSpec(congestion_per_link_hour=0.5, congestion_minutes=30.0))
    congested = 0
    seen_loss = False
    for minute in range(0, 48 * 60, 5):
        events = bb.events(DAY0 + minute * 60_000)
        congested += sum(e["link_id"] in bb.congested_until for e in events)
        seen_loss |= any(e["loss_pct"] > 0 and e["used_gbps"] > 85 for e in events)
    samples = 2 * 48 * 12
    # 0.5 episodes an hour lasting 30 min on average: congested about 0.25 / 1.25 = 20 % of the
    # time (an episode cannot start while one runs); with noise, between 5 % and 40 %
    assert 0.05 * samples < congested < 0.4 * samples
    assert seen_loss


def test_events_encode_and_are_deterministic() -> None:
    codec = SingleObjectCodec()
    a = _backbone(BackboneSpec(), seed=7).events(DAY0)
    b = _backbone(BackboneSpec(), seed=7).events(DAY0)
    assert a == b
    for e in a:
        assert codec.decode(codec.encode("LinkTelemetry", e))[1]["loss_pct"] == e["loss_pct"]


def test_fleet_file_overrides_one_link() -> None:
    spec = demo_fleet()
    raw = {
        "regions": {r.name: {"pools": [{"gpu_model": "T4", "gpus_per_node": 4}]}
                    for r in spec.regions},
        "rtt_ms": {"us-east": {"eu-west": 76}},
        "link_capacity_gbps": 100,
        "backbone": {"busy_util": 0.5,
                     "links": [{"src": "us-east", "dst": "eu-west", "capacity_gbps": 40,
                                "cost_per_gb": 0.05}]},
    }  # fmt: skip
    fleet = parse_fleet(raw)
    bb = Backbone.from_fleet(fleet, np.random.default_rng(0))
    by_id = {link.link_id: link for link in bb.links}
    assert by_id["us-east>eu-west"].capacity_gbps == 40.0
    assert by_id["eu-west>us-east"].capacity_gbps == 40.0  # both ways unless given twice
    assert by_id["us-east>eu-west"].cost_per_gb == 0.05 and by_id["us-east>eu-west"].rtt_ms == 76
    with pytest.raises(FleetSpecError, match="backbone"):
        parse_fleet({**raw, "backbone": {"busy_util": 2.0}})
