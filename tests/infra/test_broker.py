"""The embedded broker (the log broker, and Tansu: the real binary) and the Kafka helpers."""

from __future__ import annotations

import dataclasses
import os
import socket
import stat
import time
from pathlib import Path

import pytest

from infra.broker import EmbeddedBroker, free_port, resolve_broker_binary
from infra.config import BrokerConfig, Config
from infra.errors import BrokerError
from infra.kafka import (
    admin,
    ensure_topics,
    held_fetch,
    producer,
    topic_config,
    topic_offsets,
)
from infra.topics import JOBS_SUBMITTED, NODE_INVENTORY, TOPICS, TopicSpec

pytestmark = pytest.mark.integration


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-broker.sh"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


# --- process lifecycle -------------------------------------------------------------------


@pytest.mark.engines("logbroker", "tansu")
def test_starts_on_a_free_port_and_stops_by_pid(broker: EmbeddedBroker) -> None:
    pid = broker.pid
    assert pid is not None and alive(pid)
    host, port = broker.bootstrap_servers.rsplit(":", 1)
    assert (host, int(port)) == ("127.0.0.1", broker.port) and broker.port > 0
    assert accepts(host, broker.port)
    assert broker.start() is broker and broker.pid == pid  # starting twice is a no-op
    broker.stop()
    assert broker.pid is None
    assert not alive(pid)  # reaped, not a zombie
    assert not accepts(host, broker.port)
    broker.stop()  # twice is safe


def test_context_exit_stops_the_broker(tmp_path: Path) -> None:
    with EmbeddedBroker(BrokerConfig(), tmp_path) as b:
        pid = b.pid
        assert pid is not None and alive(pid)
        assert b.log_path == tmp_path / "broker.log" and b.log_path.exists()
    assert not alive(pid)


def test_the_logbroker_engine_starts_stops_by_pid_and_stops_at_sigterm(tmp_path: Path) -> None:
    with EmbeddedBroker(BrokerConfig(engine="logbroker", retention_ms=0), tmp_path, 3) as b:
        pid = b.pid
        assert pid is not None and alive(pid) and accepts("127.0.0.1", b.port)
        names = ensure_topics(
            dataclasses.replace(Config().kafka, bootstrap_servers=b.bootstrap_servers)
        )
        assert sorted(names) == sorted(s.name for s in TOPICS)
        started = time.monotonic()
        b.stop()
        assert time.monotonic() - started < 3  # it honours SIGTERM (Tansu needs the SIGKILL)
    assert not alive(pid)
    assert "logbroker listening" in b.log_path.read_text()


def test_configured_port_is_used(tmp_path: Path) -> None:
    port = free_port()
    with EmbeddedBroker(BrokerConfig(port=port), tmp_path) as b:
        assert b.bootstrap_servers == f"127.0.0.1:{port}"
        assert accepts("127.0.0.1", port)


