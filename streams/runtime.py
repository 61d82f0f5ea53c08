"""Process-local runtime of one worker: codec, scheduler, readiness gate and the send path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.kafka import committed_offsets, end_offsets
from infra.topics import DEADLETTER, NODE_INVENTORY
from schemas import Codec, CodecError
from streams.consumer_state import StallWatch
from streams.fleet import FleetTracker
from streams.ledger import read_final_decisions, read_job_log, read_migrations
from streams.metrics import Metrics
from streams.outbox import Outgoing
from streams.scheduling import Scheduler

__all__ = ["Runtime"]

log = logging.getLogger(__name__)


class Runtime:
    """What every agent of this worker shares."""

    def __init__(self, config: Config, codec: Codec, scheduler: Scheduler) -> None:
        self.config = config
        self.codec = codec
        self.scheduler = scheduler
        self.fleet = FleetTracker(scheduler, stale_after_s=config.worker.stale_after_s)
        self.topics: dict[str, Any] = {}  # topic name -> faust topic
        self._ready = asyncio.Event()
        self._fleet_caught_up = asyncio.Event()
        self._preparing: asyncio.Task[None] | None = None
        self._inventory_targets: dict[int, int] = {}
        self.inventory_seen: dict[int, int] = {}
        self.dirty = False
        self.sent: dict[str, int] = {}  # messages sent per topic (the replay's lockstep reads it)
        self.job_events = 0  # job events the lifecycle agent has finished handling
        self.ticks = 0  # timer ticks handled
        self.metrics = Metrics()
        self.stalls = StallWatch(config.worker.stall_after_s)

    # -- readiness ----------------------------------------------------------------------------

    async def ensure_ready(self, *, fleet: bool = True) -> None:
        """Rebuild state once (and after each recovery); optionally wait for inventory catch-up."""
        if self.dirty:
            self.dirty = False
            self._ready.clear()
            self._preparing = None
        if not self._ready.is_set():
            if self._preparing is None:
                self._preparing = asyncio.ensure_future(self._prepare())
            await asyncio.shield(self._preparing)
        if fleet and not self._fleet_caught_up.is_set():
            await self._wait_for_inventory(timeout_s=30.0)

    async def _prepare(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        logged = await loop.run_in_executor(
            None, read_final_decisions, self.config.kafka, self.codec
        )
        ended, migrated = await loop.run_in_executor(
            None, read_job_log, self.config.kafka, self.codec
        )
        moves = await loop.run_in_executor(None, read_migrations, self.config.kafka, self.codec)
        self._inventory_targets = await loop.run_in_executor(None, self._inventory_ends)
        self.scheduler.rebuild(logged, ended, moves=moves, migrated=migrated)
        self._ready.set()
        log.info("worker ready in_s=%.2f final=%d", time.monotonic() - started, len(logged))

    def _inventory_ends(self) -> dict[int, int]:
        """Offsets the inventory agent must reach: the log's end, minus what it had committed.

        After a restart the agent resumes at its committed offsets and the tables already hold
        the rest, so a partition whose commit is at the end is caught up without new events.
        """
        ends = end_offsets(self.config.kafka, NODE_INVENTORY)
        done = committed_offsets(self.config.kafka, self.config.worker.app_id, NODE_INVENTORY)
        return {p: end for p, end in ends.items() if done.get(p, 0) < end}

    def inventory_caught_up(self) -> bool:
        return all(
            self.inventory_seen.get(p, -1) + 1 >= end for p, end in self._inventory_targets.items()
        )

    async def _wait_for_inventory(self, timeout_s: float) -> None:
        # Deciding before the fleet is known would reject jobs that fit: wait, bounded.
        deadline = time.monotonic() + timeout_s
        while not self.inventory_caught_up() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if not self.inventory_caught_up():
            log.warning("inventory not caught up after %.0fs; deciding anyway", timeout_s)
        self._fleet_caught_up.set()

    # -- sending ------------------------------------------------------------------------------

    async def send_all(self, messages: Iterable[Outgoing]) -> None:
        for msg in messages:
            value = self.codec.encode(msg.event, msg.record, topic=msg.topic)
            await self.topics[msg.topic].send(
                key=msg.key.encode(), value=value, partition=msg.partition
            )
            self.sent[msg.topic] = self.sent.get(msg.topic, 0) + 1

    async def dead_letter(self, message: Any, error: Exception | str, consumer_name: str) -> None:
        """Park bytes we cannot use, with why and where they came from; the stream goes on."""
        record = dead_letter_record(
            topic=message.topic, partition=message.partition, offset=message.offset,
            key=message.key, value=message.value, error=error, consumer=consumer_name,
        )  # fmt: skip
        log.warning(
            "dead letter topic=%s partition=%s offset=%s consumer=%s error=%s",
            message.topic,
            message.partition,
            message.offset,
            consumer_name,
            error,
        )
        try:
            value = self.codec.encode("DeadLetter", record, topic=DEADLETTER)
        except CodecError:
            log.exception("cannot encode dead letter")
            return
        await self.topics[DEADLETTER].send(key=message.key, value=value)

    async def decode(self, event: Any, expected: str, consumer_name: str) -> dict[str, Any] | None:
        """The event's record, or None after dead-lettering it."""
        message = event.message
        try:
            name, record = self.codec.decode(message.value, topic=message.topic)
        except CodecError as exc:
            await self.dead_letter(message, exc, consumer_name)
            return None
        if name != expected:
            await self.dead_letter(message, f"expected {expected}, got {name}", consumer_name)
            return None
        return record
