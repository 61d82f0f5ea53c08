"""The book of a scheduler's state, and the only code that writes it.

What the book owns: the GPU arrays' reservations and holds (`ClusterState`), the reservation
table (job -> its placement, or a released marker), the region queues (job -> RoutedJob
waiting), the jobs decided at their current epoch (`DecidedJobs`), every job's epoch, the
released log the horizon reads, and the re-planner's moves in flight (the `moves` table) and
defragmentation rooms. Everything else reads these and changes them through the methods
below: a placement through a `Statement` (reserve and hold tentatively, then commit or discard
as one, as Volcano's Statement does), an end through `release`, which is safe to apply twice,
a migration through `begin_move` / `migrate` / `expire_move` / `end_move`. Recovery
(`streams.scheduler.recovery`, `streams.replan.migrations.reconcile`) rebuilds the book through
the same methods. `tests/streams/test_book_writers.py` fails on a write from anywhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from scorer import Assignment, ClusterState, ReservationError
from scorer.holds import Hold, HoldKind
from streams.replan.parts import Room
from streams.scheduler.horizon import DecidedJobs, ReleasedLog

__all__ = ["Book", "Booking", "Statement"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Booking:
    """A placement to write at commit: its reservation-table entry at its epoch."""

    job_id: str
    entry: Mapping[str, Any]
    epoch: int


class Book:
    """The single owner of reservations, queue, decided jobs, epochs, released log and holds."""

    def __init__(
        self,
        state: ClusterState,
        reservations: MutableMapping[str, Any],
        queue: MutableMapping[str, Any],
        horizon_s: float,
        moves: MutableMapping[str, Any] | None = None,
    ) -> None:
        self.state = state
        self.reservations = reservations
        self.queue = queue
        self.final = DecidedJobs(horizon_s)  # decided at their current epoch
        self.epochs: dict[str, int] = {}  # job -> current epoch (absent: 0)
        self.released = ReleasedLog(horizon_s)
        # job -> its migration between decision and MIGRATED (`streams.replan.migrations`)
        self.moves: MutableMapping[str, Any] = moves if moves is not None else {}
        # gang -> the node a defragmentation empties for it (in memory: a restart lets it go)
        self.rooms: dict[str, Room] = {}

    # ---- reads -----------------------------------------------------------------------------
    def epoch(self, job_id: str) -> int:
        return self.epochs.get(job_id, 0)

    def announced(self, job_id: str, epoch: int) -> bool:
        """Whether (job, epoch) was decided: a later epoch exists, or this one is final."""
        current = self.epochs.get(job_id)
        if current is None:
            return False
        return current > epoch or (current == epoch and job_id in self.final)

    # ---- placements ------------------------------------------------------------------------
    def statement(self) -> Statement:
        return Statement(self)

    def release(self, job_id: str, marker: Mapping[str, Any] | None = None) -> bool:
        """A placement is over: its GPUs are freed and `marker` replaces its entry (logged for
        the horizon). Safe twice: an entry released already (or none) changes nothing but
        freeing any GPUs still held under the job's key; False then."""
        statement = self.statement()
        evicted = statement.evict(job_id, marker)
        statement.commit()
        return evicted

    def restore_placement(self, job_id: str, assignments: Sequence[Assignment]) -> None:
        """Hold a recovered placement's GPUs again (a refusal is logged, not raised)."""
        try:
            self.state.reserve(job_id, assignments)
        except (ReservationError, KeyError) as exc:
            log.warning("cannot restore reservation job_id=%s: %s", job_id, exc)

    def write_entry(self, job_id: str, entry: Mapping[str, Any]) -> None:
        """A placement's entry as recovery or a running job's change (cancel) has it."""
        self.reservations[job_id] = entry

    def drop_entry(self, job_id: str) -> None:
        self.reservations.pop(job_id, None)

    def note_released(self, job_id: str, region: str, marker: Mapping[str, Any] | None) -> None:
        """`job_id` is over in `region` (a marker for the horizon; None: the entry stands)."""
        if marker is not None:
            self.reservations[job_id] = marker
        self.released.add(region, [job_id])

    # ---- holds -----------------------------------------------------------------------------
    def hold(self, hold: Hold, assignments: Sequence[Assignment]) -> bool:
        """Keep GPUs for `hold` (replacing what it kept); False when they are not free."""
        self.state.release(hold.key)
        if not assignments:
            return True
        try:
            self.state.reserve(hold.key, assignments)
        except ReservationError as exc:
            log.error("hold refused hold=%s: %s", hold.key, exc)
            return False
        return True

    def hold_if_free(self, hold: Hold, assignments: Sequence[Assignment]) -> bool:
        """Keep GPUs for `hold` if they are free (a proposal's target), else take nothing and
        return False: not an error, another proposal of the same pass took them. The same
        GPUs held again under the same hold change nothing."""
        try:
            self.state.reserve(hold.key, assignments)
        except ReservationError:
            return False
        return True

    def restore_hold(self, hold: Hold, assignments: Sequence[Assignment]) -> None:
        """Hold a recovered hold's GPUs again (a refusal is logged, not raised)."""
        try:
            self.state.reserve(hold.key, assignments)
        except (ReservationError, KeyError) as exc:
            log.warning("cannot restore hold hold=%s: %s", hold.key, exc)

    def release_hold(self, hold: Hold) -> None:
        self.state.release(hold.key)  # idempotent

    def clear_arrays(self) -> None:
        """Every reservation and hold out of the arrays (a rebuild holds them again)."""
        for key in list(self.state.jobs):
            self.state.release(key)

    # ---- moves and rooms (`streams.replan`) -------------------------------------------------
    def begin_move(self, job_id: str, entry: Mapping[str, Any]) -> None:
        """A migration of `job_id` is decided (or recovered from the log) as its moves-table
        `entry`; its target GPUs are held under `Hold(MOVE, job_id)` (`hold_if_free`)."""
        self.moves[job_id] = entry

    def expire_move(self, job_id: str) -> None:
        """No MIGRATED in time: the target GPUs go back and the job stays; the entry stays,
        expired (it counts against its region's moves until the window passes)."""
        self.release_hold(Hold(HoldKind.MOVE, job_id))
        self.moves[job_id] = {**self.moves[job_id], "status": "expired"}

    def end_move(self, job_id: str) -> None:
        """The job ended (or its move is moot): the entry and its hold go. Safe twice."""
        if self.moves.pop(job_id, None) is not None:
            self.release_hold(Hold(HoldKind.MOVE, job_id))

    def migrate(
        self, job_id: str, assignments: Sequence[Assignment], entry: Mapping[str, Any]
    ) -> None:
        """MIGRATED: the job's old GPUs and its move's hold are freed, it holds `assignments`
        (its target) and `entry` is its reservation; the move leaves the table. A target
        taken meanwhile (a late MIGRATED after the hold expired and was reused) is logged."""
        self.release_hold(Hold(HoldKind.MOVE, job_id))
        self.state.release(job_id)
        try:
            self.state.reserve(job_id, assignments)
        except ReservationError as exc:
            log.error("migration target taken job_id=%s: %s", job_id, exc)
        del self.moves[job_id]
        self.reservations[job_id] = entry

    def open_room(self, room: Room) -> None:
        """A defragmentation empties `room.node` for `room.gang`; its free GPUs are held for
        the gang (`hold(room.hold, ...)`) as the movers leave."""
        self.rooms[room.gang] = room

    def close_room(self, gang: str) -> Room | None:
        """The gang's room is over (its node is free, or the gang was placed or ended): the
        GPUs held for it go back. Safe twice."""
        room = self.rooms.pop(gang, None)
        if room is not None:
            self.release_hold(room.hold)
        return room

    # ---- queue and decisions -----------------------------------------------------------------
    def wait(self, job_id: str, entry: Mapping[str, Any]) -> None:
        """`job_id` waits in its region's queue as `entry` (or its entry changes)."""
        self.queue[job_id] = entry

    def unwait(self, job_id: str) -> Any:
        """Out of the queue without a placement; its entry (None: it was not waiting)."""
        return self.queue.pop(job_id, None)

    def decide(self, job_id: str, *, epoch: int | None = None, age_s: float = 0.0) -> None:
        """`job_id` has its final decision (at `epoch` if given, as the log says `age_s` ago;
        an epoch never goes back)."""
        self.final.add(job_id, age_s=age_s)
        if epoch is not None:
            self.epochs[job_id] = max(self.epochs.get(job_id, 0), epoch)

    def reopen(self, job_id: str, epoch: int) -> None:
        """`job_id` waits for a decision again, at `epoch` (a requeued placement)."""
        self.final.discard(job_id)
        self.epochs[job_id] = epoch

    # ---- memory bound (`scheduler.horizon`) ----------------------------------------------------
    def forget_past_horizon(self) -> None:
        """Decided jobs past the horizon (but those holding GPUs) and their epochs."""
        held = self.state.jobs
        self.forget_epochs(self.final.expire(keep=lambda job_id: job_id in held))

    def forget_released(self, region: str) -> None:
        """`region`'s released markers past the horizon, on the region's own event (so the
        deletes land in its changelog partition), and the epochs nothing remembers now."""
        self.forget_epochs(self.released.forget(region, self.reservations))

    def forget_epochs(self, job_ids: Iterable[str]) -> None:
        """Drop the epochs of `job_ids` no table remembers any more; a full sweep only once stale
        entries (a job that left the queue without a decision) outnumber the rest."""
        keep = (self.final, self.queue, self.reservations)
        for job_id in job_ids:
            if not any(job_id in t for t in keep):
                self.epochs.pop(job_id, None)
        if len(self.epochs) > 2 * sum(map(len, keep)) + 10_000:
            self.epochs = {j: e for j, e in self.epochs.items() if any(j in t for t in keep)}

    def forget_unowned(self, owns: Callable[[str], bool]) -> None:
        """Reservations and queued jobs of regions no longer owned leave memory only (the
        owner recovers them from the changelog: a RegionTable forgets without tombstones)."""
        for table in (self.reservations, self.queue):
            forget_regions(table, owns)


