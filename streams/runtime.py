"""Process-local runtime of one worker: codec, scheduler, readiness gate and the send path."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.kafka import committed_offsets, end_offsets
from infra.topics import DEADLETTER, DECISIONS_PLACEMENT, JOBS_ROUTED, NODE_INVENTORY
from schemas import Codec, CodecError
from streams.activity import Activity
from streams.consumer_state import StallWatch
from streams.fleet import FleetTracker
from streams.ledger import read_ended_jobs, read_final_decisions, read_routed_attempts
from streams.metrics import Metrics
from streams.metrics_page import note_sent
from streams.outbox import Outgoing
from streams.ownership import Ownership
from streams.prometheus import METRICS, record_dead_letter
from streams.regions import RemoteRegions
from streams.scheduling import Scheduler
from streams.webui import RecentDecisions

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
        self.metrics = Metrics()
        self.activity = Activity()  # `/activity/`, read by `gpuflow top`
        self.ownership: Ownership | None = None  # set by create_app: partitions owned now
        self.remote: RemoteRegions | None = None  # other workers' region summaries
        self.recent = RecentDecisions()  # the latest decisions, for the /ui/ page
        self.stalls = StallWatch(config.worker.stall_after_s)

    # -- readiness ----------------------------------------------------------------------------

    async def ensure_ready(self, *, fleet: bool = True) -> None:
        """Rebuild state once (and after each recovery); optionally wait for inventory catch-up."""
        if self.dirty:
            self.dirty = False
            self._ready.clear()
            self._fleet_caught_up.clear()  # regions gained in a rebalance: know their nodes
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
        ended = await loop.run_in_executor(None, read_ended_jobs, self.config.kafka, self.codec)
        routed = await loop.run_in_executor(
            None, read_routed_attempts, self.config.kafka, self.codec
        )
        owned = self.ownership.partitions() if self.ownership is not None else None
        self._inventory_targets = await loop.run_in_executor(None, self._inventory_ends, owned)
        self.scheduler.rebuild(logged, ended, self._owns(owned))
        self.scheduler.note_routed(routed)
        METRICS.rebalances.inc()
        self.fleet.stale &= set(self.scheduler.nodes)
        if self.remote is not None:  # the router must know every region before it decides
            await loop.run_in_executor(None, self.remote.wait_caught_up, 15.0)
        self._ready.set()
        log.info("worker ready in_s=%.2f final=%d", time.monotonic() - started, len(logged))

    def _owns(self, owned: frozenset[int] | None) -> Callable[[str], bool]:
        """Regions on the partitions this worker owns (all of them without an assignment)."""
        if self.ownership is None or owned is None:
            return lambda region: True
        ownership = self.ownership
        log.info("owning partitions=%s", sorted(owned))
        return lambda region: ownership.owns(region, owned)

    def _inventory_ends(self, owned: frozenset[int] | None = None) -> dict[int, int]:
        """Offsets the inventory agent must reach: the log's end, minus what it had committed,
        on the partitions this worker owns (another worker's never reach this one).

        After a restart the agent resumes at its committed offsets and the tables already hold
        the rest, so a partition whose commit is at the end is caught up without new events.
        """
        ends = end_offsets(self.config.kafka, NODE_INVENTORY)
        done = committed_offsets(self.config.kafka, self.config.worker.app_id, NODE_INVENTORY)
        return {
            p: end
            for p, end in ends.items()
            if done.get(p, 0) < end and (owned is None or p in owned)
        }

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
        for msg in self.place_owned(messages):
            if msg.topic == DECISIONS_PLACEMENT:
                self.activity.on_decision(msg.record)
            value = self.codec.encode(msg.event, msg.record, topic=msg.topic)
            await self.topics[msg.topic].send(
                key=msg.key.encode(), value=value, partition=msg.partition
            )
            note_sent(msg)
            self.recent.add(msg)

    def place_owned(self, messages: Iterable[Outgoing]) -> list[Outgoing]:
        """Place here the jobs routed to a region this worker owns; the rest go out.

        The hop through `jobs.routed` only hands a job to the region's owner: when that is this
        worker, it costs a produce, a fetch and (on the embedded broker) a listing of every
        stored batch, for nothing. Spill-overs follow the same rule, so a job may try several
        owned regions here before it is handed to another worker or decided.
        """
        pending, out = list(messages), []
        ownership = self.ownership if self.config.worker.local_placement else None
        while pending:
            msg = pending.pop(0)
            if (
                ownership is not None
                and msg.topic == JOBS_ROUTED
                and ownership.owns(msg.record["region"])
            ):
                started = time.perf_counter_ns()
                pending[:0] = self.scheduler.place(msg.record, started_ns=started)
            else:
                out.append(msg)
        return out

    async def dead_letter(self, message: Any, error: Exception | str, consumer_name: str) -> None:
        """Park bytes we cannot use, with why and where they came from; the stream goes on."""
        record = dead_letter_record(
            topic=message.topic, partition=message.partition, offset=message.offset,
            key=message.key, value=message.value, error=error, consumer=consumer_name,
        )  # fmt: skip
        self.activity.on_dead_letter(error)
        record_dead_letter(message.topic, consumer_name)
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
        METRICS.events.labels(consumer_name).inc()
        try:
            name, record = self.codec.decode(message.value, topic=message.topic)
        except CodecError as exc:
            await self.dead_letter(message, exc, consumer_name)
            return None
        if name != expected:
            await self.dead_letter(message, f"expected {expected}, got {name}", consumer_name)
            return None
        return record
