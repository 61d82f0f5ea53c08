"""NodeTelemetry read in batches beside Faust's consumer: the worker's telemetry lane.

Telemetry is most of what a worker reads (10,000 nodes at 1 Hz is 10,000 events a second),
and every event through a Faust agent pays Faust's per-message machinery, a fastavro decode
into a dict per GPU and a validation walk: ~300 µs of the worker's one core. The lane reads
with its own librdkafka consumer on a thread, decodes each poll column by column
(`infra.store.telemetry`, as the history sink does) and hands the event loop one batch at a
time, which `streams.worker.telemetry_agent` applies at once.

Partitions: the ones this worker owns (`assign`, from Faust's region assignment), read from
the offsets committed under the group `<app_id>-telemetry`; a partition with none starts where
the worker's Faust group left it (a worker that ran with the Faust agent before), else at the
beginning. Offsets are committed once their batch is applied (`done`), so a restart or a
partition that moves to another worker re-reads at most what was not applied; applying a
report twice changes nothing (a report older than the last one applied is ignored).

At most `in_flight` batches wait for the loop: a worker behind on telemetry stops fetching
instead of buffering without bound.

A log that ends before an offset the lane has applied was replaced (the embedded broker's
`memory://` storage, restarted). The lane is an assigned consumer, not a group member, so
nothing would move it: it would wait at its old offset for ever (Tansu answers an empty fetch,
not OFFSET_OUT_OF_RANGE), and every node would go stale. It reads such a partition again
from its start instead.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from infra.config import Config
from infra.kafka import consumer, held_fetch
from infra.store.telemetry import TelemetryBatch
from infra.topics import NODE_TELEMETRY
from schemas import Codec
from streams.history.telemetry import TelemetryLane

__all__ = ["LaneMessage", "RawBatch", "TelemetryReader"]

log = logging.getLogger(__name__)

_COMMIT_EVERY_S = 1.0
# Each fetch is held up to the kafka fetch wait (50 ms) for this much, so at 10,000 nodes the
# lane fetches a few times per wait instead of once per produced batch; when telemetry is
# sparse a report waits at most the fetch wait longer (`infra.kafka.held_fetch`)
_FETCH_MIN_BYTES = 64 << 10


@dataclass(frozen=True)
class LaneMessage:
    """One message as the worker's dead-letter and decode paths read it (Faust's names)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class RawBatch:
    """A poll: its messages in order, and the columns of those the lane could decode."""

    raw: list[Any]  # confluent_kafka Messages
    partitions: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.int64]
    taken: npt.NDArray[np.bool_]  # latest-schema NodeTelemetry by its header
    columns: TelemetryBatch | None  # one row per taken message, in order
    rewinds: int = 0  # the reader's rewinds when it was fetched

    def __len__(self) -> int:
        return len(self.raw)

    def message(self, i: int) -> LaneMessage:
        m = self.raw[i]
        return LaneMessage(m.topic(), m.partition(), m.offset(), m.key(), m.value())

    def next_offsets(self) -> dict[int, int]:
        """Per partition, the offset after the last message of the poll."""
        return {
            int(p): int(self.offsets[self.partitions == p].max()) + 1
            for p in np.unique(self.partitions).tolist()
        }

    @classmethod
    def of(cls, messages: Sequence[Any], lane: TelemetryLane | None) -> RawBatch:
        """The poll's messages; `lane` None: none decoded by columns (all go one by one)."""
        values = [m.value() for m in messages]
        takes = lane.takes if lane is not None else (lambda _: False)
        taken = np.fromiter((takes(v) for v in values), bool, len(values))
        chosen = [v for v, t in zip(values, taken.tolist(), strict=True) if t]
        return cls(
            raw=list(messages),
            partitions=np.fromiter((m.partition() for m in messages), np.int64, len(values)),
            offsets=np.fromiter((m.offset() for m in messages), np.int64, len(values)),
            taken=taken,
            columns=lane.decode(chosen) if chosen and lane is not None else None,
        )


