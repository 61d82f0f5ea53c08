"""The decision log as the source of truth for which jobs are already decided.

At start the worker folds `gpuflow.decisions.placement` (each job's last final decision,
PLACED or REJECTED, of the highest epoch: an evicted job is placed again at epoch + 1),
`gpuflow.jobs.events` (which placement epochs ended, and MIGRATED reports),
`gpuflow.decisions.migration` and `gpuflow.jobs.routed` into a `Ledger`. A crash between
"decision produced" and "table updated" (or the other way round) is then healed by
`Scheduler.rebuild`, so a replay after a crash neither decides a job twice nor loses one.

The fold is incremental: a `Ledger` remembers, per partition, the last record it folded (offset,
timestamp, key), and `catch_up` reads only what came after it. Saved between runs
(`streams.ledger.snapshot`), start-up reads the logs' tails instead of their whole history. If
a saved position no longer names the same record, or the broker reports another cluster id
(the broker's log was reset or replaced), the ledger starts again from the beginning. If
retention moved a log's start past a saved position, the ledger keeps what it folded and reads
on from the log start; records lost in between are logged, and `trimmed_ms` tells a rebuild
that placement decisions written before it may be missing (`streams.recovery` then trusts the
reservation table for those jobs rather than requeue a job that may still run). Jobs that ended
(or were refused) longer ago than the worker's horizon are pruned, so the ledger holds live
jobs plus the horizon, like the worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, Message, TopicPartition

from infra.config import KafkaConfig
from infra.kafka import consumer
from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_EVENTS, JOBS_ROUTED, TOPICS
from schemas import Codec, DecodeError, timestamp_ms
from streams.scheduler.job_end import ENDS, end_kind, is_over

__all__ = ["Ledger", "LogReset"]

log = logging.getLogger(__name__)

_FINAL = ("PLACED", "REJECTED")
_EVENT_OF = {t.name: t.event for t in TOPICS}

Position = tuple[int, int, bytes | None]  # the last record folded: offset, timestamp ms, key
# a job's last final decision: epoch, outcome, when it was written (ms), its bytes as written
Decided = tuple[int, str, int, bytes]


class LogReset(Exception):
    """The log no longer holds, at a saved position, the record the ledger folded there."""


@dataclass
class Ledger:
    """The four logs a worker rebuilds from, folded, and how far each partition was read."""

    # job -> its last final PlacementDecision, kept as written (decoded by `decisions`: saving
    # and loading bytes is cheap, and a worker only needs the records when it rebuilds)
    final: dict[str, Decided] = field(default_factory=dict)
    ended: dict[str, dict[int, tuple[str, int]]] = field(default_factory=dict)  # epoch -> end
    migrated: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # MIGRATED reports
    moves: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # MigrationDecisions
    # job -> (highest routed attempt, when it was written, ms)
    routed: dict[str, tuple[int, int]] = field(default_factory=dict)
    positions: dict[str, dict[int, Position]] = field(default_factory=dict)
    # what the positions are in: "cluster" (the broker's cluster id) and "trimmed_ms" (placement
    # decisions written before it may have gone to retention unread)
    source: dict[str, Any] = field(default_factory=dict)

    @property
    def trimmed_ms(self) -> int:
        """Placement decisions written before this (ms) may be missing (0: none are)."""
        return int(self.source.get("trimmed_ms") or 0)

    def catch_up(
        self,
        kafka: KafkaConfig,
        codec: Codec,
        timeout_s: float = 60.0,
        *,
        prune: Callable[[Ledger], object] | None = None,
        prune_every: int = 10_000,
    ) -> int:
        """Fold what the four logs gained since the last catch-up; the records read.

        A position the log no longer matches starts everything again from the beginning.
        TimeoutError when the read makes no progress for `timeout_s`. `prune`, when given, is
        called every `prune_every` records, so a long fold holds at most that many records'
        jobs beyond what pruning keeps (a snapshot's fold, a whole save interval of decisions,
        otherwise peaks at all of them before it is cut back). Partitions are read in no
        order between them, so a job's decision may come after its other records: a prune
        in the middle of a fold must not take orphans (`prune(..., orphans=False)`).
        """
        started = time.monotonic()
        try:
            read = self._read_all(kafka, codec, timeout_s, prune, prune_every)
        except LogReset as exc:
            log.warning("ledger does not match the log (%s): reading it from the start", exc)
            self._clear()
            read = self._read_all(kafka, codec, timeout_s, prune, prune_every)
        log.info(
            "ledger caught up read=%d final=%d in_s=%.2f",
            read,
            len(self.final),
            time.monotonic() - started,
        )
        return read

    def _clear(self) -> None:
        for table in self._tables():
            table.clear()
        self.positions.clear()
        self.source.clear()

    def _tables(self) -> tuple[dict[str, Any], ...]:
        """What the ledger keeps per job."""
        return self.final, self.ended, self.migrated, self.moves, self.routed

    def decisions(self, codec: Codec) -> dict[str, dict[str, Any]]:
        """job_id -> its final PlacementDecision of the highest epoch (what a rebuild reads)."""
        topic = DECISIONS_PLACEMENT
        return {job: codec.decode(d[3], topic=topic)[1] for job, d in self.final.items()}

    def _read_all(
        self,
        kafka: KafkaConfig,
        codec: Codec,
        timeout_s: float,
        prune: Callable[[Ledger], object] | None,
        prune_every: int,
    ) -> int:
        folds = {
            DECISIONS_PLACEMENT: self._decision,
            JOBS_EVENTS: self._job_event,
            DECISIONS_MIGRATION: self._move,
            JOBS_ROUTED: self._routed,
        }
        after = {t: dict(self.positions.get(t, {})) for t in folds}
        read = 0
        for record, msg in _read_topics(kafka, codec, after, timeout_s, self.source):
            topic, partition = str(msg.topic()), int(msg.partition() or 0)
            written = msg.timestamp()[1]
            self.positions.setdefault(topic, {})[partition] = (
                int(msg.offset() or 0), written, msg.key()
            )  # fmt: skip
            read += 1
            if record is not None:
                folds[topic](record, msg)
            if prune is not None and read % prune_every == 0:
                prune(self)
        return read

    def _decision(self, r: dict[str, Any], msg: Message) -> None:
        # a submission refused at admission (streams.admission) leaves its job id undecided
        if r.get("outcome") not in _FINAL or not r.get("admitted", True):
            return
        job_id, epoch = r["job_id"], int(r.get("epoch") or 0)
        seen = self.final.get(job_id)
        if seen is None or epoch >= seen[0]:
            self.final[job_id] = (epoch, str(r["outcome"]), msg.timestamp()[1], msg.value() or b"")

    def _job_event(self, r: dict[str, Any], msg: Message) -> None:
        written = msg.timestamp()[1]
        if r.get("type") in ENDS:  # kept with a FAILED's cause ("FAILED:EXIT", job_end)
            ends = self.ended.setdefault(r["job_id"], {})
            epoch = int(r.get("epoch") or 0)
            if written >= ends.get(epoch, ("", -1))[1]:
                ends[epoch] = (end_kind(r), written)
        elif r.get("type") == "MIGRATED":
            self.migrated.setdefault(r["job_id"], []).append(r)

    def _move(self, r: dict[str, Any], msg: Message) -> None:
        moves = self.moves.setdefault(r["job_id"], [])
        if all(m["event_id"] != r["event_id"] for m in moves):  # redelivered: once
            moves.append(r)

    def _routed(self, r: dict[str, Any], msg: Message) -> None:
        job_id, attempt = r["job"]["job_id"], int(r["attempt"])
        if attempt > self.routed.get(job_id, (0, 0))[0]:
            self.routed[job_id] = (attempt, msg.timestamp()[1])

    def attempts(self) -> dict[str, int]:
        """job -> the highest attempt it was routed at (what a rebuild tells the scheduler)."""
        return {job: attempt for job, (attempt, _) in self.routed.items()}

    def prune(
        self, now_ms: int, horizon_ms: int, live: Collection[str] = (), *, orphans: bool = True
    ) -> int:
        """Forget jobs that are over: refused, or whose placement ended other than EVICTED,
        written more than `horizon_ms` before `now_ms`, unless `live` names them (a worker's
        table still holds them); how many. What is left is live jobs plus the horizon.

        Records of a job with no final decision here (an end redelivered after its job was
        forgotten, a job routed on and never decided) go once the newest of them is older
        than the horizon, so nothing outlives it for want of a decision to prune it by; not
        with `orphans=False`, for a fold that may not have reached the decision yet.
        """
        cutoff, gone = now_ms - horizon_ms, []
        for job_id, (epoch, outcome, written, _) in self.final.items():
            if job_id in live:
                continue
            if outcome == "REJECTED":
                over = written
            else:
                end = self.ended.get(job_id, {}).get(epoch)
                over = end[1] if end is not None and is_over(end[0]) else now_ms
            if over < cutoff:
                gone.append(job_id)
        if orphans:
            gone.extend(self._orphans(cutoff, live))
        for job_id in gone:
            for table in self._tables():
                table.pop(job_id, None)
        return len(gone)

    def _orphans(self, cutoff: int, live: Collection[str]) -> list[str]:
        """Jobs with records but no final decision, none of them written since `cutoff`."""
        newest: dict[str, int] = {}

        def seen(job_id: str, written: int) -> None:
            if job_id not in self.final and job_id not in live:
                newest[job_id] = max(newest.get(job_id, written), written)

        for job_id, ends in self.ended.items():
            for _, written in ends.values():
                seen(job_id, written)
        for table in (self.migrated, self.moves):
            for job_id, records in table.items():
                for r in records:
                    seen(job_id, timestamp_ms(r.get("ts")) or 0)
        for job_id, (_, written) in self.routed.items():
            seen(job_id, written)
        return [job_id for job_id, written in newest.items() if written < cutoff]


def _read_topics(
    kafka: KafkaConfig,
    codec: Codec,
    after: Mapping[str, Mapping[int, Position]],
    timeout_s: float,
    source: dict[str, Any],
) -> Iterator[tuple[dict[str, Any] | None, Message]]:
    """Every record of the topics `after` names, past the record it names per partition (from
    the beginning for a partition it does not name; from the log start where retention moved
    it past that record), to end-of-partition, with its message; the record is None when it
    is not its topic's event (its consumer dead-letters it; nothing to learn here). One
    consumer reads them all, in no order between partitions. `source` (`Ledger.source`) is
    checked and updated: the cluster read, and `trimmed_ms` when placement records were lost.

    Raises LogReset when a partition does not hold the record `after` names, or the broker is
    another cluster than the one `source` names.
    """
    c = consumer(
        kafka, group_id=f"gpuflow-ledger-{time.monotonic_ns()}", **{"enable.partition.eof": True}
    )
    try:
        cluster = c.list_topics(DECISIONS_PLACEMENT, timeout=10).cluster_id
        if source.get("cluster") not in (None, cluster) and any(after.values()):
            raise LogReset(f"the broker is cluster {cluster}, was {source['cluster']}")
        source["cluster"] = cluster
        parts, pending, checked, trimmed = _positions(c, after)
        lost = {w for w in trimmed if w[0] == DECISIONS_PLACEMENT}  # first record's time, then
        if lost - pending:  # nothing left after the gap: any decision until now may be gone
            _trimmed_before(source, int(time.time() * 1000))
        if not parts:
            return
        c.assign(parts)
        moved = time.monotonic()  # a long log takes as long as it takes; a stalled read fails
        while pending:
            if time.monotonic() - moved > timeout_s:
                raise TimeoutError(f"{sorted(pending)}: nothing read for {timeout_s}s")
            messages = c.consume(10_000, timeout=0.05)
            if messages:
                moved = time.monotonic()
            for msg in messages:
                error, where = msg.error(), (str(msg.topic()), int(msg.partition() or 0))
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        if where not in checked:
                            saved = after[where[0]][where[1]][0]
                            raise LogReset(f"{where[0]}/{where[1]} ends before {saved}")
                        pending.discard(where)
                    continue
                if where not in checked:
                    if _verified(msg, after[where[0]][where[1]]):
                        checked.add(where)
                    continue  # read already, or before what was
                if where in lost:  # the first record after the gap: what was lost is older
                    lost.discard(where)
                    _trimmed_before(source, int(msg.timestamp()[1]))
                yield _record(codec, where[0], msg), msg
    finally:
        c.close()


Where = tuple[str, int]  # (topic, partition)


def _trimmed_before(source: dict[str, Any], ms: int) -> None:
    """Placement decisions written before `ms` may be missing (the latest such time wins)."""
    source["trimmed_ms"] = max(int(source.get("trimmed_ms") or 0), ms)


def _positions(
    c: Any, after: Mapping[str, Mapping[int, Position]]
) -> tuple[list[TopicPartition], set[Where], set[Where], set[Where]]:
    """Where to start reading each partition, those to read to their end, those whose saved
    record needs no check (read from the beginning, or from a log start past it), and those
    where retention took records the ledger never folded (a gap after a saved position,
    logged; or a log read from the beginning that no longer starts at offset 0)."""
    parts, pending, checked, trimmed = [], set(), set(), set()
    for topic, saved in after.items():
        meta = c.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            if saved:
                raise LogReset(f"{topic} is gone")
            continue
        for p in meta.partitions:
            # Only end-of-partition is trusted: the embedded broker's high watermark
            # undercounts (the last batch's base offset + 1), so a saved record at or past it
            # may still be there, in the last batch: read from that batch's start
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if p in saved and saved[p][0] < low:  # retention moved the log start past it
                checked.add((topic, p))
                if saved[p][0] + 1 < low:
                    trimmed.add((topic, p))
                    log.warning(
                        "ledger: %s/%d offsets %d-%d went to retention before they were read",
                        topic, p, saved[p][0] + 1, low - 1,
                    )  # fmt: skip
                if high > low:
                    parts.append(TopicPartition(topic, p, low))
                    pending.add((topic, p))
                continue
            if p in saved:
                if high <= low:
                    raise LogReset(f"{topic}/{p} is empty, was read to {saved[p][0]}")
                parts.append(TopicPartition(topic, p, min(saved[p][0], high - 1)))
                pending.add((topic, p))
                continue
            parts.append(TopicPartition(topic, p, OFFSET_BEGINNING))
            checked.add((topic, p))
            if low > 0:  # read from a start retention moved: what came before is unknown
                trimmed.add((topic, p))
            if high > low:
                pending.add((topic, p))
    return parts, pending, checked, trimmed


def _verified(msg: Message, position: Position) -> bool:
    """Whether `msg`, read on the way to the saved position, is the record saved there (True),
    one before it (False); LogReset when the log holds another record at that offset."""
    offset, ts, key = position
    here = int(msg.offset() or 0)
    if here < offset:
        return False
    if here > offset or msg.timestamp()[1] != ts or msg.key() != key:
        raise LogReset(f"{msg.topic()}/{msg.partition()} offset {offset} holds another record")
    return True


def _record(codec: Codec, topic: str, msg: Message) -> dict[str, Any] | None:
    try:
        name, record = codec.decode(msg.value(), topic=topic)
    except DecodeError:
        return None
    return record if name == _EVENT_OF.get(topic, name) else None
