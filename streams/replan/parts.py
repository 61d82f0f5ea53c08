"""What the re-planner's pieces are given: the scheduler's parts, the book they change state
through, and the narrow views of the re-planner that defragmentation and migration
reconciliation act through.

They live below `streams.replan.replanner` so that its two helpers depend on these protocols,
not on the class that calls them (the way `scorer.replan` takes its parts). The book itself
(`streams.scheduler.book.Book`) stands a floor above; the re-planner sees it as `ReplanBook`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from infra.topics import RegionPartitioner
from scorer import Assignment, ClusterState, Placer
from scorer.fragmix import LearnedMix
from scorer.holds import Hold, HoldKind, parse_hold
from scorer.replan import MoveProposal, ReplanConfig, RunningJob, Statement
from streams.base.clock import Clock
from streams.base.outbox import Outgoing

if TYPE_CHECKING:
    from streams.scheduler.tenancy import Tenancy

__all__ = [
    "BookStatement",
    "DefragHost",
    "MoveBook",
    "ReplanBook",
    "Room",
    "SchedulerParts",
    "move_hold",
]


def move_hold(job_id: str) -> Hold:
    """The hold on a move's target GPUs, from the decision until MIGRATED."""
    return Hold(HoldKind.MOVE, job_id)


@dataclass(frozen=True)
class Room:
    """A node a defragmentation empties for a waiting gang: its free GPUs are held for the gang
    as the `movers` leave (in memory: a restart lets it go)."""

    gang: str
    region: str
    node: str
    movers: tuple[str, ...]

    @property
    def hold(self) -> Hold:
        return Hold(HoldKind.ROOM, self.gang)


class ReplanBook(Protocol):
    """The book as the re-planner reads it and changes it (`streams.scheduler.book.Book`)."""

    @property
    def state(self) -> ClusterState: ...
    @property
    def reservations(self) -> Mapping[str, Any]: ...
    @property
    def moves(self) -> Mapping[str, Any]: ...
    @property
    def rooms(self) -> Mapping[str, Room]: ...
    def hold(self, hold: Hold, assignments: Sequence[Assignment]) -> bool: ...
    def hold_if_free(self, hold: Hold, assignments: Sequence[Assignment]) -> bool: ...
    def restore_hold(self, hold: Hold, assignments: Sequence[Assignment]) -> None: ...
    def release_hold(self, hold: Hold) -> None: ...
    def begin_move(self, job_id: str, entry: Mapping[str, Any]) -> None: ...
    def expire_move(self, job_id: str) -> None: ...
    def end_move(self, job_id: str) -> None: ...
    def migrate(
        self, job_id: str, assignments: Sequence[Assignment], entry: Mapping[str, Any]
    ) -> None: ...
    def open_room(self, room: Room) -> None: ...
    def close_room(self, gang: str) -> Room | None: ...


class BookStatement(Statement):
    """The scorer's tentative move holds (`scorer.replan.Statement`), taken and given back
    through the book: a proposal's target is held by the book's hand like every other hold."""

    def __init__(self, book: ReplanBook) -> None:
        super().__init__(book.state)
        self._book = book

    def hold(self, key: str, assignments: Sequence[Assignment]) -> bool:
        if not self._book.hold_if_free(_hold_of(key), assignments):
            return False
        self.held.append(key)
        return True

    def discard(self) -> None:
        for key in self.held:
            self._book.release_hold(_hold_of(key))
        self.held.clear()


def _hold_of(key: str) -> Hold:
    hold = parse_hold(key)
    if hold is None:  # the scorer holds targets under hold keys only, never a job's own key
        raise ValueError(f"not a hold key: {key!r}")
    return hold


class SchedulerParts(Protocol):
    state: ClusterState
    placer: Placer
    clock: Clock
    partition_of: RegionPartitioner
    tenancy: Tenancy

    @property
    def book(self) -> ReplanBook: ...
    @property
    def reservations(self) -> Mapping[str, Any]: ...
    @property
    def queue(self) -> Mapping[str, Any]: ...


class DefragHost(Protocol):
    """The re-planner as defragmentation uses it: its budget, running jobs and commit."""

    @property
    def parts(self) -> SchedulerParts: ...
    @property
    def config(self) -> ReplanConfig: ...
    @property
    def mix(self) -> LearnedMix: ...
    def pending(self, job_id: str) -> bool: ...
    def region_budget(self, region: str, now_ms: int) -> int: ...
    def running(self, region: str) -> list[RunningJob]: ...
    def commit_all(self, proposals: Sequence[MoveProposal]) -> list[Outgoing]: ...


class MoveBook(Protocol):
    """The re-planner as the reconciliation after a restart uses it: the book, and a MIGRATED."""

    @property
    def parts(self) -> SchedulerParts: ...
    def on_migrated(self, event: Mapping[str, Any]) -> list[str]: ...