class TelemetryReader:
    """A consumer thread for the owned partitions of NodeTelemetry, one batch at a time."""

    def __init__(
        self, config: Config, codec: Codec, *, max_batch: int = 10_000, in_flight: int = 2
    ) -> None:
        self.kafka = config.kafka
        self._settings = {
            **held_fetch(config.broker, config.kafka.fetch_wait_ms, _FETCH_MIN_BYTES),
            "enable.partition.eof": False,
        }
        self.group = f"{config.worker.app_id}-telemetry"
        self.faust_group = config.worker.app_id
        self.lane = TelemetryLane(codec)
        self.max_batch = max_batch
        self.batches: asyncio.Queue[RawBatch] | None = None
        self.error: str | None = None  # the last consumer error, until a poll succeeds
        self.assigned: frozenset[int] = frozenset()  # what the consumer reads now
        self._want: frozenset[int] | None = None
        self._applied: dict[int, int] = {}  # partition -> next offset not yet applied
        self._committed: dict[int, int] = {}  # partition -> what the group holds for it
        self._high: dict[int, int] = {}  # partition -> high watermark last seen
        self.rewinds = 0  # replaced logs read again from their start
        self._rewound: dict[int, int] = {}  # partition -> `rewinds` after its last rewind
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(in_flight)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the loop's side ----------------------------------------------------------------------

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.batches = asyncio.Queue()
        self._thread = threading.Thread(target=self._run, name="telemetry-reader", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def assign(self, partitions: frozenset[int]) -> None:
        """Read these partitions from now on (the thread switches before its next poll)."""
        with self._lock:
            self._want = frozenset(partitions)

    def done(self, batch: RawBatch) -> None:
        """The batch is applied: its offsets may be committed; the thread may fetch again."""
        with self._lock:
            applied = self._applied
            for partition, offset in batch.next_offsets().items():
                # a batch fetched from a log replaced since says nothing of the new one
                stale = batch.rewinds < self._rewound.get(partition, 0)
                if partition in self.assigned and not stale:
                    applied[partition] = max(applied.get(partition, 0), offset)
        self._slots.release()

    def lag(self) -> dict[int, int]:
        """Messages on the broker not yet applied, per assigned partition."""
        with self._lock:
            return {
                p: max(0, self._high.get(p, 0) - self._applied.get(p, 0)) for p in self.assigned
            }

    def positions(self) -> dict[str, Any]:
        """For `/consumer/`: the lane's group, per partition the next offset to apply (what a
        commit covers) and the messages behind it, and how often a replaced log was re-read."""
        lag = self.lag()
        with self._lock:
            rows = {
                str(p): {"applied": self._applied.get(p, 0), "lag": lag.get(p, 0)}
                for p in sorted(self.assigned)
            }
        return {"group": self.group, "partitions": rows, "error": self.error,
                "rewinds": self.rewinds}  # fmt: skip

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        c = None
        last_commit = time.monotonic()
        while not self._stop.is_set():
            try:
                if c is None:
                    c = consumer(self.kafka, self.group, **self._settings)
                self._reassign(c)
                if time.monotonic() - last_commit >= _COMMIT_EVERY_S:
                    self._watermarks(c)  # first: a replaced log must not get old offsets
                    self._commit(c)
                    last_commit = time.monotonic()
                if not self.assigned or not self._slots.acquire(timeout=0.1):
                    self._stop.wait(0.05 if not self.assigned else 0)
                    continue
                self._poll(c)
            except KafkaException as exc:
                self.error = str(exc)
                log.warning("telemetry reader: %s (retrying)", exc)
                self._stop.wait(1.0)
            except Exception as exc:  # a bug here must not end telemetry quietly: retry, say so
                self.error = f"{type(exc).__name__}: {exc}"
                log.exception("telemetry reader failed (retrying)")
                self._stop.wait(1.0)
        if c is not None:
            try:
                self._commit(c)
            finally:
                c.close()

    def _poll(self, c: Any) -> None:
        """One poll into one batch for the loop (it holds a slot, given back by `done`)."""
        try:
            messages = c.consume(self.max_batch, timeout=0.1)
        except BaseException:
            self._slots.release()
            raise
        good = []
        for m in messages:
            if m.error() is None:
                good.append(m)
            else:
                log.warning("telemetry reader: %s", m.error())
        if not good:
            self._slots.release()
            return
        self.error = None
        try:
            batch = RawBatch.of(good, self.lane)
        except Exception:  # a bug of the column reader must not stop telemetry: generic path
            log.exception(
                "telemetry reader: column decode failed; %d messages go one by one", len(good)
            )
            batch = RawBatch.of(good, None)
        batch.rewinds = self.rewinds
        assert self._loop is not None and self.batches is not None
        self._loop.call_soon_threadsafe(self.batches.put_nowait, batch)

    def _reassign(self, c: Any) -> None:
        with self._lock:
            want = self._want
        if want is None or want == self.assigned:
            return
        self._commit(c)  # what was applied of partitions about to go
        tps = [TopicPartition(NODE_TELEMETRY, p) for p in sorted(want)]
        starts = {tp.partition: tp.offset for tp in c.committed(tps, timeout=10)} if tps else {}
        missing = [tp for tp in tps if starts.get(tp.partition, -1) < 0]
        if missing:
            starts.update(self._faust_offsets(missing))
        for tp in tps:
            start = starts.get(tp.partition, -1)
            tp.offset = start if start >= 0 else OFFSET_BEGINNING
        c.assign(tps)
        with self._lock:
            self.assigned = want
            self._applied = {p: max(0, starts.get(p, 0)) for p in want} | {
                p: o for p, o in self._applied.items() if p in want
            }
            self._committed = dict(self._applied)  # kept ones were committed just above
        log.info("telemetry reader partitions=%s", sorted(want))

    def _faust_offsets(self, tps: list[TopicPartition]) -> dict[int, int]:
        """Where the worker's Faust group left these partitions (read, not joined)."""
        probe = consumer(self.kafka, self.faust_group)
        try:
            found = probe.committed([TopicPartition(tp.topic, tp.partition) for tp in tps], 10)
            return {tp.partition: tp.offset for tp in found if tp.offset >= 0}
        except KafkaException as exc:
            log.info("no Faust offsets for telemetry: %s", exc)
            return {}
        finally:
            probe.close()

    def _commit(self, c: Any) -> None:
        """Commit what was applied since the last commit (an idle lane sends nothing)."""
        with self._lock:
            due = {p: o for p, o in self._applied.items() if o > self._committed.get(p, 0)}
        if not due:
            return
        try:
            c.commit(offsets=[TopicPartition(NODE_TELEMETRY, p, o) for p, o in due.items()],
                     asynchronous=False)  # fmt: skip
        except KafkaException as exc:
            log.warning("telemetry reader commit failed: %s", exc)
            return
        self._committed.update(due)

    def _watermarks(self, c: Any) -> None:
        high = {}
        for p in self.assigned:
            _, end = c.get_watermark_offsets(TopicPartition(NODE_TELEMETRY, p), cached=True)
            if end is not None and end >= 0:
                high[p] = int(end)
        with self._lock:
            self._high.update(high)
            behind = {p: e for p, e in high.items() if e < self._applied.get(p, 0)}
        if behind:
            self._rewind_replaced(c, behind)

    def _rewind_replaced(self, c: Any, behind: dict[int, int]) -> None:
        """Read again from their start the partitions whose log now ends before what was
        applied (asked again of the broker first: a cached end can be behind)."""
        replaced = {}
        for p in behind:
            _, end = c.get_watermark_offsets(TopicPartition(NODE_TELEMETRY, p), timeout=5)
            with self._lock:
                applied = self._applied.get(p, 0)
            if end is not None and 0 <= end < applied:
                replaced[p] = (int(end), applied)
        if not replaced:
            return
        for p, (end, applied) in sorted(replaced.items()):
            log.error(
                "telemetry lane: %s/%d ends at offset %d but this worker applied up to %d there: "
                "the broker's log was replaced (a memory:// broker restarted?); reading it again "
                "from its start",
                NODE_TELEMETRY,
                p,
                end,
                applied,
            )
        with self._lock:
            self.rewinds += 1
            for p in replaced:
                self._applied[p] = self._committed[p] = self._high[p] = 0
                self._rewound[p] = self.rewinds
        starts = [TopicPartition(NODE_TELEMETRY, p, OFFSET_BEGINNING) for p in sorted(replaced)]
        try:
            for tp in starts:
                c.seek(tp)
        except KafkaException:  # not fetching yet: assign again, the others where they are
            kept = [tp for tp in c.position(c.assignment()) if tp.partition not in replaced]
            c.assign(kept + starts)
