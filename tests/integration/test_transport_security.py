"""Transport security is passed through: one set of `[kafka.client]` keys makes the worker's
aiokafka clients and every librdkafka client (agents, CLI, history sink) speak TLS / SASL.

A listener on loopback records the first bytes each client sends. A client configured for
SSL or SASL_SSL opens with a TLS ClientHello (record type 0x16, version 0x03 0x0N); a
PLAINTEXT one opens with a Kafka request (a 4-byte big-endian length, so 0x00 first).
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from confluent_kafka import KafkaException
from typer.testing import CliRunner

from agents.executor import ExecutorTwin
from gpuflow.cli import app
from gpuflow.stack import WorkerProcess
from infra.broker import free_port
from infra.config import Config, load_config
from infra.errors import ConfigError
from infra.kafka import admin, consumer, producer
from streams.worker.app import _credentials

pytestmark = pytest.mark.integration

CA = "/etc/ssl/certs/ca-certificates.crt"
TLS = {"security.protocol": "SSL", "ssl.ca.location": CA}
SASL_SSL = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "gpuflow-worker",
    "sasl.password": "not-a-real-secret",
    "ssl.ca.location": CA,
}


class FirstBytes:
    """Accepts connections on loopback and keeps the first bytes each client sends."""

    def __init__(self) -> None:
        self.port = free_port()
        self.openings: list[bytes] = []
        self._server = socket.create_server(("127.0.0.1", self.port))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    self.openings.append(conn.recv(3))
                except OSError:
                    continue

    def tls_hellos(self) -> int:
        return sum(1 for b in self.openings if b[:2] == b"\x16\x03")

    def wait(self, n: int = 1, timeout_s: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while len(self.openings) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return len(self.openings) >= n

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._server.close()


@pytest.fixture
def listener() -> Iterator[FirstBytes]:
    server = FirstBytes()
    yield server
    server.close()


def _config(tmp_path: Path, port: int, client: dict[str, str]) -> Config:
    base = load_config(env={}, data_dir=str(tmp_path / "data"))
    kafka = dataclasses.replace(
        base.kafka, bootstrap_servers=f"127.0.0.1:{port}", client=MappingProxyType(client)
    )
    worker = dataclasses.replace(base.worker, web_port=free_port(), app_id="tls-test")
    store = dataclasses.replace(base.store, enabled=False)  # only the worker's own clients
    return dataclasses.replace(base, kafka=kafka, worker=worker, store=store)


@pytest.mark.parametrize(("client", "tls"), [(TLS, True), (SASL_SSL, True), ({}, False)])
def test_librdkafka_clients_of_agents_and_cli_use_the_keys(
    tmp_path: Path, listener: FirstBytes, client: dict[str, str], tls: bool
) -> None:
    config = _config(tmp_path, listener.port, client)
    p = producer(config.kafka)  # the fleet, the job generator, `gpuflow submit`
    p.produce("gpuflow.jobs.submitted", b"x")
    p.poll(0.5)
    c = consumer(config.kafka, "tls-test")  # the executor, `gpuflow watch`, the history sink
    c.subscribe(["gpuflow.decisions.placement"])
    c.poll(0.5)
    with contextlib.suppress(KafkaException):  # `gpuflow up` creating topics
        admin(config.kafka).list_topics(timeout=0.5)
    assert listener.wait(3, 20), listener.openings
    c.close()
    assert (listener.tls_hellos() == len(listener.openings)) is tls, listener.openings
    assert tls or listener.tls_hellos() == 0


def test_executor_twin_and_cli_connect_with_tls(tmp_path: Path, listener: FirstBytes) -> None:
    config = _config(tmp_path, listener.port, SASL_SSL)
    stop = threading.Event()
    twin = threading.Thread(target=ExecutorTwin(config).run, args=(stop,), daemon=True)
    twin.start()
    assert listener.wait(1, 20)
    stop.set()
    twin.join(15)
    seen = len(listener.openings)
    env = {f"GPUFLOW_KAFKA_CLIENT_{k.replace('.', '_').upper()}": v for k, v in SASL_SSL.items()}
    env["GPUFLOW_KAFKA_BOOTSTRAP_SERVERS"] = config.kafka.bootstrap_servers
    result = CliRunner().invoke(app, ["submit", "--gpus", "1", "--timeout", "1"], env=env)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert len(listener.openings) > seen and listener.tls_hellos() == len(listener.openings)


@pytest.mark.parametrize(("client", "tls"), [(SASL_SSL, True), ({}, False)])
def test_the_worker_connects_with_the_same_keys(
    tmp_path: Path, listener: FirstBytes, client: dict[str, str], tls: bool
) -> None:
    worker = WorkerProcess(_config(tmp_path, listener.port, client)).start()
    try:
        assert listener.wait(1, 60), worker.log_tail()
    finally:
        worker.stop()
    assert (listener.tls_hellos() == len(listener.openings)) is tls, listener.openings


def test_credentials_map_to_faust_and_refuse_what_aiokafka_cannot_do() -> None:
    creds: Any = _credentials(SASL_SSL)
    assert (creds.username, creds.mechanism.value) == ("gpuflow-worker", "SCRAM-SHA-512")
    assert creds.ssl_context is not None
    assert _credentials({}) is None
    bad_settings = [
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"},
        {"security.protocol": "TLS"},
        {**TLS, "ssl.ca.location": "/nonexistent"},
    ]
    for bad in bad_settings:
        with pytest.raises(ConfigError, match=r"kafka\.client"):
            _credentials(bad)
