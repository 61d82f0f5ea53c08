"""Deciding again, the mechanism half: commit the scorer's moves, hold their target GPUs, confirm
them when the executor reports MIGRATED, drop them when it does not in time.

Durable state (changelog-backed, written only from region-partitioned events; kept by the book,
`streams.scheduler.book.Book`, and changed only through its methods):
  moves: job_id -> {decision (the MigrationDecision record), hold (its hold key), deadline_ms,
                    status: pending | expired}
A move's target GPUs are reserved under `hold_key(job_id)` from the decision until MIGRATED (the
job's old GPUs are freed then, never before) or `hold_s` later (the hold is dropped; the job
stays where it was). So no GPU is promised twice while a job is between two places. A MIGRATED
for a move already applied is a duplicate and changes nothing; one for an expired move is
applied only if its target is still free. After a restart the tables come back from their
changelogs and `rebuild` reconciles them with the decision and job-event logs.

Rate limits: per job (`job_cooldown_s`, `max_moves_per_job`, counted on the reservation entry),
per region (`region_max_moves` moves begun in any `region_window_s`). Defragmentation's rooms
(a node freed for a waiting gang) are kept in the book and handled in
`streams.replan.defragmentation`. The re-planner itself keeps only the memory of its own
passes (jobs holding GPUs, parsed entries, failed tries, quiet regions).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from infra.topics import DECISIONS_MIGRATION
from scorer.fragmix import LearnedMix
from scorer.replan import (
    MoveProposal,
    ReplanConfig,
    RunningJob,
    better_match,
    cheaper_or_greener,
    movable,
    next_checkpoint_ms,
)
from streams.base.outbox import Outgoing, outgoing
from streams.replan.defragmentation import SPREAD_GAIN, defragment, drop_room, hold_room, room_ready
from streams.replan.migrations import (
    migration_record,
    move_entry,
    moved_entry,
    reconcile,
    running_job,
)
from streams.replan.parts import BookStatement, ReplanBook, Room, SchedulerParts
from streams.scheduler.convert import parse_assignments

__all__ = ["SPREAD_GAIN", "Replanner", "SchedulerParts"]

log = logging.getLogger(__name__)


class Replanner:
    """Commits re-planning proposals for one worker's regions."""

    def __init__(self, parts: SchedulerParts, config: ReplanConfig) -> None:
        self.parts = parts
        self.config = config
        self._runs: dict[str, tuple[tuple[Any, ...], RunningJob | None]] = {}  # parsed entries
        self._tried: dict[str, tuple[object, int]] = {}  # failed tries (scorer.replan)
        self._live: dict[str, str] = {}  # job_id -> region of jobs holding GPUs
        self._quiet: dict[str, tuple[object, int]] = {}  # region -> (free GPUs, next due ms)
        self._green_quiet: dict[str, tuple[object, int]] = {}  # same, for cheaper/greener
        self._last_pass: dict[str, int] = {}  # region -> when its move passes last ran (ms)
        self._last_green: dict[str, int] = {}  # region -> when its cheaper/greener pass ran
        self.mix = LearnedMix()  # the job mix the region's fragmentation is measured against

    # -- reading ------------------------------------------------------------------------------

    @property
    def book(self) -> ReplanBook:
        """The only writer of what the re-planner changes (moves, holds, rooms, placements)."""
        return self.parts.book

    @property
    def moves(self) -> Mapping[str, Any]:
        """Migrations in flight (the book's `moves` table)."""
        return self.parts.book.moves

    @property
    def rooms(self) -> Mapping[str, Room]:
        """Defragmentation in flight: gang -> the node being emptied for it (the book's)."""
        return self.parts.book.rooms

    def pending(self, job_id: str) -> bool:
        move = self.moves.get(job_id)
        return move is not None and move.get("status") == "pending"

    def regions(self) -> set[str]:
        """Regions with jobs holding GPUs."""
        return set(self._live.values())

    def started(self, job_id: str, region: str) -> None:
        """A job now holds GPUs in `region` (placed, or moved there)."""
        self._live[job_id] = region

    def running(self, region: str) -> list[RunningJob]:
        """Jobs running in `region` with no move in flight."""
        out = []
        for job_id in [j for j, r in self._live.items() if r == region]:
            entry = self.parts.reservations.get(job_id)
            if entry is None or entry.get("released") or self.pending(job_id):
                continue
            policy = self.parts.tenancy.policy  # a reloaded policy may change the classes
            key = (entry.get("started_ms"), entry.get("moves"), entry.get("speed"), id(policy))
            cached = self._runs.get(job_id)
            if cached is None or cached[0] != key:
                cached = self._runs[job_id] = (key, self._classed(running_job(job_id, entry)))
            if cached[1] is not None:
                out.append(cached[1])
        return out

    def _classed(self, run: RunningJob | None) -> RunningJob | None:
        """The job as its priority class has it: a class that is not preemptible (online
        inference by default) keeps its jobs from being moved, as from being preempted; the
        job's own `preemptible` flag alone defaults to true."""
        if run is None or not run.job.preemptible:
            return run
        prio = self.parts.tenancy.priority(run.job)
        if isinstance(prio, str) or prio.preemptible:
            return run
        return replace(run, job=replace(run.job, preemptible=False))

    def region_budget(self, region: str, now_ms: int) -> int:
        """Moves `region` may still begin in the current window."""
        since = now_ms - self.config.region_window_s * 1000
        begun = 0
        for job_id, where in self._live.items():
            entry = self.parts.reservations.get(job_id) if where == region else None
            if entry is not None and (entry.get("last_move_ms") or -1) >= since:
                begun += 1
        begun += sum(  # in flight or expired (a confirmed one counts by its entry above)
            1
            for m in self.moves.values()
            if m["decision"]["from_region"] == region and int(m["decision"]["ts"]) >= since
        )
        return max(0, self.config.region_max_moves - begun)

    # -- passes -------------------------------------------------------------------------------

    def passes(self, region: str) -> list[Outgoing]:
        """The move passes of `region`: faster GPUs, cheaper or greener places, room for
        waiting gangs. At most once per `pass_gap_s`: a burst of releases retries the queue
        each time (the caller's part) but looks for moves once; the timer catches up."""
        now = self.parts.clock.now()
        if _within(self._last_pass.get(region), now, self.config.pass_gap_s):
            return []
        self._last_pass[region] = now
        return [
            *self.better_match(region),
            *self.cheaper_or_greener(region),
            *self.defragment(region),
        ]

    def better_match(self, region: str, only: Collection[str] | None = None) -> list[Outgoing]:
        """Moves of `region`'s running jobs (`only` these, if given) to faster free GPUs that
        pay (targets held).

        A pass that found nothing is not repeated until the region's free GPUs change or the
        first job it tried passes its next checkpoint (when a move would lose less)."""
        now = self.parts.clock.now()
        free = self.parts.state.free_gpus(region)
        signature = tuple(sorted(free.items()))
        quiet = self._quiet.get(region) if only is None else None
        if not free or (quiet is not None and quiet[0] == signature and now < quiet[1]):
            return []
        budget = min(self.config.max_moves_per_pass, self.region_budget(region, now))
        if budget <= 0:
            return []
        runs = [
            r
            for r in self.running(region)
            if movable(r, now, self.config) is None and (only is None or r.job_id in only)
        ]
        statement = BookStatement(self.book)
        proposals = better_match(
            self.parts.state,
            self.parts.placer,
            runs,
            now,
            self.config,
            statement,
            budget=budget,
            tried=self._tried,
        )
        if not proposals and only is None:  # nothing pays: quiet until a checkpoint or cooldown
            due = [self._tried[r.job_id][1] for r in runs if r.job_id in self._tried]
            cooled = [
                r.last_move_ms + int(self.config.job_cooldown_s * 1000)
                for r in self.running(region)
                if r.last_move_ms is not None
            ]
            later = [t for t in (*due, *cooled) if t > now]
            self._quiet[region] = (signature, min(later, default=now + 3_600_000))
        return [self._commit(p, now) for p in proposals]

    def cheaper_or_greener(self, region: str) -> list[Outgoing]:
        """Moves of `region`'s running jobs to GPUs (here or in another region this worker
        holds) that finish them for less money and/or carbon, by more than the margin and no
        later (`scorer.replan.footprint`; targets held).

        A pass that found nothing is not repeated until the free GPUs or the grid signals
        change, or a checkpoint or cooldown of one of its jobs passes."""
        if not self.config.footprint:
            return []
        now, state = self.parts.clock.now(), self.parts.state
        signature = (
            tuple(sorted(state.free_gpus().items())),
            state.carbon.tobytes(),
            state.price.tobytes(),
        )
        quiet = self._green_quiet.get(region)
        if quiet is not None and quiet[0] == signature and now < quiet[1]:
            return []
        if _within(self._last_green.get(region), now, self.config.footprint_every_s):
            return []
        budget = min(self.config.max_moves_per_pass, self.region_budget(region, now))
        runs = [r for r in self.running(region) if movable(r, now, self.config) is None]
        if budget <= 0 or not runs:
            return []
        self._last_green[region] = now  # a pass that looked: the next one in a minute
        # another region only where nothing waits: its free GPUs are its queue's first
        waiting = {str(r["region"]) for r in self.parts.queue.values()}
        regions = [r for r in state.regions if r == region or r not in waiting]
        statement = BookStatement(self.book)
        proposals = cheaper_or_greener(
            state, self.parts.placer, runs, now, self.config, statement, budget=budget,
            regions=regions,
        )  # fmt: skip
        if not proposals:
            self._green_quiet[region] = (signature, self._next_due(region, now))
        return [self._commit(p, now) for p in proposals]

    def _next_due(self, region: str, now: int) -> int:
        """When a job of `region` next passes a checkpoint or leaves its cooldown (a move could
        then lose less or be allowed); an hour from now at most."""
        due = []
        for run in self.running(region):
            due.append(next_checkpoint_ms(run, now, self.config))
            if run.last_move_ms is not None:
                due.append(run.last_move_ms + int(self.config.job_cooldown_s * 1000))
        return min([t for t in due if t > now], default=now + 3_600_000)

    def defragment(self, region: str) -> list[Outgoing]:
        """If a gang waits in `region`, free one node for it by moving a few short jobs
        (`streams.replan.defragmentation`)."""
        return defragment(self, region)

    def room_ready(self, region: str) -> list[str]:
        """Gangs of `region` whose node is free now (every mover left): release the room so
        the gang can take it, and try them first."""
        return room_ready(self, region)

    def drop_room(self, gang: str) -> None:
        """The gang was placed (or ended): its room is no longer needed."""
        drop_room(self, gang)

    def commit_all(self, proposals: Sequence[MoveProposal]) -> list[Outgoing]:
        """Commit proposals whose targets a Statement already holds."""
        now = self.parts.clock.now()
        return [self._commit(p, now) for p in proposals]

    def _commit(self, p: MoveProposal, now_ms: int) -> Outgoing:
        run, target = p.run, p.target
        record = migration_record(p, now_ms, hold_s=self.config.hold_s)
        self.book.begin_move(run.job_id, move_entry(record))  # target held by the statement
        log.info(
            "migration job_id=%s reason=%s from=%s to=%s saved_s=%.0f",
            run.job_id, p.reason, run.gpu_model, target.gpu_model, p.cost.saved_s,
        )  # fmt: skip
        return outgoing(
            DECISIONS_MIGRATION,
            run.job_id,
            record,
            region=run.region,
            partition_of=self.parts.partition_of,
        )

    # -- lifecycle ----------------------------------------------------------------------------

    def expire(self) -> list[str]:
        """Drop the holds of moves not confirmed in time; the regions whose GPUs came back."""
        now = self.parts.clock.now()
        regions = []
        for job_id, move in list(self.moves.items()):
            if move.get("status") == "pending" and move["deadline_ms"] < now:
                self.book.expire_move(job_id)
                regions.append(move["decision"]["to_region"])
                gang = move["decision"].get("for_job_id")
                if gang:
                    self.drop_room(gang)
                log.warning("migration expired job_id=%s (no MIGRATED in time)", job_id)
        return regions

    def forget(self, job_id: str) -> None:
        """The job ended: drop any move of it (and its hold)."""
        self._runs.pop(job_id, None)
        self._tried.pop(job_id, None)
        self._live.pop(job_id, None)
        self.book.end_move(job_id)

    def on_migrated(self, event: Mapping[str, Any]) -> list[str]:
        """Apply a confirmed move: free the old GPUs, the held ones become the job's. Returns
        the regions whose capacity changed (empty for a duplicate or an unknown move)."""
        job_id = event["job_id"]
        move, entry = self.moves.get(job_id), self.parts.reservations.get(job_id)
        if move is None or entry is None or entry.get("released"):
            return []  # a duplicate (already applied) or a job that has ended
        decision = move["decision"]
        target = parse_assignments(decision["to_assignments"])
        ts = int(event.get("ts") or self.parts.clock.now())
        self.book.migrate(job_id, target, moved_entry(entry, decision, event, self.config, ts))
        self._live[job_id] = decision["to_region"]
        if decision.get("for_job_id"):
            hold_room(self, job_id)
        return sorted({decision["from_region"], decision["to_region"]})

    # -- recovery -----------------------------------------------------------------------------

    def rebuild(
        self,
        decisions: Mapping[str, Sequence[Mapping[str, Any]]],
        migrated: Mapping[str, Sequence[Mapping[str, Any]]],
        ended: Sequence[str] | set[str],
    ) -> None:
        """Reconcile moves with the logs after the reservations are restored.

        A move the job-event log confirms is applied to the job's reservation if the table
        missed it; a logged move with no MIGRATED whose hold has not run out is held again;
        holds of ended jobs are dropped.
        """
        self._live = {
            j: e["region"] for j, e in self.parts.reservations.items() if not e.get("released")
        }
        self._runs.clear()
        self._tried.clear()
        self._quiet.clear()
        self._green_quiet.clear()
        self._last_pass.clear()
        self._last_green.clear()
        reconcile(self, decisions, migrated, ended)


def _within(last_ms: int | None, now_ms: int, gap_s: float) -> bool:
    """`now_ms` falls less than `gap_s` after `last_ms` (a clock that went back: not within)."""
    return last_ms is not None and last_ms <= now_ms < last_ms + gap_s * 1000
