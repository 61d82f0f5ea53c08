"""The worker's scheduler: route, place, queue, preempt, requeue, release. No Faust here.

Policy lives in `scorer/` (what to decide); this package is the mechanism (reserve, record,
emit, retry). Every method takes a decoded record and returns the messages to send, so the
Faust agents stay thin and unit tests run this against plain dicts. The class holds the
order of steps; its state has one owner, the book (`streams.scheduler.book`: reservations,
queue, decided jobs, epochs, holds), changed only through it. The steps live beside it and
see the scheduler through narrow protocols (`streams.scheduler.protocols`): `routing`
(which region), `proposals` (the placer under quota), `placements` (commit and release),
`outcomes` (forward, queue, hold, reject), `recovery` (rebuild after a restart or
rebalance), `ticks` (the passes after a release and on the timer). The durable tables, the
epochs that make every decision idempotent, and the horizon that bounds memory are described
in docs/scheduler.md.

Time is `clock`: the wall clock in a live worker, event time in a replay (`streams.clock`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from infra.topics import RegionPartitioner
from scorer import (
    ClusterState,
    JobSpec,
    PlacementResult,
    Placer,
)
from scorer.replan import ReplanConfig, Waiting
from scorer.tenancy import TenancyPolicy
from streams.base.clock import Clock, as_clock
from streams.base.outbox import Outgoing
from streams.replan.replanner import Replanner
from streams.scheduler.actions.base import Actions, Attempt
from streams.scheduler.actions.registry import build as build_actions
from streams.scheduler.book import Book
from streams.scheduler.cancel import Cancels
from streams.scheduler.convert import job_spec, node_spec
from streams.scheduler.fairness import WithinOrder
from streams.scheduler.horizon import DecidedJobs
from streams.scheduler.lifecycle import force_evict, on_job_event
from streams.scheduler.placements import commit
from streams.scheduler.preemption import Preemptions
from streams.scheduler.proposals import propose, restrict
from streams.scheduler.queueing import retry_region
from streams.scheduler.recovery import rebuild_state
from streams.scheduler.routing import region_views, reject_invalid
from streams.scheduler.speed_order import ORDERS, order_waiting
from streams.scheduler.tenancy import Tenancy
from streams.scheduler.ticks import after_release, tick_messages, tick_passes
from streams.scheduler.waiting import enqueue, queued_decision

if TYPE_CHECKING:
    from streams.scheduler.deferral import ForecastUse

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


class Scheduler:
    """One worker's view of the fleet and its decisions."""

    def __init__(
        self,
        state: ClusterState,
        placer: Placer,
        *,
        reservations: MutableMapping[str, Any],
        queue: MutableMapping[str, Any],
        nodes: MutableMapping[str, Any],
        partitions: int,
        region_order: Sequence[str] = (),
        view_ttl_s: float = 0.2,
        remote_views: Callable[[], Mapping[str, Any]] | None = None,
        cross_region: bool = False,
        tenancy: TenancyPolicy | None = None,
        within_tenant_order: WithinOrder | None = None,
        clock: Clock | Callable[[], int] | None = None,
        moves: MutableMapping[str, Any] | None = None,
        replan: ReplanConfig | None = None,
        queue_order: str = "fifo",
        porting_penalties: Mapping[str, float] | None = None,
        horizon_s: float = 600.0,
        try_once: bool = False,
        actions: str = "default",
    ) -> None:
        self.state = state
        # arrivals-only packing: a job that does not fit now is REJECTED (never queued, never
        # preempting, never moved), as the FGD paper's experiment tries each task once
        self.try_once = try_once
        self.placer = placer
        # the only writer of reservations, queue, decided jobs, epochs, holds and moves
        self.book = Book(state, reservations, queue, horizon_s, moves)
        # the book's tables, to read (the re-planner's `SchedulerParts` names them)
        self.reservations, self.queue = self.book.reservations, self.book.queue
        self.moves: Mapping[str, Any] = self.book.moves
        self.nodes = nodes
        self.partition_of = RegionPartitioner(partitions, tuple(region_order))
        # job_id -> highest RoutedJob attempt in the log at the last rebuild, for undecided jobs
        self.routed_attempts: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.view_ttl_s = view_ttl_s
        self.remote_views = remote_views
        self.porting_penalties = dict(porting_penalties or {})  # the router's, as the placer's
        # (when, views): the router's region summaries, kept by scheduler.routing.region_views
        self.view_cache: tuple[float, dict[str, Any]] = (0.0, {})
        # gangs that fit no region may span the regions this worker holds (one worker only:
        # a reservation lives in its anchor region's changelog); placed flows go to the view
        self.cross_region = cross_region
        self.network = placer.network
        self.clock: Clock = as_clock(clock)  # event time in replays
        if queue_order not in ORDERS:
            raise ValueError(f"queue_order must be one of {ORDERS}, not {queue_order!r}")
        self.queue_order = queue_order
        self.queue_why: dict[str, str] = {}  # job -> why the queue order tries it now
        self._last_spec: tuple[Mapping[str, Any], float, JobSpec] | None = None  # spec_of
        self._waiting_known: dict[tuple[Any, ...], Waiting] = {}  # speed order, per queue entry
        speed = self._speed_order if queue_order == "speed_aware" else None
        self.tenancy = Tenancy(state, tenancy, within_tenant_order or speed)
        self.preemption = Preemptions(self)
        self.cancels = Cancels(
            self
        )  # cancel requests (streams.scheduler.cancel); verifier: the runtime's
        self.replan = replan or ReplanConfig(enabled=False)
        replanning = self.replan.enabled and not try_once
        self.replanner = Replanner(self, self.replan) if replanning else None
        # the ordered actions per trigger (`streams.scheduler.actions.registry.PIPELINES`)
        self.actions: Actions = build_actions(actions, self)
        # forecast headroom and green deferral (streams.scheduler.deferral.ForecastUse); None: off
        self.forecasts: ForecastUse | None = None

    # -- the book's state, to read (`streams.scheduler.book` writes it) --------------------------

    @property
    def final(self) -> DecidedJobs:
        return self.book.final

    @property
    def epochs(self) -> Mapping[str, int]:
        return self.book.epochs

    # -- recovery -----------------------------------------------------------------------------

    def rebuild(
        self,
        logged: Mapping[str, Mapping[str, Any]],
        ended: Mapping[str, Mapping[int, Any]] | Mapping[str, int] | Collection[str] = (),
        owns: Callable[[str], bool] = lambda region: True,
        *,
        moves: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        migrated: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        trimmed_ms: int = 0,
    ) -> None:
        """Rebuild the arrays from the tables, reconciled with the decision and job-event logs.

        `logged`: job_id -> its last final PlacementDecision in the log; `ended`: job_id ->
        {epoch: (FINISHED | FAILED | EVICTED, written ms)} from the job-event log (`streams.
        ledger`; an end written before its placement does not end it). A plain collection of
        job ids means their epoch 0 finished; job_id -> written ms, that epoch 0 ended then.
        `owns(region)` says which regions this worker holds now: the rest leave memory, and
        only owned regions' placements are restored; decisions written before `trimmed_ms` may
        be missing from `logged` (`Ledger.trimmed_ms`). See `scheduler.recovery` for the rules.
        """
        rebuild_state(self, logged, ended, owns, moves, migrated, trimmed_ms=trimmed_ms)
        log.info(
            "rebuilt nodes=%d final=%d held=%d queued=%d",
            len(self.nodes),
            len(self.final),
            len(self.state.jobs),
            len(self.queue),
        )

    def note_routed(self, attempts: Mapping[str, int]) -> None:
        """Remember how far each undecided job got through the regions (from the routed log).

        With several workers a replayed record must not start a second path for a job: a
        router that takes over a `jobs.submitted` partition would route an already routed
        job again (maybe to another region and worker), and a placer that takes over a region
        would decide a RoutedJob its predecessor had already forwarded to another region.
        """
        self.routed_attempts = {j: a for j, a in attempts.items() if j not in self.final}

    def restore_node(self, record: Mapping[str, Any]) -> None:
        self.state.upsert_node(node_spec(record))
        self.last_seen.setdefault(record["node_id"], time.monotonic())

    # -- routing ------------------------------------------------------------------------------

    def region_views(self) -> dict[str, Any]:
        """Region summaries for the router, recomputed at most every `view_ttl_s`
        (`streams.scheduler.routing`)."""
        return region_views(self)

    def route(self, job: Mapping[str, Any], *, started_ns: int) -> list[Outgoing]:
        """Global choice: rank regions for a JobSubmitted record and hand it to the best
        (`streams.scheduler.routing`)."""
        return [m for action in self.actions.submitted for m in action.run(job, started_ns)]

    def reject_invalid(self, job: Mapping[str, Any], problems: Sequence[str]) -> list[Outgoing]:
        """REJECTED for a submission that failed validation (once per job id)."""
        return reject_invalid(self, job, problems)

    # -- jobs as the scorer sees them ---------------------------------------------------------

    def know_spec(self, job: Mapping[str, Any], spec: JobSpec) -> None:
        """`spec` is `job_spec(job)`: `spec_of` a record carrying `job` (no progress yet) is it."""
        self._last_spec = (job, 0.0, spec)

    def spec_of(self, routed: Mapping[str, Any]) -> JobSpec:
        """The job's spec; a requeued job expects only the work it has left.

        A decision asks for the spec of the same record several times (quota gate, placer,
        commit): the last one is kept, by identity of the job record (never mutated here) or,
        for a record decoded again after a hop, by equal contents (the spec is made from them)."""
        job, progress = routed["job"], float(routed.get("progress") or 0.0)
        last = self._last_spec
        if last is not None and last[1] == progress and (last[0] is job or last[0] == job):
            return last[2]
        spec = job_spec(job)
        if progress > 0 and spec.expected_duration_s:
            left = spec.expected_duration_s * max(0.01, 1.0 - progress)
            spec = dataclasses.replace(spec, expected_duration_s=left)
        self._last_spec = (job, progress, spec)
        return spec

    def restrict(self, spec: JobSpec, models: Sequence[str]) -> JobSpec | None:
        """The spec limited to `models` (and the job's own allow-list); None when none is left."""
        return restrict(self.state, spec, models)

    @staticmethod
    def epoch_of(routed: Mapping[str, Any]) -> int:
        return int(routed.get("epoch") or 0)

    def propose(
        self, routed: Mapping[str, Any], region: str, *, explain: bool = False
    ) -> tuple[PlacementResult, str, str]:
        """The placer's proposal under the tenant's quota: (result, wait code, wait reason)
        (`streams.scheduler.proposals`)."""
        return propose(self, routed, region, explain=explain)

    # -- placement ----------------------------------------------------------------------------

    def place(self, routed: Mapping[str, Any], *, started_ns: int) -> list[Outgoing]:
        """Regional choice for a RoutedJob; spill over, preempt, queue or reject when refused."""
        job = routed["job"]
        job_id = job["job_id"]
        self.clock.observe(int(routed.get("ts") or 0))
        if job_id in self.final or (job_id in self.queue and not routed.get("_retry")):
            return []
        if self.routed_attempts.get(job_id, 0) > int(routed["attempt"]):
            return []  # a replay: this job was already forwarded past this region
        attempt = Attempt(routed, started_ns)
        for action in self.actions.arrival:  # defer, place, refuse (`streams.scheduler.actions`)
            decided = action.run(attempt)
            if decided is not None:
                return decided
        return []

    def place_waiting(self, routed: Mapping[str, Any], *, note: str = "") -> list[Outgoing]:
        """Place a queued job now if it fits (its wait reason is updated when not)."""
        result, code, reason = self.propose(routed, routed["region"], explain=False)
        if result.placed:
            placed = self.commit(routed, result, time.perf_counter_ns(), note=note)
            return [placed] if placed is not None else []
        self.tenancy.wait(routed["job"]["job_id"], code, reason)
        return []

    def commit(
        self,
        routed: Mapping[str, Any],
        result: PlacementResult,
        started_ns: int,
        *,
        note: str = "",
    ) -> Outgoing | None:
        """Reserve, book and announce a placement (`streams.scheduler.outcomes`); None when the GPUs
        were taken meanwhile."""
        return commit(self, routed, result, started_ns, note=note)

    def enqueue(self, routed: Mapping[str, Any], code: str, reason: str) -> Outgoing:
        """Put a job in its region's queue; the QUEUED decision saying why it waits."""
        return enqueue(self, routed, code, reason)

    def queued_decision(
        self, entry: Mapping[str, Any], code: str, reason: str, *, tag: str = "queued"
    ) -> Outgoing:
        return queued_decision(self, entry, code, reason, tag=tag)

    # -- lifecycle ----------------------------------------------------------------------------

    def on_job_event(
        self,
        event: Mapping[str, Any],
        *,
        produced_ms: int | None = None,
        released: list[str] | None = None,
    ) -> list[Outgoing]:
        """Release GPUs when a placement ends (its epoch's end event); an evicted job is
        requeued with its progress; then the region's queue is tried (`scheduler.lifecycle`).

        `produced_ms`: when the event was written to the log (its Kafka timestamp); an end
        written before this placement was decided frees nothing. With `released`, regions
        whose capacity came back are added to it, for one `after_release` after a batch.
        """
        kind = event["type"]
        self.clock.observe(int(event.get("ts") or 0))
        if kind == "MIGRATED":
            if self.replanner is None:
                return []
            regions = self.replanner.on_migrated(event)
            if released is not None:
                released.extend(regions)
                return []
            return self.after_release(regions)
        return on_job_event(self, event, produced_ms=produced_ms, released=released)

    def after_release(self, regions: Sequence[str]) -> list[Outgoing]:
        """Capacity came back: waiting jobs first, then running jobs that a faster GPU suits
        (`streams.scheduler.ticks`)."""
        return after_release(self, regions, self.actions.release)

    def _speed_order(self, waiting: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """Within a tenant: priority bands, then the job that gains most from the free GPUs
        (with aging, `streams.scheduler.speed_order`); the reason rides on the job's placement."""
        if not waiting:
            return []
        ordered = order_waiting(
            waiting,
            order="speed_aware",
            state=self.state,
            region=str(waiting[0]["region"]),
            throughput=self.placer.throughput,
            now_ms=self.clock.now(),
            aging=self.replan.aging,
            known=self._waiting_known,
        )
        for routed, ranked in ordered:
            self.queue_why[routed["job"]["job_id"]] = ranked.explain
        return [routed for routed, _ in ordered]

    def force_evict(self, job_id: str, epoch: int) -> list[Outgoing]:
        """The grace period is over: count the victim's GPUs as free and requeue it."""
        return force_evict(self, job_id, epoch)

    def retry_queue(self, region: str, *, max_refusals: int = 8) -> list[Outgoing]:
        """Place waiting jobs of a region: tenants in fair-share order, each tenant's jobs by
        `within_tenant_order`; the first job that cannot start gets a backfill reservation
        (`streams.scheduler.queueing`). Bounded work per call, however long the queue."""
        return retry_region(self, region, max_refusals=max_refusals)

    def on_tick(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]:
        """The scheduler's timer (worker: every `worker.replan_interval_s`, per owned partition;
        replay: `tick_s`): grace periods that ended, every queue retried, then a few waiting
        jobs look for victims (priority preemption, quota reclaim); re-planning drops holds of
        moves not confirmed in time and looks for running jobs a faster free GPU suits
        (`streams.scheduler.ticks`). Then what the horizon no longer needs is forgotten."""
        out = tick_passes(self, now_ms, regions, self.actions.tick)
        self.book.forget_past_horizon()
        self._waiting_known = {k: w for k, w in self._waiting_known.items() if k[0] in self.queue}
        self.queue_why = {j: w for j, w in self.queue_why.items() if j in self.queue}
        return out

    def ticks(self, now_ms: int) -> list[Outgoing]:
        """The worker's timer as one ReplanTick per region it holds (`on_tick` runs when each
        comes back through the region's partition, so its table writes land there)."""
        return tick_messages(self, now_ms)

    def moves_in_flight(self) -> list[str]:
        """Jobs with a migration committed and not yet confirmed (their targets are held)."""
        return [j for j, m in self.moves.items() if m.get("status") == "pending"]

    # -- network ------------------------------------------------------------------------------

    def running_flows(self) -> dict[str, Any]:
        """Flows of the jobs the reservation table says still hold GPUs."""
        if self.network is None:
            return {}
        return {j: self.network.flows(j) for j in self.state.jobs if self.network.flows(j)}

    def queued_in(self, region: str) -> int:
        return sum(1 for r in self.queue.values() if r["region"] == region)
