"""The history sink's inserts, one at a time on a thread of their own (double buffering).

chDB releases the GIL while it inserts, so the sink decodes the next poll while the previous
batch is written. `InsertLane` holds at most one batch in flight: `submit` refuses a second
one, and the sink collects each outcome (`wait`) before it submits the next batch, so batches
are written, and their offsets committed, strictly in the order they were read, and only
after their insert succeeded. Memory stays bounded: one batch in flight and one being built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infra.store import StoreError
from infra.store.batching import Batch

__all__ = ["InsertLane", "Outcome"]

Block = tuple[str, Any]  # (table, Arrow data)


@dataclass
class Outcome:
    """What became of a submitted batch: every table written, or `error` after `done`."""

    batch: Batch
    started: float  # perf_counter when the batch was drained
    rows: int = 0
    done: list[str] = field(default_factory=list)  # tables written
    error: StoreError | None = None


class InsertLane:
    """Writes one batch's blocks at a time with `insert(table, data) -> rows`."""

    def __init__(self, insert: Callable[[str, Any], int]) -> None:
        self._insert = insert
        self._pool: ThreadPoolExecutor | None = None  # started with the first insert
        self._inflight: tuple[Outcome, Future[Outcome]] | None = None

    @property
    def busy(self) -> bool:
        return self._inflight is not None

    def ready(self) -> bool:
        """An outcome waits to be collected (`wait` will not block)."""
        return self._inflight is not None and self._inflight[1].done()

    def pending_events(self) -> int:
        return len(self._inflight[0].batch.event_ids) if self._inflight else 0

    def submit(self, batch: Batch, blocks: Sequence[Block], started: float) -> None:
        """Start writing `blocks` (the batch's tables, in order); one batch at a time."""
        if self._inflight is not None:
            raise RuntimeError("an insert is in flight: collect it with wait() first")
        outcome = Outcome(batch, started)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="history-insert")
        self._inflight = (outcome, self._pool.submit(self._write, outcome, list(blocks)))

    def _write(self, outcome: Outcome, blocks: list[Block]) -> Outcome:
        try:
            for table, data in blocks:
                outcome.rows += self._insert(table, data)
                outcome.done.append(table)
        except StoreError as exc:  # anything else is a bug: it reaches the sink's thread
            outcome.error = exc
        return outcome

    def wait(self) -> Outcome | None:
        """The outcome of the batch in flight (None when there is none), once it is known."""
        if self._inflight is None:
            return None
        outcome, future = self._inflight
        self._inflight = None
        future.result()  # re-raises what the insert raised besides a StoreError
        return outcome

    def close(self) -> None:
        """Let an insert in flight finish (its outcome is dropped: not committed), then stop."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._pool, self._inflight = None, None