def test_port_in_use_is_a_broker_error(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        b = EmbeddedBroker(BrokerConfig(port=port), tmp_path)
        with pytest.raises(BrokerError, match=f"port {port}.*already in use"):
            b.start()
        assert b.pid is None


def test_missing_binary_is_a_broker_error(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="not an executable file"):
        EmbeddedBroker(BrokerConfig(engine="tansu", binary="/nonexistent/tansu"), tmp_path).start()
    not_executable = tmp_path / "tansu"
    not_executable.write_text("")
    not_executable.chmod(0o644)
    with pytest.raises(BrokerError, match="not an executable file"):
        EmbeddedBroker(BrokerConfig(engine="tansu", binary=str(not_executable)), tmp_path).start()


def test_executable_that_is_not_a_program_is_a_broker_error(tmp_path: Path) -> None:
    garbage = tmp_path / "tansu"
    garbage.write_bytes(b"\x00\x01not an ELF")
    garbage.chmod(0o755)
    b = EmbeddedBroker(BrokerConfig(engine="tansu", binary=str(garbage)), tmp_path)
    with pytest.raises(BrokerError, match="cannot run broker binary"):  # was a raw OSError
        b.start()
    assert b.pid is None


def test_bad_binary_from_env_is_a_broker_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUFLOW_BROKER_BIN", "/nonexistent/tansu")
    with pytest.raises(BrokerError, match="/nonexistent/tansu"):
        resolve_broker_binary()
    assert resolve_broker_binary("/bin/sh") == "/bin/sh"  # configured path wins over env


def test_binary_that_exits_at_start_is_a_broker_error(tmp_path: Path) -> None:
    binary = script(tmp_path, "echo 'tansu: bad storage engine' >&2; exit 3")
    b = EmbeddedBroker(BrokerConfig(engine="tansu", binary=binary), tmp_path)
    with pytest.raises(BrokerError, match=r"(?s)exited at start.*bad storage engine"):
        b.start()
    assert b.pid is None


def test_binary_that_never_listens_is_stopped_and_refused(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = script(tmp_path, f"echo $$ > {pid_file}; exec sleep 30")
    b = EmbeddedBroker(BrokerConfig(engine="tansu", binary=binary, start_timeout_s=0.3), tmp_path)
    started = time.monotonic()
    with pytest.raises(BrokerError, match=r"did not accept connections within 0\.3s"):
        b.start()
    assert time.monotonic() - started < 5
    assert b.pid is None
    assert not alive(int(pid_file.read_text()))


# --- topics ------------------------------------------------------------------------------


def partition_counts(config: Config, names: list[str]) -> dict[str, int]:
    meta = admin(config.kafka).list_topics(timeout=5).topics
    return {n: len(meta[n].partitions) for n in names if n in meta}


def test_ensure_topics_creates_every_topic_once(config: Config) -> None:
    names = [t.name for t in TOPICS]  # the fixture already ran ensure_topics
    assert partition_counts(config, names) == {n: config.kafka.partitions for n in names}
    assert ensure_topics(config.kafka) == []


def test_ensure_topics_uses_the_configured_partition_count(config: Config, unique: str) -> None:
    kafka = dataclasses.replace(config.kafka, partitions=3)
    specs = [TopicSpec(f"t-{unique}-a", "GridSignal"), TopicSpec(f"t-{unique}-b", "NodeInventory",
             compacted=True, retention_ms=60_000)]  # fmt: skip
    assert sorted(ensure_topics(kafka, specs)) == [s.name for s in specs]
    assert ensure_topics(kafka, specs) == []
    assert partition_counts(config, [s.name for s in specs]) == {s.name: 3 for s in specs}


def test_inventory_topic_is_created_compacted() -> None:
    # what ensure_topics asks the broker for; Tansu answers DescribeConfigs with nothing, so
    # the request is what can be checked here (a real Kafka applies it)
    by_name = {spec.name: topic_config(spec) for spec in TOPICS}
    assert by_name[NODE_INVENTORY]["cleanup.policy"] == "compact"
    assert by_name[JOBS_SUBMITTED]["cleanup.policy"] == "delete"


def test_ensure_topics_on_a_dead_broker_is_a_broker_error(config: Config) -> None:
    dead = dataclasses.replace(config.kafka, bootstrap_servers=f"127.0.0.1:{free_port()}")
    with pytest.raises(BrokerError, match="cannot list topics"):
        ensure_topics(dead, timeout_s=0.5)


def produce(config: Config, topic: str, n: int, *, batch: bool) -> None:
    p = producer(config.kafka)
    for i in range(n):
        p.produce(topic, key=f"k{i}".encode(), value=b"v", partition=i % config.kafka.partitions)
        if not batch:
            assert p.flush(10) == 0  # one record per batch
    assert p.flush(10) == 0


def test_topic_offsets_counts_produced_messages(config: Config, unique: str) -> None:
    topic = f"t-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "GridSignal")])
    produce(config, topic, 7, batch=False)
    counts = topic_offsets(config.kafka, [topic, "gpuflow.grid.signals", f"missing-{unique}"])
    assert counts == {topic: 7, "gpuflow.grid.signals": 0}


def test_topic_offsets_counts_records_in_multi_record_batches(config: Config, unique: str) -> None:
    topic = f"t-{unique}"
    ensure_topics(config.kafka, [TopicSpec(topic, "GridSignal")])
    # two records per partition in one batch: Tansu 0.6 reports high watermark 1, not 2
    produce(config, topic, 8, batch=True)
    assert topic_offsets(config.kafka, [topic]) == {topic: 8}


def test_a_held_fetch_asks_for_its_minimum_except_on_tansu() -> None:
    # the log broker and Kafka hold a fetch for its minimum; Tansu relists while it holds one
    logbroker = held_fetch(BrokerConfig(engine="logbroker"), 1000, 1 << 20)
    assert logbroker == {"fetch.wait.max.ms": 1000, "fetch.min.bytes": 1 << 20}
    assert held_fetch(BrokerConfig(engine="tansu"), 50, 1 << 16)["fetch.min.bytes"] == 1