def forget_regions(table: MutableMapping[str, Any], owns: Callable[[str], bool]) -> None:
    gone = [k for k, v in table.items() if not owns(str(v.get("region") or ""))]
    forget = getattr(table, "forget_local", None)
    if forget is not None:
        forget(gone)
    else:
        for key in gone:
            table.pop(key, None)


class Statement:
    """Tentative changes to the book, committed or discarded as one.

    `reserve` and `hold` take GPUs in the arrays at once (so a later step of the same decision
    sees them taken); `evict` and `place` are written at `commit`. `discard` gives back every
    GPU taken and writes nothing. A statement is used once.
    """

    def __init__(self, book: Book) -> None:
        self._book = book
        self._taken: list[str] = []  # array keys reserved or held here, undone by discard
        self._evicted: list[tuple[str, Mapping[str, Any] | None]] = []
        self._placed: list[Booking] = []
        self._done = False

    def reserve(self, job_id: str, assignments: Sequence[Assignment]) -> bool:
        """Take a placement's GPUs; False (nothing taken) when they are no longer free. GPUs
        the job held already (the same placement again) are not the statement's to give back."""
        held_before = job_id in self._book.state.jobs
        try:
            self._book.state.reserve(job_id, assignments)
        except ReservationError as exc:  # the scorer proposed something no longer free
            log.error("reservation refused job_id=%s: %s", job_id, exc)
            return False
        if not held_before:
            self._taken.append(job_id)
        return True

    def hold(self, hold: Hold, assignments: Sequence[Assignment]) -> bool:
        if not self._book.hold(hold, assignments):
            return False
        self._taken.append(hold.key)
        return True

    def evict(self, job_id: str, marker: Mapping[str, Any] | None = None) -> bool:
        """End `job_id`'s placement at commit; False when it holds none (already released)."""
        entry = self._book.reservations.get(job_id)
        if entry is None or entry.get("released"):
            self._book.state.release(job_id)  # whatever is left under its key
            return False
        self._evicted.append((job_id, marker))
        return True

    def place(self, job_id: str, entry: Mapping[str, Any], epoch: int) -> None:
        """At commit: `job_id` holds its reserved GPUs as `entry`, decided at `epoch`."""
        self._placed.append(Booking(job_id, entry, epoch))

    def commit(self) -> None:
        self._close()
        book = self._book
        for job_id, marker in self._evicted:
            region = str(book.reservations[job_id]["region"])
            book.state.release(job_id)
            book.note_released(job_id, region, marker)
        for booking in self._placed:
            book.reservations[booking.job_id] = booking.entry
            book.queue.pop(booking.job_id, None)
            book.final.add(booking.job_id)
            book.epochs[booking.job_id] = booking.epoch

    def discard(self) -> None:
        self._close()
        for key in reversed(self._taken):
            self._book.state.release(key)

    def _close(self) -> None:
        if self._done:
            raise RuntimeError("a statement is committed or discarded once")
        self._done = True
