"""Process-local runtime of one worker: codec, scheduler, readiness gate and the send path."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from gpuflow_errors import GpuflowError
from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.heap import trim_heap
from infra.kafka import committed_offsets, end_offsets
from infra.policy import PolicyFile
from infra.signing import verifier
from infra.topics import DEADLETTER, DECISIONS_PLACEMENT, JOBS_ROUTED, NODE_INVENTORY
from schemas import Codec, CodecError
from streams.base.outbox import Outgoing
from streams.base.prometheus import METRICS, record_dead_letter
from streams.ledger.snapshot import LedgerKeeper
from streams.runtime.activity import Activity
from streams.runtime.consumer_state import StallWatch
from streams.runtime.fleet import FleetTracker
from streams.runtime.metrics import Metrics
from streams.runtime.ownership import Ownership
from streams.runtime.sent import RecentDecisions, note_sent
from streams.scheduler.admission import VERIFIED_TENANT, Admission
from streams.scheduler.core import Scheduler
from streams.scheduler.regions import RemoteRegions
from streams.scheduler.validation import Rules, joined, problems

if TYPE_CHECKING:
    from streams.services.autoscaler import Autoscaler
    from streams.telemetry.reader import TelemetryReader

__all__ = ["Runtime"]

log = logging.getLogger(__name__)

# Faults of our own logic on a hostile record: the record is dead-lettered, the agent lives on.
LOGIC_FAULTS = (GpuflowError, ArithmeticError, LookupError, TypeError, ValueError, AttributeError)


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
        self.handled: dict[str, int] = {}  # events handled per deciding agent (router, placer)
        self.holding_state = False  # the broker lost its log: never rebuild from it
        self.metrics = Metrics()
        self.dependencies: dict[str, dict[str, Any]] = {}  # name -> its last status
        self.fleet.ignored = self.metrics.ignored
        self.activity = Activity()  # `/activity/`, read by `gpuflow top`
        self.ownership: Ownership | None = None  # set by create_app: partitions owned now
        self.remote: RemoteRegions | None = None  # other workers' region summaries
        self.autoscaler: Autoscaler | None = None  # services (streams.worker.service_agents)
        self.recent = RecentDecisions()  # the latest decisions, for the /ui/ page
        self.stalls = StallWatch(config.worker.stall_after_s)
        self.admission = Admission(verifier(config.auth), codec, scheduler.partition_of)
        scheduler.cancels.verifier = self.admission.verifier  # one replay memory for both
        self.rules = Rules(
            max_future_ms=int(config.worker.max_clock_skew_s * 1000),
            verified_required=self.admission.required,
            max_regions=config.worker.max_regions,
        )
        self.policy = PolicyFile(None)  # the app sets the configured one
        # the folded decision logs, saved between runs (none: read whole at each rebuild)
        self.ledger = LedgerKeeper(config, codec)
        self._ledger_lock = asyncio.Lock()  # one catch-up at a time: rebuild or snapshot
        self.telemetry_reader: TelemetryReader | None = None  # the telemetry lane, when on

    def reload_policy(self) -> None:
        """A changed, valid policy file takes effect; a bad one is logged and ignored."""
        policy = self.policy.reload()
        if policy is not None:
            self.scheduler.tenancy.policy = policy
            self.fleet.protection.set_policy(policy.protection)

    def regions_of(self, partition: int) -> set[str]:
        """Regions whose events go to `partition` (those this worker may hold)."""
        s = self.scheduler
        known = {*s.state.regions, *(r["region"] for r in s.queue.values())}
        return {r for r in known if s.partition_of(r) == partition}

    # -- readiness ----------------------------------------------------------------------------

    async def ensure_ready(self, *, fleet: bool = True) -> None:
        """Rebuild state once (and after each recovery); optionally wait for inventory catch-up."""
        if self.dirty and self.holding_state:
            self.dirty = False  # the log is empty, not the truth: keep what we hold
            log.warning("not rebuilding from the broker's log: its storage was lost")
        if self.dirty:
            self.dirty = False
            self._ready.clear()
            self._fleet_caught_up.clear()  # regions gained in a rebalance: know their nodes
            self._preparing = None
        if not self._ready.is_set():
            if self._preparing is None:
                self._preparing = asyncio.ensure_future(self._prepare())
            try:
                await asyncio.shield(self._preparing)
            except Exception:
                self._preparing = None  # try again with the next event, not never
                raise
        if fleet and not self._fleet_caught_up.is_set():
            await self._wait_for_inventory(timeout_s=30.0)

    async def _prepare(self) -> None:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        self.ledger.stop_saving()  # the rebuild saves what it reads; a save in flight would wait
        async with self._ledger_lock:
            ledger, logged = await loop.run_in_executor(None, self.ledger.read)
            owned = self.ownership.partitions() if self.ownership is not None else None
            self._inventory_targets = await loop.run_in_executor(None, self._inventory_ends, owned)
            s = self.scheduler
            s.rebuild(
                logged,
                ledger.ended,
                self._owns(owned),
                moves=ledger.moves,
                migrated=ledger.migrated,
                trimmed_ms=ledger.trimmed_ms,
            )
            self.fleet.protection.restore()
            s.note_routed(ledger.attempts())
            # pruned only now: a job whose end the tables missed was released by the rebuild
            await loop.run_in_executor(None, self.ledger.keep, ledger, self._live_jobs())
        decided = len(logged)
        del ledger, logged  # the whole fold: give its pages back (infra.heap)
        await loop.run_in_executor(None, trim_heap)
        METRICS.rebalances.inc()
        self.fleet.stale &= set(self.scheduler.nodes)
        if self.remote is not None:  # the router must know every region before it decides
            await loop.run_in_executor(None, self.remote.wait_caught_up, 15.0)
        self._ready.set()
        log.info("worker ready in_s=%.2f final=%d", time.monotonic() - started, decided)

    def _live_jobs(self) -> set[str]:
        """Jobs this worker still holds GPUs for, or has waiting (what `on_tick` keeps too)."""
        return set(self.scheduler.state.jobs) | set(self.scheduler.queue.keys())

    async def snapshot_ledger(self) -> None:
        """Fold the logs' new records into the saved ledger and save it again (the timer's
        job: the next start-up then reads at most this interval of the logs)."""
        if self.ledger.path is None or not self._ready.is_set() or self.holding_state:
            return
        loop = asyncio.get_running_loop()
        async with self._ledger_lock:  # in a child process: neither this GIL nor this heap
            await loop.run_in_executor(None, self.ledger.save_apart, self._live_jobs())

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

    async def storage_lost(self, found: Mapping[tuple[str, int], tuple[int, int]]) -> None:
        """The broker's log ends behind our own commits: say so, and hold what we know."""
        self.holding_state = True
        for (topic, partition), (end, ours) in sorted(found.items()):
            log.error(
                "BROKER LOST ITS LOG: %s/%s ends at offset %d but this worker committed %d "
                "there; its storage was reset (a memory:// broker restarted?)",
                topic,
                partition,
                end,
                ours,
            )
        log.error(
            "holding %d reservations and %d final decisions in memory and refusing to rebuild "
            "from the empty log (that would hand out GPUs running jobs hold); restart agents "
            "and executors so they re-announce, and do not restart this worker until then",
            len(self.scheduler.state.jobs),
            len(self.scheduler.final),
        )

    def stalled(self) -> list[str]:
        """What keeps this worker from processing: partitions whose fetched records stop
        reaching their stream, and a telemetry lane whose reader thread has stopped."""
        out = list(self.stalls.stalled)
        reader = self.telemetry_reader
        if reader is not None and reader.started and not reader.alive:
            out.append(f"telemetry lane stopped: {reader.error or 'reader thread exited'}")
        return out

    def dependency_report(self) -> dict[str, Any]:
        """{"dependencies": name -> status, "degraded": names whose state is not ok}."""
        degraded = sorted(n for n, s in self.dependencies.items() if s.get("state") != "ok")
        return {"dependencies": dict(self.dependencies), "degraded": degraded}

    # -- sending ------------------------------------------------------------------------------

    async def send_all(self, messages: Iterable[Outgoing]) -> None:
        for msg in self.place_owned(messages):
            if msg.topic == DECISIONS_PLACEMENT:
                self.activity.on_decision(msg.record)
            value = self.codec.encode(msg.event, msg.record, topic=msg.topic)
            await self.topics[msg.topic].send(
                key=msg.key.encode(), value=value, partition=msg.partition
            )
            self.sent[msg.topic] = self.sent.get(msg.topic, 0) + 1
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

    @contextlib.asynccontextmanager
    async def guard(self, event: Any, consumer_name: str) -> AsyncIterator[None]:
        """Around one event's processing: a fault in our logic dead-letters the event (with the
        exception as its reason) instead of crashing the agent; broker errors still propagate."""
        try:
            yield
        except LOGIC_FAULTS as exc:
            self.metrics.fault(consumer_name)
            log.exception("processing failed consumer=%s", consumer_name)
            await self.dead_letter(
                event.message, f"processing failed: {type(exc).__name__}: {exc}", consumer_name
            )

    def consumed(self, consumer_name: str, n: int = 1) -> None:
        """Messages a consumer read (per-consumer counts and the Prometheus counter)."""
        self.metrics.consumed[consumer_name] += n
        METRICS.events.labels(consumer_name).inc(n)

    async def decode(self, event: Any, expected: str, consumer_name: str) -> dict[str, Any] | None:
        """The event's record if it is usable, else None after dead-lettering it.

        Usable: it decodes, is the `expected` event, is admitted (a JobSubmitted, when tenant
        keys are configured: streams.admission) and passes `streams.validation`.
        """
        message = event.message
        self.consumed(consumer_name)
        try:
            name, record = self.codec.decode(message.value, topic=message.topic)
        except CodecError as exc:
            await self._reject(message, str(exc), consumer_name)
            return None
        if name != expected:
            await self._reject(message, f"expected {expected}, got {name}", consumer_name)
            return None
        if name == "JobSubmitted" and not await self._admit(message, record):
            return None
        found = problems(name, record, self.rules)
        if found:
            await self._reject(message, f"invalid {name}: {joined(found)}", consumer_name)
            if name == "JobSubmitted":  # the user still gets an answer
                await self.send_all(self.scheduler.reject_invalid(record, found))
            return None
        return record

    async def _admit(self, message: Any, record: dict[str, Any]) -> bool:
        """Tenant identity (streams.admission): refused submissions get a decision + letter."""
        verdict = self.admission.check(message, record)
        if verdict.admitted:
            record[VERIFIED_TENANT] = verdict.tenant
            return True
        reason = verdict.reason or "not admitted"
        await self._reject(message, f"not admitted: {reason}", "router")
        await self.send_all([self.admission.refusal(record, reason)])
        return False

    async def _reject(self, message: Any, error: str, consumer_name: str) -> None:
        self.metrics.dead_lettered[consumer_name] += 1
        await self.dead_letter(message, error, consumer_name)
