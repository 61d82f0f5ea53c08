"""The embedded stack: broker, worker process, simulated fleet, executor twin and job generator.

Every process this module starts is stopped by PID on exit (SIGTERM, then SIGKILL), and every
thread is told to stop and joined, so `gpuflow up` leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, config_env
from infra.errors import InfraError
from infra.kafka import ensure_topics
from infra.process import ChildProcess

__all__ = ["Stack", "WorkerProcess"]

log = logging.getLogger(__name__)


class WorkerProcess:
    """One `python -m streams` worker, with its log in the data dir."""

    def __init__(self, config: Config, *, name: str = "worker") -> None:
        self.config = config
        self.log_path = config.data_dir / f"{name}.log"
        self._proc = ChildProcess(name, self.log_path)

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def start(self) -> WorkerProcess:
        env = {**os.environ, **config_env(self.config), "PYTHONUNBUFFERED": "1"}
        pid = self._proc.start([sys.executable, "-m", "streams"], env)
        log.info("worker started pid=%s log=%s", pid, self.log_path)
        return self

    def alive(self) -> bool:
        return self._proc.alive()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self._proc.kill()

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM (Faust shuts down cleanly and commits), then SIGKILL after `timeout`."""
        self._proc.stop(timeout)

    def log_tail(self, chars: int = 2000) -> str:
        return self._proc.log_tail(chars)


class Stack:
    """Broker (unless external), topics, worker, and background threads, as one context."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.broker: EmbeddedBroker | None = None
        self.worker: WorkerProcess | None = None
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self, *, worker: bool = True) -> Stack:
        cfg = self.config
        if cfg.kafka.embedded:
            self.broker = EmbeddedBroker(cfg.broker, cfg.data_dir).start()
            cfg = cfg.with_bootstrap(self.broker.bootstrap_servers)
        if cfg.worker.web_port == 0 or _port_busy(cfg.worker.web_host, cfg.worker.web_port):
            port = free_port(cfg.worker.web_host)
            cfg = dataclasses.replace(cfg, worker=dataclasses.replace(cfg.worker, web_port=port))
        self.config = cfg
        ensure_topics(cfg.kafka)
        if worker:
            self.worker = WorkerProcess(cfg).start()
        return self

    def spawn(self, name: str, target: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run `target(*args, stop=<event>, **kwargs)` in a daemon thread stopped with the stack."""

        def run() -> None:
            try:
                target(*args, stop=self.stop_event, **kwargs)
            except Exception:
                log.exception("thread %s failed", name)

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def check_worker(self) -> None:
        if self.worker is not None and not self.worker.alive():
            raise InfraError(
                f"worker exited; log {self.worker.log_path}:\n{self.worker.log_tail()}"
            )

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self._threads:
            thread.join(15)
        if self.worker is not None:
            self.worker.stop()
        if self.broker is not None:
            self.broker.stop()

    def __enter__(self) -> Stack:
        return self.start()

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _port_busy(host: str, port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex((host, port)) == 0


def wait_until(predicate: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return predicate()
