"""Publishing to Kafka: one confluent-kafka producer, keys and region partitions done right.

Inventory and telemetry are keyed by node_id and sent to their region's partition
(`KafkaConfig.partitioner`, the same in every producer), so they co-partition with the region
placers; grid signals are keyed by region, links by link_id.
`run_fleet` drives a `SimulatedFleet` at a fixed rate: inventory at start and every
`inventory_every_s` (the topic is compacted), telemetry every tick, grid and link signals
periodically.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, Producer

from agents.errors import PublishError
from agents.fleet import SimulatedFleet
from agents.telemetry_columns import TelemetryTick, TelemetryWriter, fits
from infra.config import Config
from infra.kafka import producer as make_producer
from infra.topics import (
    GRID_SIGNALS,
    LINK_TELEMETRY,
    NODE_INVENTORY,
    NODE_TELEMETRY,
)
from schemas.codec import Codec, SingleObjectCodec, make_codec

__all__ = ["EventPublisher", "PublishStats", "run_fleet"]

log = logging.getLogger(__name__)

_KEY_FIELD = {
    NODE_INVENTORY: "node_id",
    NODE_TELEMETRY: "node_id",
    GRID_SIGNALS: "region",
    LINK_TELEMETRY: "link_id",
}
_EVENT = {
    NODE_INVENTORY: "NodeInventory",
    NODE_TELEMETRY: "NodeTelemetry",
    GRID_SIGNALS: "GridSignal",
    LINK_TELEMETRY: "LinkTelemetry",
}
_REGION_KEYED = (NODE_INVENTORY, NODE_TELEMETRY)


@dataclass
class PublishStats:
    """What a publisher sent; `by_topic` counts events, `late_ticks` ticks that overran."""

    events: int = 0
    bytes: int = 0
    ticks: int = 0
    late_ticks: int = 0
    elapsed_s: float = 0.0
    by_topic: dict[str, int] = field(default_factory=dict)
    by_tier: dict[str, int] = field(default_factory=dict)

    @property
    def events_per_s(self) -> float:
        return self.events / self.elapsed_s if self.elapsed_s > 0 else 0.0


class EventPublisher:
    """Encodes event dicts and hands them to one producer with the right key and partition."""

    def __init__(self, config: Config, *, producer: Producer | None = None,
                 codec: Codec | None = None) -> None:  # fmt: skip
        self.config = config
        self.codec = codec or make_codec(config.kafka.schema_registry_url or None)
        self.producer = producer or self._new_producer()
        self.partitions = self._partition_counts()
        self.stats = PublishStats()
        self._since_poll = 0
        self._writer = self._telemetry_writer()

    def _telemetry_writer(self) -> TelemetryWriter | None:
        """Columnar NodeTelemetry writing, when the codec writes single-object Avro (the
        embedded default) with the schema the writer knows; else every event goes as a dict."""
        if not isinstance(self.codec, SingleObjectCodec):
            return None
        schema = self.codec.schemas.get("NodeTelemetry")
        return TelemetryWriter(schema) if fits(schema) else None

    def _new_producer(self) -> Producer:
        return make_producer(
            self.config.kafka,
            **{"linger.ms": 20, "batch.num.messages": 10000,
               "compression.type": self.config.kafka.compression,
               "queue.buffering.max.messages": 500000, "queue.buffering.max.kbytes": 1048576},
        )  # fmt: skip

    def _partition_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(_REGION_KEYED, self.config.kafka.partitions)
        try:
            meta = self.producer.list_topics(timeout=5)
        except KafkaException as exc:
            where = self.config.kafka.bootstrap_servers
            raise PublishError(f"cannot reach {where}: {exc}") from exc
        for topic in _REGION_KEYED:
            tmeta = meta.topics.get(topic)
            if tmeta is not None and tmeta.partitions:
                counts[topic] = len(tmeta.partitions)
        return counts

    def publish(self, topic: str, events: Iterable[dict[str, Any]]) -> int:
        """Encode and produce each event; returns how many were handed over."""
        name, key_field = _EVENT[topic], _KEY_FIELD[topic]
        encode = self.codec.encode
        regional, telemetry = topic in _REGION_KEYED, topic == NODE_TELEMETRY
        return self._send(topic, (
            (encode(name, ev, topic=topic), ev[key_field], ev["region"] if regional else "",
             ev["tier"] if telemetry else "")
            for ev in events
        ))  # fmt: skip

    def publish_telemetry(self, tick: TelemetryTick) -> int:
        """Produce one tick of a fleet's NodeTelemetry; returns how many events were sent."""
        if self._writer is None:
            return self.publish(NODE_TELEMETRY, tick.events())
        nodes = (tick.nodes[i] for i in tick.node)
        columnar = self._send(NODE_TELEMETRY, (
            (value, nd["node_id"], nd["region"], tier)
            for value, nd, tier in zip(self._writer.bodies(tick), nodes, tick.tier, strict=True)
        ))  # fmt: skip
        return columnar + self.publish(NODE_TELEMETRY, tick.extra)

    def _send(self, topic: str, messages: Iterable[tuple[bytes, str, str, str]]) -> int:
        """Produce (value, key, region, tier) messages: a region-keyed topic's to the region's
        partition; count them (and NodeTelemetry by tier). How many were handed over."""
        parts = self.partitions.get(topic)
        part_of: dict[str, int] = {}
        by_tier = self.stats.by_tier
        n = size = 0
        for value, key, region, tier in messages:
            kwargs: dict[str, Any] = {}
            if parts is not None:
                p = part_of.get(region)
                if p is None:
                    p = part_of[region] = self.config.kafka.partitioner(parts)(region)
                kwargs["partition"] = p
            self._produce(topic, value, key, kwargs)
            n += 1
            size += len(value)
            if tier:
                by_tier[tier] = by_tier.get(tier, 0) + 1
        self.stats.events += n
        self.stats.bytes += size
        self.stats.by_topic[topic] = self.stats.by_topic.get(topic, 0) + n
        return n

    def _produce(self, topic: str, value: bytes, key: str, kwargs: dict[str, Any]) -> None:
        while True:
            try:
                self.producer.produce(topic, value, key, **kwargs)
                break
            except BufferError:  # local queue full: let librdkafka drain, then retry
                self.producer.poll(0.05)
            except KafkaException as exc:
                if not exc.args[0].fatal():
                    raise
                # e.g. the broker lost its log (a memory:// restart): the idempotent producer's
                # sequence no longer matches, and librdkafka gives that producer up for good
                log.error("producer failed for good (%s); starting a new one", exc)
                self.producer = self._new_producer()
        self._since_poll += 1
        if self._since_poll >= 2000:
            self.producer.poll(0)
            self._since_poll = 0

    def flush(self, timeout_s: float = 10.0) -> None:
        left = self.producer.flush(timeout_s)
        if left:
            raise PublishError(f"{left} events still queued after {timeout_s}s flush")


