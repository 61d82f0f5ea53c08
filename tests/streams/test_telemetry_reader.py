"""The telemetry lane's batch bookkeeping, and a reader that stopped makes the worker not live.
(The reader against a real broker: tests/integration/test_fleet_state.py, test_graceful_leave.)"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from infra.config import load_config
from schemas import SingleObjectCodec
from scorer import ClusterState, Placer
from streams.history.telemetry import TelemetryLane
from streams.runtime.runtime import Runtime
from streams.scheduler.core import Scheduler
from streams.telemetry.reader import RawBatch, TelemetryReader

CODEC = SingleObjectCodec()


class Message:
    """What RawBatch reads of a confluent_kafka Message."""

    def __init__(self, partition: int, offset: int, value: bytes) -> None:
        self._p, self._o, self._v = partition, offset, value

    def topic(self) -> str:
        return "gpuflow.node.telemetry"

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes:
        return b"eu"

    def value(self) -> bytes:
        return self._v


def report(node: str) -> bytes:
    return CODEC.encode("NodeTelemetry", {
        "event_id": f"{node}:1", "ts": 1_700_000_000_000, "schema": 1, "node_id": node,
        "region": "eu", "tier": "HEARTBEAT", "full_snapshot": False, "node_healthy": True,
        "gpus": [],
    })  # fmt: skip


def test_a_poll_is_split_into_column_rows_and_the_rest_in_order() -> None:
    messages: list[Any] = [
        Message(0, 5, report("a")),
        Message(1, 9, b"\x00not ours"),
        Message(0, 6, report("b")),
    ]
    batch = RawBatch.of(messages, TelemetryLane(CODEC))
    assert batch.taken.tolist() == [True, False, True]
    assert batch.columns is not None and batch.columns.ok.tolist() == [True, True]
    assert batch.next_offsets() == {0: 7, 1: 10}
    assert batch.message(1).value == b"\x00not ours" and batch.message(1).offset == 9
    # a column reader that failed: every message goes one by one
    assert not RawBatch.of(messages, None).taken.any()


def test_a_reader_thread_that_stopped_makes_the_worker_not_live(tmp_path: Path) -> None:
    config = load_config(env={}, data_dir=str(tmp_path))
    state = ClusterState()
    s = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    rt = Runtime(config, CODEC, s)
    reader = TelemetryReader(config, CODEC)
    rt.telemetry_reader = reader
    assert rt.stalled() == []  # not started yet: nothing to say
    ended = threading.Thread(target=lambda: None)
    ended.start()
    ended.join()
    reader._thread, reader.error = ended, "KafkaException: all brokers down"
    assert rt.stalled() == ["telemetry lane stopped: KafkaException: all brokers down"]


class Commits:
    """Records what a consumer was asked to commit."""

    def __init__(self) -> None:
        self.calls: list[dict[int, int]] = []

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        self.calls.append({tp.partition: tp.offset for tp in offsets})


def test_only_offsets_applied_since_the_last_commit_are_committed(tmp_path: Path) -> None:
    reader = TelemetryReader(load_config(env={}, data_dir=str(tmp_path)), CODEC)
    reader.assigned = frozenset({0, 1})
    c = Commits()
    reader._applied = {0: 5, 1: 0}
    reader._commit(c)
    reader._commit(c)  # nothing new: no request
    reader._applied[1] = 3
    reader._commit(c)
    assert c.calls == [{0: 5}, {1: 3}]
