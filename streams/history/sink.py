"""History sink: every gpuflow topic -> ClickHouse, batched, committed after the insert.

A plain confluent-kafka consumer (exact commit control, ~600k msg/s on the embedded broker)
runs in a background thread inside the Faust worker process, which owns the chdb directory.
Offsets are committed only after every table of a batch is inserted, so delivery into the
store is at-least-once; raw tables deduplicate on event_id (ReplacingMergeTree + FINAL).
Messages that cannot be decoded or converted go to `gpuflow.deadletter` and are committed.
Each batch is inserted on a thread of its own while the next poll is decoded (one insert in
flight, `streams.history.writer`); its offsets are committed after it is written, in order.

When ClickHouse is unavailable (cannot be opened) or refuses inserts, the sink backs off
(0.2 s doubling to 5 s, `streams.history.health`), stops reading (its partitions paused, still
polling so the group keeps it) and commits nothing past what is stored; it retries the same
batch until it is written and then catches up from where it stopped. `status()` says which
state it is in; the worker shows it on `/health/` and `/metrics/`. Scheduling never waits on
any of this: the sink only reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from confluent_kafka import KafkaError, Message, TopicPartition

from infra.config import Config
from infra.deadletter import message_dead_letter
from infra.kafka import consumer as make_consumer
from infra.kafka import held_fetch
from infra.kafka import producer as make_producer
from infra.store import Store, StoreError, open_store
from infra.store.batching import Batch, Batcher
from infra.store.rows import ConversionError, RowContext, to_rows
from infra.topics import DEADLETTER, NODE_INVENTORY, TOPICS
from schemas import DecodeError, make_codec
from streams.history.health import StoreHealth
from streams.history.telemetry import TelemetryLane, offsets_of, table_block, telemetry_chunk
from streams.history.writer import InsertLane, Outcome

__all__ = ["HistorySink", "SinkStats"]

log = logging.getLogger(__name__)

# telemetry of a poll is decoded together (streams/history/telemetry.py): big polls amortise
# its per-field numpy steps
_POLL_BATCH = 10_000
_TELEMETRY_TABLE = "node_telemetry"
# The sink is not latency-bound (it flushes every second), so a fetch waits up to 1 s for
# 1 MiB: a few large fetches a second, not one per produced batch (at 10,000 nodes' telemetry
# the log broker answered each fetch as soon as any batch came, and the sink spent 43 µs of CPU
# per event). On Tansu the minimum is 1 (`infra.kafka.held_fetch`).
_FETCH_WAIT_MS = 1000
_FETCH_MIN_BYTES = 1 << 20


@dataclass
class SinkStats:
    consumed: int = 0
    rows_written: int = 0
    events_written: int = 0
    duplicates: int = 0
    dead_lettered: int = 0
    flushes: int = 0
    insert_failures: int = 0


class HistorySink:
    """Consumes every topic into the store. `start()` / `flush_now()` / `stop()`."""

    def __init__(
        self,
        config: Config,
        *,
        store: Store | None = None,
        group_id: str | None = None,
        topics: Sequence[str] | None = None,
    ) -> None:
        self.config = config
        self.group_id = group_id or f"{config.worker.app_id}-history"
        self.topics = list(topics or [t.name for t in TOPICS if t.history])
        self._store = store
        self._owns_store = store is None
        self._codec = make_codec(config.kafka.schema_registry_url or None)
        self._lane = TelemetryLane(self._codec)
        self._batcher = Batcher(config.store.batch_rows, config.store.flush_s)
        self._inserts = InsertLane(lambda table, data: self.store.insert_arrow(table, data))
        self._ctx = RowContext()
        self.stats = SinkStats()
        self._stop = threading.Event()
        self._flush_requested = threading.Event()
        self._flushed = threading.Condition()
        self._flush_seq = 0
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._producer: Any = None
        self._health = StoreHealth(self._stop)
        self.error: BaseException | None = None
        # called after each batch is written and committed: (seconds, events); for metrics
        self.on_batch: Callable[[float, int], None] | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise StoreError("history sink not started")
        return self._store

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> HistorySink:
        """Run the loop in a daemon thread: open the store (retrying while it is unavailable),
        subscribe, then sink."""
        self._thread = threading.Thread(target=self._run, name="history-sink", daemon=True)
        self._thread.start()
        log.info("history sink started group=%s topics=%d", self.group_id, len(self.topics))
        return self

    def status(self) -> dict[str, Any]:
        """Where the sink stands: ok, starting, store_unavailable or backing_off, and why."""
        health = self._health
        failing = health.failing_since
        return {
            "state": "crashed" if self.error is not None else health.state,
            "failing_for_s": round(time.monotonic() - failing, 1) if failing else 0.0,
            "last_error": health.last_error,
            "pending_events": self._batcher.pending_events() + self._inserts.pending_events(),
            "consumed": self.stats.consumed,
            "events_written": self.stats.events_written,
            "rows_written": self.stats.rows_written,
            "insert_failures": self.stats.insert_failures,
            "dead_lettered": self.stats.dead_lettered,
        }

    def _connect(self) -> bool:
        """Open the store and subscribe; False (after a back-off) while the store is down."""
        try:
            if self._store is None:
                self._store = open_store(self.config)
            self._ctx = RowContext(self._known_models())
        except StoreError as exc:
            self._health.failed("store_unavailable", exc)
            return False
        self._consumer = make_consumer(
            self.config.kafka,
            self.group_id,
            **held_fetch(self.config.broker, _FETCH_WAIT_MS, _FETCH_MIN_BYTES),
        )
        self._producer = make_producer(self.config.kafka)
        self._consumer.subscribe(self.topics, on_revoke=self._on_revoke)
        self._health.recovered()
        return True

    def stop(self, timeout_s: float = 30.0) -> None:
        """Flush what is batched, commit, close the consumer (and the store if owned)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        if self._owns_store and self._store is not None:
            self._store.close()
            self._store = None
        stats = self.stats
        log.info("history sink stopped rows=%d dead=%d", stats.rows_written, stats.dead_lettered)

    def flush_now(self, timeout_s: float = 30.0) -> bool:
        """Ask the loop to flush and wait until it has; True when it did."""
        if self._thread is None or not self._thread.is_alive():
            return False
        with self._flushed:
            target = self._flush_seq + 1
            self._flush_requested.set()
            return self._flushed.wait_for(lambda: self._flush_seq >= target, timeout_s)

    def __enter__(self) -> HistorySink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self._consumer is None:
                self._connect()
            while not self._stop.is_set():
                messages = self._consumer.consume(_POLL_BATCH, timeout=0.1)
                # inventory first: telemetry rows of the same poll then get their GPU model
                messages.sort(key=lambda m: m.topic() != NODE_INVENTORY)
                telemetry = []
                for msg in messages:
                    if msg.error() is None and self._lane.takes(msg.value()):
                        telemetry.append(msg)
                    else:
                        self._handle(msg)
                if telemetry:
                    self._handle_telemetry(telemetry)
                if self._inserts.ready():  # commit as soon as the insert in flight is done
                    self._settle()
                if self._flush_requested.is_set():  # written and committed when it returns
                    self._flush_requested.clear()
                    self._flush(wait=True)
                    self._mark_flushed()
                elif self._batcher.due() or self._health.failures:  # retries wait for their insert
                    self._flush(wait=self._health.failures > 0)
            if self._consumer is not None:
                self._flush(wait=True)
        except BaseException as exc:  # keep the worker alive; report through .error and logs
            self.error = exc
            log.exception("history sink crashed")
        finally:
            self._inserts.close()  # an insert in flight finishes; uncommitted, it is read again
            self._mark_flushed()
            self._close_clients()

    def _mark_flushed(self) -> None:
        with self._flushed:
            self._flush_seq += 1
            self._flushed.notify_all()

    def _close_clients(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _handle(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("history consume error=%s", err)
            return
        self.stats.consumed += 1
        self._convert(msg)

    def _convert(self, msg: Message) -> None:
        """Decode one message into its table's rows, or dead-letter it with the reason."""
        topic, partition = str(msg.topic()), int(msg.partition() or 0)
        offset = int(msg.offset() or 0)
        try:
            event, record = self._codec.decode(msg.value() or b"", topic=topic)
            table, rows = to_rows(event, record, self._ctx)
        except (DecodeError, ConversionError) as exc:
            self._dead_letter(msg, str(exc))
            self._batcher.skip(topic, partition, offset)
            return
        if not self._batcher.add(topic, partition, offset, table, record["event_id"], rows, msg):
            self.stats.duplicates += 1

    def _handle_telemetry(self, messages: list[Message]) -> None:
        """A poll's latest-schema NodeTelemetry, decoded together into one columnar chunk."""
        self.stats.consumed += len(messages)
        for (topic, partition), offset in offsets_of(messages).items():
            self._batcher.seen(topic, partition, offset)
        batch = self._lane.decode([m.value() or b"" for m in messages])
        for i in np.flatnonzero(~batch.ok):  # not plain: decoded (or dead-lettered) one by one
            self._convert(messages[i])
        fresh = self._batcher.claim(batch.text("event_id", batch.ok).to_pylist())
        self.stats.duplicates += fresh.count(False)
        columns = self.store.columns(_TELEMETRY_TABLE)
        chunk = telemetry_chunk(batch, fresh, self._ctx.node_models, columns)
        self._batcher.add_chunk(_TELEMETRY_TABLE, chunk)

    def _dead_letter(self, msg: Message, error: str) -> None:
        record = message_dead_letter(msg, error, consumer=self.group_id)
        # the configured framing (single-object, or Confluent with a registry), like every topic
        value = self._codec.encode("DeadLetter", record, topic=DEADLETTER)
        self._producer.produce(DEADLETTER, value, key=msg.key())
        self._producer.poll(0)
        self.stats.dead_lettered += 1
        where = (msg.topic(), msg.partition(), msg.offset(), error[:200])
        log.warning("history dead-letter topic=%s partition=%d offset=%d error=%s", *where)

    # ---- flushing --------------------------------------------------------------------------

    def backlog(self) -> dict[tuple[str, int], int]:
        """Messages not yet consumed per assigned partition (from cached high watermarks)."""
        c = self._consumer
        if c is None:
            return {}
        out = {}
        for tp in c.position(c.assignment()):
            _, high = c.get_watermark_offsets(tp, cached=True) or (0, 0)
            if high >= 0 and tp.offset >= 0:
                out[(tp.topic, tp.partition)] = max(0, high - tp.offset)
        return out

    def _flush(self, *, wait: bool) -> None:
        """Settle the insert in flight, then start inserting the current batch (one columnar
        block per table; events whose rows do not fit a table are dead-lettered); with `wait`,
        settle that one too (written and committed, or put back) before returning."""
        if not self._settle():
            return  # put back and backed off: the caller's next flush retries it
        started = time.perf_counter()
        batch = self._batcher.drain()
        if not batch:
            return
        blocks = []
        try:
            for table in batch.tables():
                data = table_block(self.store, table, batch, self._dead_letter)
                if data is not None:
                    blocks.append((table, data))
        except StoreError as exc:  # e.g. a table gone: as if its insert had failed
            self._insert_failed(Outcome(batch, started), exc)
            return
        self._inserts.submit(batch, blocks, started)  # even with no rows: commits in order
        if wait:
            self._settle()

    def _settle(self) -> bool:
        """Collect the insert in flight: commit its offsets, or put its batch back in front and
        back off. False when it failed."""
        outcome = self._inserts.wait()
        if outcome is None:
            return True
        batch = outcome.batch
        self.stats.rows_written += outcome.rows
        if outcome.error is not None:
            self._insert_failed(outcome, outcome.error)
            return False
        if self._health.failures:  # the store is back: read again
            self._health.recovered()
            self._consumer.resume(self._consumer.assignment())
        self._batcher.written(batch)
        self._producer.flush(10)  # dead letters of this batch are out before we commit
        self._commit(batch)
        self.stats.flushes += 1
        self.stats.events_written += len(batch.event_ids)
        if self.on_batch is not None:
            self.on_batch(time.perf_counter() - outcome.started, len(batch.event_ids))
        return True

    def _insert_failed(self, outcome: Outcome, exc: StoreError) -> None:
        batch, done = outcome.batch, outcome.done
        self.stats.insert_failures += 1
        for table in done:  # written already: do not write those rows twice
            batch.pop(table)
        self._batcher.restore(batch)
        # hold reading (still polling, so the group keeps us) until the batch is written
        self._consumer.pause(self._consumer.assignment())
        log.warning("history insert failed tables=%s error=%s", sorted(batch.tables()), exc)
        self._health.failed("backing_off", exc)

    def _commit(self, batch: Batch) -> None:
        if not batch.offsets or self._consumer is None:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in batch.offsets.items()]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # a revoked partition: its rows are in, redelivery dedupes
            log.warning("history commit failed error=%s", exc)

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        self._flush(wait=True)  # before another member reads from our last commit

    def _known_models(self) -> dict[str, str]:
        res = self.store.query(
            "SELECT node_id, argMax(gpu_model, ts) FROM node_inventory GROUP BY node_id"
        )
        return {str(n): str(m) for n, m in res.rows}
