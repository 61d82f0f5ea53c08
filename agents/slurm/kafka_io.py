"""The bridge's Kafka side: decisions in (a consumer group, so a restart resumes where it
committed), job submissions read back for their commands, events, logs, inventory and
telemetry out (events and inventory on the region's partition)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from agents.executor import RecentJobs
from agents.publisher import EventPublisher
from infra.config import Config
from infra.deadletter import dead_letter_record
from infra.kafka import consumer
from infra.topics import (
    DEADLETTER,
    DECISIONS_MIGRATION,
    DECISIONS_PLACEMENT,
    DECISIONS_PREEMPTION,
    JOBS_EVENTS,
    JOBS_LOGS,
    JOBS_SUBMITTED,
)
from schemas import DecodeError, make_codec

__all__ = ["BridgeIO"]

log = logging.getLogger(__name__)

DECISION_TOPICS = (DECISIONS_PLACEMENT, DECISIONS_PREEMPTION, DECISIONS_MIGRATION)


class BridgeIO:
    def __init__(self, config: Config, region: str, group_id: str) -> None:
        self.config = config
        self.region = region
        self.codec = make_codec(config.kafka.schema_registry_url or None)
        self.pub = EventPublisher(config)
        self.partition = config.kafka.partitioner()(region)
        self.decisions = consumer(config.kafka, group_id)
        self.decisions.subscribe(list(DECISION_TOPICS))
        self.specs: dict[str, dict[str, Any]] = {}
        self._spec_order: RecentJobs[str] = RecentJobs(100_000)
        self.submissions = consumer(config.kafka, f"{group_id}-specs")
        self._assign_submissions(config.slurm.spec_lookback_s)

    def _assign_submissions(self, lookback_s: float) -> None:
        meta = self.submissions.list_topics(JOBS_SUBMITTED, timeout=10).topics[JOBS_SUBMITTED]
        since = int((time.time() - lookback_s) * 1000)
        parts = [TopicPartition(JOBS_SUBMITTED, p, since) for p in meta.partitions]
        try:
            found = self.submissions.offsets_for_times(parts, timeout=10)
            parts = [
                TopicPartition(
                    JOBS_SUBMITTED, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                )
                for tp in found
            ]
        except KafkaException as exc:  # a broker without time lookups: read them all
            log.info("submissions read from the beginning (%s)", exc)
            parts = [TopicPartition(JOBS_SUBMITTED, p, OFFSET_BEGINNING) for p in meta.partitions]
        self.submissions.assign(parts)

    def poll_specs(self, timeout_s: float = 0.0) -> None:
        """Job submissions into the spec cache (the bounded last 100,000 jobs)."""
        for msg in self.submissions.consume(2000, timeout=timeout_s):
            if msg.error():
                continue
            try:
                name, record = self.codec.decode(msg.value(), topic=msg.topic() or "")
            except DecodeError:
                continue  # the worker dead-letters bad submissions
            if name == "JobSubmitted":
                job_id = str(record["job_id"])
                self.specs[job_id] = record
                self._spec_order.add(job_id)
                if len(self.specs) > self._spec_order.capacity:
                    self.specs = {k: v for k, v in self.specs.items() if k in self._spec_order}

    def poll_decisions(self, timeout_s: float) -> Iterable[tuple[str, dict[str, Any]]]:
        for msg in self.decisions.consume(500, timeout=timeout_s):
            if msg.error():
                continue
            try:
                yield self.codec.decode(msg.value(), topic=msg.topic() or "")
            except DecodeError as exc:
                self._dead_letter(msg, exc)

    def commit(self) -> None:
        try:
            self.decisions.commit(asynchronous=False)
        except KafkaException as exc:  # nothing consumed since the last commit
            log.debug("commit: %s", exc)

    def _dead_letter(self, msg: Any, error: Exception) -> None:
        log.warning("slurm bridge dead-lettered offset=%s: %s", msg.offset(), error)
        record = dead_letter_record(
            topic=msg.topic(),
            partition=msg.partition(),
            offset=msg.offset(),
            key=msg.key(),
            value=msg.value(),
            error=error,
            consumer="slurm-bridge",
        )
        self.pub.producer.produce(
            DEADLETTER, key=msg.key(), value=self.codec.encode("DeadLetter", record)
        )

    def event(self, record: dict[str, Any]) -> None:
        value = self.codec.encode("JobEvent", record, topic=JOBS_EVENTS)
        self.pub.producer.produce(
            JOBS_EVENTS, key=record["job_id"].encode(), value=value, partition=self.partition
        )
        self.pub.producer.poll(0)

    def logs(self, records: Iterable[dict[str, Any]]) -> None:
        for record in records:
            value = self.codec.encode("JobLog", record, topic=JOBS_LOGS)
            self.pub.producer.produce(JOBS_LOGS, key=record["job_id"].encode(), value=value)

    def publish(self, topic: str, records: list[dict[str, Any]]) -> None:
        if records:
            self.pub.publish(topic, records)
            self.pub.producer.poll(0)

    def close(self) -> None:
        try:
            self.pub.flush(10)
        finally:
            self.decisions.close()
            self.submissions.close()
