"""Topics: the DESIGN's table, one event per topic, stable region partitioning."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infra import topics
from infra.topics import TOPICS, RegionPartitioner, region_partition, topic_for_event
from schemas import EVENT_NAMES

# DESIGN "Topics": name -> event carried.
DESIGN_TOPICS = {
    "gpuflow.node.inventory": "NodeInventory",
    "gpuflow.node.telemetry": "NodeTelemetry",
    "gpuflow.link.telemetry": "LinkTelemetry",
    "gpuflow.grid.signals": "GridSignal",
    "gpuflow.jobs.submitted": "JobSubmitted",
    "gpuflow.jobs.events": "JobEvent",
    "gpuflow.region.state": "RegionSummary",
    "gpuflow.jobs.routed": "RoutedJob",
    "gpuflow.decisions.placement": "PlacementDecision",
    "gpuflow.decisions.preemption": "PreemptionDecision",
    "gpuflow.decisions.migration": "MigrationDecision",
    "gpuflow.decisions.bandwidth": "BandwidthQuota",
    "gpuflow.forecasts.demand": "DemandForecast",
    "gpuflow.deadletter": "DeadLetter",
    # beyond the DESIGN's table: proactive protection (docs/tenancy.md)
    "gpuflow.decisions.advisory": "NodeAdvisory",
    "gpuflow.replan.ticks": "ReplanTick",  # control: the scheduler's timer, per region
    "gpuflow.jobs.cancel": "CancelRequest",  # issue 31: the execution layer
    "gpuflow.jobs.logs": "JobLog",
    "gpuflow.services.specs": "ServiceSpec",  # issue 33: inference services
    "gpuflow.services.load": "ServiceLoad",
    "gpuflow.decisions.scaling": "ScalingDecision",
}
# Region-scoped topics share a partition per region so one worker owns a region (co-partitioning).
REGION_KEYED = {
    "gpuflow.node.inventory",
    "gpuflow.node.telemetry",
    "gpuflow.jobs.events",
    "gpuflow.jobs.routed",
    "gpuflow.decisions.placement",
    "gpuflow.decisions.preemption",
    "gpuflow.decisions.migration",
    "gpuflow.decisions.advisory",
    "gpuflow.replan.ticks",
}


def test_every_design_topic_carries_its_event() -> None:
    assert {t.name: t.event for t in TOPICS} == DESIGN_TOPICS
    assert len({t.name for t in TOPICS}) == len(TOPICS)


def test_every_event_has_exactly_one_topic() -> None:
    assert sorted(t.event for t in TOPICS) == sorted(EVENT_NAMES)
    for name, event in DESIGN_TOPICS.items():
        assert topic_for_event(event) == name


def test_unknown_event_has_no_topic() -> None:
    with pytest.raises(KeyError):
        topic_for_event("Nope")


def test_only_inventory_and_services_are_compacted() -> None:
    compacted = [t.name for t in TOPICS if t.compacted]
    assert compacted == ["gpuflow.node.inventory", "gpuflow.services.specs"]


def test_region_keyed_topics() -> None:
    assert {t.name for t in TOPICS if t.region_keyed} == REGION_KEYED


def test_topic_constants_are_exported() -> None:
    constants = {getattr(topics, n) for n in topics.__all__ if n.isupper() and n != "TOPICS"}
    assert constants == set(DESIGN_TOPICS)


@pytest.mark.parametrize(
    ("region", "crc", "partitions", "expected"),
    [
        # crc32 is zlib's (IEEE 802.3), so Java/Go producers compute the same partition.
        ("eu-west", 3453142277, 4, 1),  # 3453142277 % 4 = 1
        ("eu-west", 3453142277, 12, 5),  # 3453142277 % 12 = 5
        ("us-east", 2169277726, 4, 2),  # 2169277726 % 4 = 2
        ("ap-south", 2836282342, 12, 10),  # 2836282342 % 12 = 10
        ("", 0, 4, 0),
    ],
)
def test_region_partition_known_values(
    region: str, crc: int, partitions: int, expected: int
) -> None:
    assert zlib.crc32(region.encode()) == crc
    assert region_partition(region, partitions) == expected


def test_region_partition_is_standard_crc32() -> None:
    assert region_partition("123456789", 2**32) == 0xCBF43926  # the CRC-32 check value


def test_pinned_regions_take_their_place_in_the_order_and_others_hash() -> None:
    order = ("us-east", "us-west", "eu-west", "ap-southeast")
    # unpinned, the four demo regions collide on two of four partitions
    assert len({region_partition(r, 4) for r in order}) == 2
    assert [region_partition(r, 4, order) for r in order] == [0, 1, 2, 3]
    assert [region_partition(r, 3, order) for r in order] == [0, 1, 2, 0]  # more regions: wrap
    assert region_partition("sa-east", 4, order) == zlib.crc32(b"sa-east") % 4
    assert RegionPartitioner(4, order)("eu-west") == 2


@given(region=st.text(max_size=30), partitions=st.integers(min_value=1, max_value=256))
def test_region_partition_is_stable_and_in_range(region: str, partitions: int) -> None:
    first = region_partition(region, partitions)
    assert 0 <= first < partitions
    assert region_partition(region, partitions) == first
    assert region_partition(region, 1) == 0