def run_fleet(
    config: Config,
    fleet: SimulatedFleet,
    *,
    hz: float = 1.0,
    stop: threading.Event | None = None,
    duration_s: float | None = None,
    inventory_every_s: float = 60.0,
    grid_every_s: float = 60.0,
    link_every_s: float = 10.0,
    publisher: EventPublisher | None = None,
) -> PublishStats:
    """Publish the fleet's events until `stop` is set or `duration_s` has passed."""
    stop = stop or threading.Event()
    pub = publisher or EventPublisher(config)
    # Silence longer than stale_after_s means "down" to the worker: beat well inside it.
    fleet.policy = fleet.policy.with_heartbeat_below(config.worker.stale_after_s)
    period = 1.0 / hz
    started = time.monotonic()
    next_tick = started
    due = {"inv": started, "grid": started, "link": started}
    log.info("fleet publishing nodes=%d hz=%s", len(fleet.nodes), hz)
    while not stop.is_set():
        now = time.monotonic()
        if duration_s is not None and now - started >= duration_s:
            break
        now_ms = int(time.time() * 1000)
        if now >= due["inv"]:
            pub.publish(NODE_INVENTORY, fleet.inventory_events(now_ms))
            due["inv"] = now + inventory_every_s
        if now >= due["grid"]:
            pub.publish(GRID_SIGNALS, fleet.grid_events(now_ms))
            due["grid"] = now + grid_every_s
        if now >= due["link"]:
            pub.publish(LINK_TELEMETRY, fleet.link_events(now_ms))
            due["link"] = now + link_every_s
        pub.publish_telemetry(fleet.telemetry_tick(now_ms))
        pub.producer.poll(0)
        pub.stats.ticks += 1
        next_tick += period
        wait = next_tick - time.monotonic()
        if wait < 0:
            pub.stats.late_ticks += 1
            next_tick = time.monotonic()  # do not try to catch up with a burst
        else:
            stop.wait(wait)
    pub.flush()
    pub.stats.elapsed_s = time.monotonic() - started
    log.info("fleet stopped events=%d ticks=%d late=%d", pub.stats.events, pub.stats.ticks,
             pub.stats.late_ticks)  # fmt: skip
    return pub.stats
