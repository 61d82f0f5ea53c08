"""What each step of the scheduler needs of it: narrow protocols, so no step imports `Scheduler`.

`streams.scheduler.core.Scheduler` satisfies every one of them; a step names the smallest
that covers what it reads and calls, and a test may hand it any object that does. Members are
read-only properties unless a step assigns them (`view_cache`). The helpers a scheduler holds
(its preemptions, cancel requests) appear here by what the steps call on them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from infra.topics import RegionPartitioner
    from scorer import ClusterState, JobSpec, PlacementResult, Placer
    from scorer.network import NetworkView
    from scorer.replan import ReplanConfig
    from streams.base.clock import Clock
    from streams.base.outbox import Outgoing
    from streams.replan.replanner import Replanner
    from streams.scheduler.book import Book
    from streams.scheduler.deferral import ForecastUse
    from streams.scheduler.horizon import DecidedJobs
    from streams.scheduler.tenancy import Tenancy

__all__ = [
    "Booked",
    "CancelTimers",
    "Cancelling",
    "Commits",
    "Ends",
    "Evictions",
    "Preempts",
    "Proposes",
    "Ranks",
    "Recovers",
    "Refuses",
    "Retries",
    "Routes",
    "Runs",
    "Ticks",
    "Waits",
]


class Evictions(Protocol):
    """The preemption mechanism (`streams.scheduler.preemption.Preemptions`), as steps use it."""

    @property
    def targeted(self) -> dict[str, str]: ...  # victim -> its preemptor
    def try_preempt(self, routed: Mapping[str, Any], region: str) -> list[Outgoing]: ...
    def on_gone(self, victim: str) -> list[Outgoing]: ...
    def restore(self) -> None: ...
    def expire(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]: ...
    def sweep(self, region: str) -> list[Outgoing]: ...


class CancelTimers(Protocol):
    """Cancel requests in their grace period (`streams.scheduler.cancel.Cancels`)."""

    def restore(self) -> None: ...
    def expire(self, now_ms: int, regions: Collection[str] | None = None) -> list[Outgoing]: ...


class Booked(Protocol):
    """What every step reads: the book of state and the fleet it decides on."""

    @property
    def book(self) -> Book: ...
    @property
    def state(self) -> ClusterState: ...
    @property
    def placer(self) -> Placer: ...
    @property
    def tenancy(self) -> Tenancy: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def partition_of(self) -> RegionPartitioner: ...
    @property
    def queue(self) -> MutableMapping[str, Any]: ...
    @property
    def reservations(self) -> MutableMapping[str, Any]: ...
    @property
    def epochs(self) -> Mapping[str, int]: ...
    @property
    def final(self) -> DecidedJobs: ...
    @property
    def nodes(self) -> MutableMapping[str, Any]: ...
    def spec_of(self, routed: Mapping[str, Any]) -> JobSpec: ...
    def epoch_of(self, routed: Mapping[str, Any]) -> int: ...
    def restrict(self, spec: JobSpec, models: Sequence[str]) -> JobSpec | None: ...


class Proposes(Booked, Protocol):
    """The placer's proposal under quota (`streams.scheduler.proposals`)."""

    @property
    def cross_region(self) -> bool: ...


class Waits(Booked, Protocol):
    """Steps that put a job in its region's queue with a QUEUED decision."""

    def enqueue(self, routed: Mapping[str, Any], code: str, reason: str) -> Outgoing: ...
    def queued_decision(
        self, entry: Mapping[str, Any], code: str, reason: str, *, tag: str = "queued"
    ) -> Outgoing: ...


class Commits(Waits, Protocol):
    """Committing and ending placements (`streams.scheduler.placements`)."""

    @property
    def network(self) -> NetworkView | None: ...
    @property
    def replan(self) -> ReplanConfig: ...
    @property
    def replanner(self) -> Replanner | None: ...
    @property
    def preemption(self) -> Evictions: ...
    @property
    def queue_why(self) -> dict[str, str]: ...


class Refuses(Commits, Protocol):
    """What becomes of a refused attempt (`streams.scheduler.outcomes`)."""

    @property
    def forecasts(self) -> ForecastUse | None: ...
    @property
    def try_once(self) -> bool: ...


class Ends(Commits, Protocol):
    """The executor's reports end placements (`streams.scheduler.lifecycle`)."""

    def after_release(self, regions: Sequence[str]) -> list[Outgoing]: ...


class Cancelling(Booked, Protocol):
    """Cancel requests (`streams.scheduler.cancel`)."""

    @property
    def preemption(self) -> Evictions: ...


class Retries(Proposes, Protocol):
    """A region's queue retried in fair order, with backfill (`streams.scheduler.queueing`)."""

    @property
    def queue_why(self) -> dict[str, str]: ...
    def propose(
        self, routed: Mapping[str, Any], region: str, *, explain: bool = False
    ) -> tuple[PlacementResult, str, str]: ...
    def commit(
        self, routed: Mapping[str, Any], result: PlacementResult, started_ns: int, *, note: str = ""
    ) -> Outgoing | None: ...


class Preempts(Waits, Protocol):
    """Preemption for a waiting job (`streams.scheduler.preemption`)."""

    def force_evict(self, job_id: str, epoch: int) -> list[Outgoing]: ...
    def place_waiting(self, routed: Mapping[str, Any], *, note: str = "") -> list[Outgoing]: ...


class Ranks(Booked, Protocol):
    """Ranking regions for a job, as the router sees them (routing, the /plan/ dry run)."""

    @property
    def porting_penalties(self) -> dict[str, float]: ...
    def region_views(self) -> dict[str, Any]: ...


class Routes(Refuses, Ranks, Protocol):
    """The global choice of region (`streams.scheduler.routing`)."""

    view_cache: tuple[float, dict[str, Any]]  # (when, views), refreshed by routing

    @property
    def view_ttl_s(self) -> float: ...
    @property
    def remote_views(self) -> Any: ...
    @property
    def routed_attempts(self) -> dict[str, int]: ...
    def know_spec(self, job: Mapping[str, Any], spec: JobSpec) -> None: ...


class Recovers(Commits, Protocol):
    """Rebuilding the book after a restart or rebalance (`streams.scheduler.recovery`)."""

    view_cache: tuple[float, dict[str, Any]]

    @property
    def cancels(self) -> CancelTimers: ...
    @property
    def last_seen(self) -> dict[str, float]: ...
    def restore_node(self, record: Mapping[str, Any]) -> None: ...


class Ticks(Booked, Protocol):
    """The passes after a release and on the timer (`streams.scheduler.ticks`)."""

    @property
    def cancels(self) -> CancelTimers: ...
    @property
    def preemption(self) -> Evictions: ...
    @property
    def replanner(self) -> Replanner | None: ...
    def place_waiting(self, routed: Mapping[str, Any], *, note: str = "") -> list[Outgoing]: ...
    def retry_queue(self, region: str, *, max_refusals: int = 8) -> list[Outgoing]: ...


class Runs(Routes, Retries, Ticks, Protocol):
    """What the actions of a pipeline need together (`streams.scheduler.actions.registry`)."""
