"""The worker's scheduling logic: route, place, queue, release. No Faust in here.

Policy lives in `scorer/` (what to decide); this module is the mechanism (reserve, record,
emit, retry). Every method takes a decoded record and returns the messages to send, so the
Faust agents stay thin and unit tests run this against plain dicts.

Durable state is four changelog-backed tables, written only from region-partitioned events
so each entry lands in its region's changelog partition:
  reservations: job_id -> {region, assignments, gpu_model, released, and for re-planning:
                job (its JobSubmitted record), started_ms, speed, done_s, restore_s, moves,
                last_move_ms}
  queue:        job_id -> RoutedJob record waiting for capacity
  nodes:        node_id -> latest NodeInventory record
  moves:        job_id -> a migration in flight (`streams.replanning`)
Idempotence: a job with a final decision (PLACED or REJECTED) is never decided again; the set
of final jobs is rebuilt at start from the decision log itself (`streams.ledger`). Memory is
bounded by live jobs plus `horizon_s` (`streams.horizon`): decided jobs and released
reservations older than that are forgotten, jobs holding GPUs never.

Time is `clock`: the wall clock in a live worker, event time in a replay (`streams.clock`).
Re-planning (the speed-aware queue order, migration to a better match) runs when the policy
asks for it: after every release and on the timer (`on_tick`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, MutableMapping, Sequence
from typing import Any

from infra.jobspec import job_problems
from infra.topics import DECISIONS_PLACEMENT, JOBS_ROUTED, REPLAN_TICKS, RegionPartitioner
from scorer import ClusterState, PlacementResult, Placer, ReservationError, rank_regions
from scorer.replan import ReplanConfig
from streams.clock import Clock, WallClock
from streams.convert import decision_record, job_spec, node_spec, parse_assignments
from streams.horizon import DecidedJobs, ReleasedLog
from streams.outbox import Outgoing, new_event_id, now_ms, outgoing
from streams.queueing import ORDERS, order_waiting
from streams.replanning import Replanner

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


def _merge_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + int(value)
    return out


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
        moves: MutableMapping[str, Any] | None = None,
        replan: ReplanConfig | None = None,
        queue_order: str = "fifo",
        clock: Clock | None = None,
        porting_penalties: Mapping[str, float] | None = None,
        horizon_s: float = 600.0,
    ) -> None:
        self.state = state
        self.placer = placer
        self.reservations = reservations
        self.queue = queue
        self.nodes = nodes
        self.partition_of = RegionPartitioner(partitions, tuple(region_order))
        self.final = DecidedJobs(horizon_s)
        self.released = ReleasedLog(horizon_s)
        # job_id -> highest RoutedJob attempt in the log at the last rebuild, for undecided jobs
        self.routed_attempts: dict[str, int] = {}
        self.last_seen: dict[str, float] = {}
        self.view_ttl_s = view_ttl_s
        self.remote_views = remote_views
        self.porting_penalties = dict(porting_penalties or {})  # the router's, as the placer's
        self._views: tuple[float, dict[str, Any]] = (0.0, {})
        if queue_order not in ORDERS:
            raise ValueError(f"queue_order must be one of {ORDERS}, not {queue_order!r}")
        self.queue_order = queue_order
        self.clock: Clock = clock or WallClock()
        self.replan = replan or ReplanConfig(enabled=False)
        self.moves = moves if moves is not None else {}
        self.replanner = Replanner(self, self.moves, self.replan) if self.replan.enabled else None

    # -- recovery -----------------------------------------------------------------------------

    def rebuild(
        self,
        logged: Mapping[str, Mapping[str, Any]],
        ended: Collection[str] | Mapping[str, int] = (),
        owns: Callable[[str], bool] = lambda region: True,
        *,
        moves: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
        migrated: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> None:
        """Rebuild the arrays from the tables, reconciled with the decision log.

        `logged` maps job_id -> its final PlacementDecision as found in the log. A reservation
        without a decision was never announced: drop it (its job replays). A logged placement
        missing from the table was announced but not recorded: record it. `ended` are jobs the
        job-event log says finished: whatever the table says, their GPUs are free. `moves`
        (job_id -> its MigrationDecisions, in log order) and `migrated` (job_id -> its MIGRATED
        events) put a moved job on the GPUs it moved to and hold the targets of moves still in
        flight (`Replanner.rebuild`). Idempotent: after a rebalance it runs again on live state,
        which also knows decisions not yet logged. `owns(region)` says which regions this
        worker holds now: the rest leave memory, and only owned regions' placements are
        restored from the log.
        """
        self.forget_unowned(owns)
        for job_id in list(self.state.jobs):
            self.state.release(job_id)
        for record in self.nodes.values():
            self.state.upsert_node(node_spec(record))
            self.last_seen.setdefault(record["node_id"], time.monotonic())
        now = now_ms()
        for job_id, decision in logged.items():
            self.final.add(job_id, age_s=(now - int(decision.get("ts") or now)) / 1000)
        for job_id, entry in list(self.reservations.items()):
            if job_id not in self.final:
                del self.reservations[job_id]
            elif _has_ended(ended, job_id, entry.get("placed_ts")) and not entry.get("released"):
                self.reservations[job_id] = {**entry, "released": True}
                self.released.add(entry["region"], [job_id])
            elif not entry.get("released"):
                self._reserve_quietly(job_id, entry["assignments"])
            else:
                self.released.add(entry["region"], [job_id])
        for job_id, decision in logged.items():  # announced, but the table lost it
            placed = decision["outcome"] == "PLACED" and owns(decision.get("region") or "")
            if placed and job_id not in self.reservations:
                entry = _entry_of(decision, released=_has_ended(ended, job_id, decision.get("ts")))
                self.reservations[job_id] = entry
                if not entry["released"]:
                    self._reserve_quietly(job_id, entry["assignments"])
        for job_id in [j for j in self.queue if j in self.final]:
            del self.queue[job_id]
        if self.replanner is not None:
            self.replanner.rebuild(moves or {}, migrated or {}, set(ended))  # keys: the ended
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

    def forget_unowned(self, owns: Callable[[str], bool]) -> list[str]:
        """Drop nodes, reservations and queued jobs of regions this worker no longer owns,
        from memory only (the owner recovers them from the changelog); the nodes dropped."""
        for table in (self.nodes, self.reservations, self.queue):
            gone = [k for k, v in table.items() if not owns(str(v.get("region") or ""))]
            forget = getattr(table, "forget_local", None)  # a RegionTable: no tombstones
            if forget is not None:
                forget(gone)
            else:
                for key in gone:
                    table.pop(key, None)
        dropped = [n.node_id for n in self.state.nodes if not owns(n.region)]
        for node_id in dropped:
            self.state.remove_node(node_id)
            self.last_seen.pop(node_id, None)
        if dropped:
            log.info("forgot regions no longer owned nodes=%d", len(dropped))
        self._views = (0.0, {})
        return dropped

    def _reserve_quietly(self, job_id: str, assignments: Any) -> None:
        try:
            self.state.reserve(job_id, parse_assignments(assignments))
        except (ReservationError, KeyError) as exc:
            log.warning("cannot restore reservation job_id=%s: %s", job_id, exc)

    # -- routing ------------------------------------------------------------------------------

    def region_views(self) -> dict[str, Any]:
        """Region summaries for the router, recomputed at most every `view_ttl_s`.

        Summarising 10,000 nodes costs ~0.6 ms; the router may be a moment behind because the
        placer, which reads the arrays directly, has the last word (and spills over).
        """
        at, views = self._views
        now = time.monotonic()
        if now - at >= self.view_ttl_s or not views:
            views = self.state.region_views()
            if self.remote_views is not None:  # regions other workers own; ours are exact
                views = {**self.remote_views(), **views}
            self._views = (now, views)
        return views

    def route(self, job: Mapping[str, Any], *, started_ns: int) -> list[Outgoing]:
        """Global choice: rank regions for a JobSubmitted record and hand it to the best."""
        job_id = job["job_id"]
        self.clock.observe(int(job["ts"]))
        if job_id in self.final or job_id in self.routed_attempts:  # decided, or on its way
            return []
        submitted_ts = int(job["ts"])
        problems = job_problems(job)
        if problems:
            return self._refuse_unrouted(
                job, started_ns, [f"invalid job spec: {p}" for p in problems]
            )
        ranked = rank_regions(
            job_spec(job), self.region_views(), porting_penalties=self.porting_penalties
        )
        if not ranked:
            allowed = ", ".join(job.get("allowed_regions") or ()) or "any"
            reason = f"no known region satisfies allowed_regions={allowed}"
            return self._refuse_unrouted(job, started_ns, [reason])
        regions = [r for r, _ in ranked]
        routed = {
            "event_id": new_event_id(),
            "ts": self.clock.now(),
            "job": dict(job),
            "submitted_ts": submitted_ts,
            "region": regions[0],
            "candidates": regions[1:],
            "attempt": 1,
            "region_score": float(ranked[0][1]),
            "refusals": {},
            "queue_region": None,
            "worker_us": _us_since(started_ns),
            "verified_tenant": job.get("verified_tenant"),  # set by streams.admission
        }
        return [self._routed(routed)]

    def reject_invalid(self, job: Mapping[str, Any], problems: Sequence[str]) -> list[Outgoing]:
        """REJECTED for a submission that failed validation (once per job id)."""
        job_id = str(job["job_id"])
        if job_id in self.final or not job_id.strip() or len(job_id) > 256:
            return []  # no usable job id to answer under: the dead letter says it all
        reasons = [f"invalid job spec: {p}" for p in problems]
        return self._refuse_unrouted(job, time.perf_counter_ns(), reasons)

    def _refuse_unrouted(
        self, job: Mapping[str, Any], started_ns: int, reasons: list[str]
    ) -> list[Outgoing]:
        """REJECTED before any region was asked."""
        return [self._final(job, "REJECTED", None, int(job["ts"]), 1, started_ns, reasons=reasons)]

    def _routed(self, routed: dict[str, Any]) -> Outgoing:
        return outgoing(
            JOBS_ROUTED,
            routed["job"]["job_id"],
            routed,
            region=routed["region"],
            partition_of=self.partition_of,
        )

    # -- placement ----------------------------------------------------------------------------

    def place(
        self, routed: Mapping[str, Any], *, started_ns: int, why: str | None = None
    ) -> list[Outgoing]:
        """Regional choice for a RoutedJob; spill over, queue or reject when refused."""
        job = routed["job"]
        job_id, region = job["job_id"], routed["region"]
        self.clock.observe(int(routed.get("ts") or 0))
        if job_id in self.final or (job_id in self.queue and not routed.get("_retry")):
            return []
        if self.routed_attempts.get(job_id, 0) > int(routed["attempt"]):
            return []  # a replay: this job was already forwarded past this region
        result = self.placer.place(job_spec(job), region, explain=self._explain(routed))
        if result.placed:
            placed = self._commit(routed, result, started_ns, why)
            if placed is not None:
                return [placed]
        return self._refused(routed, result, started_ns)

    @staticmethod
    def _explain(routed: Mapping[str, Any]) -> bool:
        """Whether a refusal here needs its reasons (only a decision that is sent does).

        A failed retry stays queued silently; a refusal with regions left to try spills over,
        and needs only "could it ever fit here" until a queue region is chosen.
        """
        if routed.get("_retry"):
            return False
        return not (routed.get("candidates") and routed.get("queue_region"))

    def _commit(
        self,
        routed: Mapping[str, Any],
        result: PlacementResult,
        started_ns: int,
        why: str | None = None,
    ) -> Outgoing | None:
        job = routed["job"]
        job_id = job["job_id"]
        try:
            self.state.reserve(job_id, result.assignments)
        except ReservationError as exc:  # the scorer proposed something no longer free
            log.error("reservation refused job_id=%s: %s", job_id, exc)
            return None
        record = decision_record(
            job,
            "PLACED",
            event_id=new_event_id(job_id, "final"),
            ts=self.clock.now(),
            submitted_ts=int(routed["submitted_ts"]),
            attempt=int(routed["attempt"]),
            worker_us=int(routed.get("worker_us", 0)) + _us_since(started_ns),
            result=result,
            reasons=[why] if why else None,
        )
        self.reservations[job_id] = {
            **_entry_of(record, released=False),
            "job": dict(job),
            "done_s": float(routed.get("done_s") or 0.0),
            "restore_s": 0.0,
        }
        self.queue.pop(job_id, None)
        self.final.add(job_id)
        if self.replanner is not None:
            self.replanner.started(job_id, record["region"])
            self.replanner.drop_room(job_id)
        return outgoing(
            DECISIONS_PLACEMENT,
            job_id,
            record,
            region=record["region"],
            partition_of=self.partition_of,
        )

    def _refused(
        self, routed: Mapping[str, Any], result: PlacementResult, started_ns: int
    ) -> list[Outgoing]:
        job, region = routed["job"], routed["region"]
        refusals = _merge_counts(routed.get("refusals") or {}, result.refusals)
        queue_region = routed.get("queue_region") or (None if result.never_fits else region)
        worker_us = int(routed.get("worker_us", 0)) + _us_since(started_ns)
        candidates = list(routed.get("candidates") or ())
        if routed.get("_retry"):
            return []  # still no room; stays queued
        if candidates or (queue_region and queue_region != region):
            nxt = candidates[0] if candidates else queue_region
            forwarded = {
                **routed,
                "event_id": new_event_id(),
                "ts": self.clock.now(),
                "region": nxt,
                "candidates": candidates[1:],
                "attempt": int(routed["attempt"]) + 1,
                "refusals": refusals,
                "queue_region": queue_region,
                "worker_us": worker_us,
            }
            return [self._routed(forwarded)]
        submitted_ts, attempt = int(routed["submitted_ts"]), int(routed["attempt"])
        if queue_region == region:
            now = self.clock.now()
            self.queue[job["job_id"]] = {**routed, "refusals": refusals, "queued_ts": now}
            record = decision_record(
                job,
                "QUEUED",
                event_id=new_event_id(job["job_id"], "queued"),
                ts=now,
                submitted_ts=submitted_ts,
                attempt=attempt,
                worker_us=worker_us,
                region=region,
                reasons=["no free capacity now; waiting in the region queue"],
                refusals=refusals,
            )
            return [
                outgoing(
                    DECISIONS_PLACEMENT,
                    job["job_id"],
                    record,
                    region=region,
                    partition_of=self.partition_of,
                )
            ]
        reasons = self._rejection_reasons(job, result)
        return [
            self._final(
                job,
                "REJECTED",
                region,
                submitted_ts,
                attempt,
                started_ns,
                reasons=reasons,
                refusals=refusals,
                worker_us=worker_us,
            )
        ]

    def _rejection_reasons(self, job: Mapping[str, Any], last: PlacementResult) -> list[str]:
        """Why a job is rejected, over every region this worker holds: the last region tried
        may lack the job's GPU model altogether ("H200 is not an allowed GPU model") while the
        decisive reason is elsewhere ("needs 139 GiB per GPU, H100 has 79.6 GiB")."""
        everywhere = self.placer.place(job_spec(job), None)
        reasons = list(everywhere.reasons) if not everywhere.placed else []
        return (
            reasons
            or list(last.reasons)
            or ["no node in any allowed region can ever host this job"]
        )

    def _final(
        self,
        job: Mapping[str, Any],
        outcome: str,
        region: str | None,
        submitted_ts: int,
        attempt: int,
        started_ns: int,
        *,
        reasons: list[str],
        refusals: Mapping[str, int] | None = None,
        worker_us: int | None = None,
    ) -> Outgoing:
        job_id = job["job_id"]
        self.final.add(job_id)
        record = decision_record(
            job,
            outcome,
            event_id=new_event_id(job_id, "final"),
            ts=self.clock.now(),
            submitted_ts=submitted_ts,
            attempt=attempt,
            worker_us=_us_since(started_ns) if worker_us is None else worker_us,
            region=region,
            reasons=reasons,
            refusals=refusals,
        )
        return outgoing(
            DECISIONS_PLACEMENT, job_id, record, region=region, partition_of=self.partition_of
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def on_job_event(
        self, event: Mapping[str, Any], *, produced_ms: int | None = None
    ) -> list[Outgoing]:
        """Release GPUs when a job ends, move them when it migrated; then decide again.

        `produced_ms` is when the event was written to the log (its Kafka timestamp): an end
        written before this placement was decided (a finish before a start, a stale or
        replayed event) is not about this placement and frees nothing.
        """
        kind, job_id = event["type"], event["job_id"]
        self.clock.observe(int(event.get("ts") or 0))
        if kind == "MIGRATED":
            if self.replanner is None:
                return []
            return self._after_release(self.replanner.on_migrated(event))
        if kind not in ("FINISHED", "FAILED", "EVICTED"):
            return []
        entry = self.reservations.get(job_id)
        if (
            entry is not None
            and produced_ms is not None
            and produced_ms < entry.get("placed_ts", 0)
        ):
            log.warning("end of job written before its placement ignored job_id=%s", job_id)
            return []
        if self.replanner is not None:
            self.replanner.forget(job_id)
        if entry is None or entry.get("released"):
            self.state.release(job_id)  # idempotent
            return []
        self.state.release(job_id)
        self.reservations[job_id] = {**entry, "released": True}
        # on the region's own event, so the deletes land in its changelog partition
        self.released.add(entry["region"], [job_id])
        self.released.forget(entry["region"], self.reservations)
        return self._after_release([entry["region"]])

    def _after_release(self, regions: Sequence[str]) -> list[Outgoing]:
        """Capacity came back: waiting jobs first, then running jobs that a faster GPU suits."""
        out: list[Outgoing] = []
        for region in regions:
            out.extend(self._replan(region))
        return out

    def _replan(self, region: str) -> list[Outgoing]:
        """Waiting jobs first (a gang whose node was just freed for it before all), then
        running jobs a faster free GPU suits, then defragmentation for waiting gangs."""
        out: list[Outgoing] = []
        if self.replanner is not None:
            for gang in self.replanner.room_ready(region):
                routed = self.queue.get(gang)
                if routed is not None:
                    why = "defragmentation freed a node for this gang"
                    out.extend(self.place({**routed, "_retry": True}, started_ns=0, why=why))
                else:  # a running gang spread over nodes: consolidate it on the freed node
                    out.extend(self.replanner.better_match(region, only={gang}))
        out.extend(self.retry_queue(region))
        if self.replanner is not None:
            out.extend(self.replanner.better_match(region))
            out.extend(self.replanner.defragment(region))
        return out

    def retry_queue(self, region: str, *, max_refusals: int = 8) -> list[Outgoing]:
        """Place waiting jobs of a region in the queue order (priority bands, then `fifo` or
        `speed_aware`; `streams.queueing`).

        Jobs needing more whole GPUs than the region has free are skipped without scoring, and
        the scan stops after `max_refusals` refusals, so a release costs bounded work however
        long the queue is (smaller jobs behind a big one may backfill).
        """
        waiting = [r for r in self.queue.values() if r["region"] == region]
        if not waiting:
            return []
        ordered = order_waiting(
            waiting,
            order=self.queue_order,
            state=self.state,
            region=region,
            throughput=self.placer.throughput,
            now_ms=self.clock.now(),
            aging=self.replan.aging,
        )
        free = sum(self.state.free_gpus(region).values())
        out: list[Outgoing] = []
        refused = 0
        for routed, ranked in ordered:
            job = routed["job"]
            need = int(job.get("gpu_count", 1)) if int(job.get("gpu_milli", 1000)) >= 1000 else 0
            if need > free:
                continue
            why = ranked.explain if self.queue_order != "fifo" else None
            placed = self.place(
                {**routed, "_retry": True}, started_ns=time.perf_counter_ns(), why=why
            )
            if placed:
                out.extend(placed)
                free -= need
            else:
                refused += 1
                if refused >= max_refusals:
                    break
        return out

    def ticks(self, now_ms: int) -> list[Outgoing]:
        """The worker's timer as one ReplanTick per region it holds (`on_tick` runs when each
        comes back through the region's partition)."""
        return [
            outgoing(
                REPLAN_TICKS,
                region,
                {"event_id": new_event_id(), "ts": now_ms, "region": region},
                region=region,
                partition_of=self.partition_of,
            )
            for region in self.state.regions
            if self.state.slots(region).size
        ]

    def on_tick(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]:
        """The scheduler's timer for `regions` (None: all; worker: a ReplanTick every
        `worker.replan_interval_s`; replay: `tick_s`): drop holds of moves not confirmed in
        time, retry the queue, and look for running jobs a faster free GPU suits."""
        self.clock.observe(now_ms)
        held = self.state.jobs
        self.final.prune(keep=lambda job_id: job_id in held)
        active = {r["region"] for r in self.queue.values()}
        if self.replanner is not None:
            active |= set(self.replanner.expire())
            active |= self.replanner.regions()
        if regions is not None:
            active &= set(regions)
        out: list[Outgoing] = []
        for region in sorted(active):
            out.extend(self._replan(region))
        return out

    def moves_in_flight(self) -> list[str]:
        """Jobs with a migration committed and not yet confirmed (their targets are held)."""
        return [j for j, m in self.moves.items() if m.get("status") == "pending"]

    def queued_in(self, region: str) -> int:
        return sum(1 for r in self.queue.values() if r["region"] == region)


def _entry_of(decision: Mapping[str, Any], *, released: bool) -> dict[str, Any]:
    """A reservations entry from a PLACED decision record."""
    return {
        "region": decision["region"],
        "assignments": decision["assignments"],
        "gpu_model": decision.get("gpu_model"),
        "released": released,
        "placed_ts": decision.get("ts"),
        "started_ms": int(decision.get("ts") or 0),
        "speed": float(decision.get("expected_throughput") or 0.0),
    }


def _us_since(started_ns: int) -> int:
    return (time.perf_counter_ns() - started_ns) // 1000


def _has_ended(ended: Collection[str] | Mapping[str, int], job_id: str, placed_ts: Any) -> bool:
    """Whether the job-event log ends this placement: with write times (a mapping), only an
    end written at or after the placement counts (as `on_job_event` judges it live)."""
    if isinstance(ended, Mapping):
        return job_id in ended and ended[job_id] >= int(placed_ts or 0)
    return job_id in ended
