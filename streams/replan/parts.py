"""What the re-planner's pieces are given: the scheduler's parts, and the narrow views of the
re-planner that defragmentation and migration reconciliation act through.

They live below `streams.replan.replanner` so that its two helpers depend on these protocols,
not on the class that calls them (the way `scorer.replan` takes its parts).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from infra.topics import RegionPartitioner
from scorer import ClusterState, Placer
from scorer.fragmix import LearnedMix
from scorer.replan import MoveProposal, ReplanConfig, RunningJob
from streams.base.clock import Clock
from streams.base.outbox import Outgoing

if TYPE_CHECKING:
    from streams.scheduler.tenancy import Tenancy

__all__ = ["DefragHost", "MoveBook", "SchedulerParts"]


class SchedulerParts(Protocol):
    state: ClusterState
    placer: Placer
    reservations: MutableMapping[str, Any]
    queue: MutableMapping[str, Any]
    clock: Clock
    partition_of: RegionPartitioner
    tenancy: Tenancy


class DefragHost(Protocol):
    """The re-planner as defragmentation uses it: its rooms, budget, running jobs and commit."""

    @property
    def parts(self) -> SchedulerParts: ...
    @property
    def config(self) -> ReplanConfig: ...
    @property
    def rooms(self) -> dict[str, dict[str, Any]]: ...
    @property
    def mix(self) -> LearnedMix: ...
    def pending(self, job_id: str) -> bool: ...
    def region_budget(self, region: str, now_ms: int) -> int: ...
    def running(self, region: str) -> list[RunningJob]: ...
    def commit_all(self, proposals: Sequence[MoveProposal]) -> list[Outgoing]: ...


class MoveBook(Protocol):
    """The re-planner as the reconciliation after a restart uses it: its moves, and a MIGRATED."""

    @property
    def parts(self) -> SchedulerParts: ...
    @property
    def moves(self) -> MutableMapping[str, Any]: ...
    def on_migrated(self, event: Mapping[str, Any]) -> list[str]: ...
