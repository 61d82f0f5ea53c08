"""The fleet's telemetry reaches the broker compressed (`kafka.compression`, zstd by default).

Telemetry is most of the bytes the embedded broker keeps, and it keeps them all (Tansu 0.6
ignores retention), so the codec is what its memory grows by. The stored batches are read raw
here (a Fetch request, the batch headers parsed) to see the codec the broker holds, not what a
consumer hands back after decompressing. That consumers of both kinds read these batches is
shown elsewhere: librdkafka in test_publisher_integration, aiokafka (Faust's agent) in
tests/integration/test_fleet_state.py's faust-agent case.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest
from aiokafka.client import AIOKafkaClient
from aiokafka.protocol.fetch import FetchRequest
from aiokafka.record.memory_records import MemoryRecords
from aiokafka.structs import TopicPartition

from agents import SimulatedFleet, demo_fleet, generate_nodes, run_fleet
from infra.config import Config
from infra.topics import NODE_TELEMETRY

pytestmark = pytest.mark.integration

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}  # the batch attributes' bits


async def _stored_codecs(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The codec of every batch the broker holds in `topic`, from one raw fetch per partition."""
    client = AIOKafkaClient(bootstrap_servers=bootstrap)
    await client.bootstrap()
    try:
        await client.force_metadata_update()
        codecs = []
        for partition in range(partitions):
            node = client.cluster.leader_for_partition(TopicPartition(topic, partition))
            request = FetchRequest(100, 1, 1 << 24, 0, [(topic, [(partition, 0, 1 << 24)])])
            response = await client.send(node, request)
            for _, parts in response.topics:
                for part in parts:
                    records = MemoryRecords(part[-1])
                    while (batch := records.next_batch()) is not None:
                        codecs.append(batch.compression_type)
        return codecs
    finally:
        await client.close()


@pytest.mark.parametrize("codec", ["zstd", "none"])
def test_the_fleet_stores_its_telemetry_with_the_configured_codec(
    config: Config, codec: str
) -> None:
    cfg = dataclasses.replace(config, kafka=dataclasses.replace(config.kafka, compression=codec))
    spec = demo_fleet()
    fleet = SimulatedFleet(spec, generate_nodes(spec, 200, seed=7), seed=7)
    stats = run_fleet(cfg, fleet, hz=4.0, stop=threading.Event(), duration_s=1.5)
    assert stats.by_topic[NODE_TELEMETRY] > 0

    codecs = asyncio.run(
        _stored_codecs(cfg.kafka.bootstrap_servers, NODE_TELEMETRY, cfg.kafka.partitions)
    )
    assert codecs, "no telemetry batch on the broker"
    assert set(codecs) == {CODEC_IDS[codec]}
