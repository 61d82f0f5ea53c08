"""The embedded stack: broker, worker process, simulated fleet, executor twin and job generator.

Every process this module starts is stopped by PID on exit (SIGTERM, then SIGKILL), and every
thread is told to stop and joined, so `gpuflow up` leaves nothing behind. Used as a context
manager from the main thread, a stack also turns a SIGTERM to its own process (a bench or test
run stopped by `kill` or a CI timeout) into KeyboardInterrupt, so the exit still stops what it
started instead of leaving the broker and worker running.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from infra.broker import EmbeddedBroker, free_port
from infra.config import Config, config_env
from infra.errors import InfraError
from infra.kafka import ensure_topics
from infra.process import ChildProcess

__all__ = ["Stack", "WorkerProcess", "worker_config"]

log = logging.getLogger(__name__)


class WorkerProcess:
    """One `python -m streams` worker, with its log in the data dir."""

    def __init__(self, config: Config, *, name: str = "worker", log_dir: Path | None = None):
        self.config = config
        self.name = name
        self.log_path = (log_dir or config.data_dir) / f"{name}.log"
        self._proc = ChildProcess(name, self.log_path)

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def start(self) -> WorkerProcess:
        self.config.data_dir.mkdir(parents=True, exist_ok=True)  # Faust's datadir goes here
        # glibc gives each thread that allocates its own 64 MB arena; the worker's (Faust's
        # consumer, the telemetry lane, librdkafka's, the executor pool's) each kept growing a
        # little. Two arenas: 0.9 instead of 1.34 MB/min, 13 MB less
        # (docs/performance/ledger-and-memory.md). The worker is GIL-bound, so malloc
        # contention costs nothing; a user's setting wins.
        env = {"MALLOC_ARENA_MAX": "2", **os.environ, **config_env(self.config)}
        env["PYTHONUNBUFFERED"] = "1"
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

    @property
    def returncode(self) -> int | None:
        """The exit status once stopped (negative: the signal that ended it)."""
        return self._proc.returncode


class Stack:
    """Broker (unless external), topics, N workers, and background threads, as one context.

    The workers share one app id, so Kafka splits the region partitions over them; each has its
    own web port and Faust data dir. With the embedded chDB store only the first worker runs
    the history sink (one process per chDB directory); with a ClickHouse server every worker
    does, and they share its consumer group.
    """

    def __init__(self, config: Config, *, workers: int = 1) -> None:
        if workers < 1:
            raise InfraError(f"workers: must be >= 1, got {workers}")
        if workers > config.kafka.partitions:
            raise InfraError(
                f"workers: {workers} workers on {config.kafka.partitions} partitions would leave "
                f"{workers - config.kafka.partitions} idle; raise kafka.partitions"
            )
        self.config = config
        self.n_workers = workers
        self.broker: EmbeddedBroker | None = None
        self.workers: list[WorkerProcess] = []
        self.stop_event = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sigterm: Any = None  # the handler __enter__ replaced, restored by __exit__

    @property
    def worker(self) -> WorkerProcess | None:
        """The first worker (it owns the embedded history store)."""
        return self.workers[0] if self.workers else None

    def start(self, *, worker: bool = True) -> Stack:
        cfg = self.config
        if cfg.kafka.embedded:
            self.broker = EmbeddedBroker(cfg.broker, cfg.data_dir, cfg.kafka.partitions).start()
            cfg = cfg.with_bootstrap(self.broker.bootstrap_servers)
        if cfg.worker.web_port == 0 or _port_busy(cfg.worker.web_host, cfg.worker.web_port):
            port = free_port(cfg.worker.web_host)
            cfg = dataclasses.replace(cfg, worker=dataclasses.replace(cfg.worker, web_port=port))
        self.config = cfg
        ensure_topics(cfg.kafka)
        if worker:
            for i in range(self.n_workers):
                name = "worker" if i == 0 else f"worker-{i}"
                proc = WorkerProcess(worker_config(cfg, i), name=name, log_dir=cfg.data_dir)
                self.workers.append(proc.start())
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
        for proc in self.workers:
            if not proc.alive():
                raise InfraError(f"{proc.name} exited; log {proc.log_path}:\n{proc.log_tail()}")

    def stop(self) -> None:
        self.stop_event.set()
        for thread in self._threads:
            thread.join(15)
        stoppers = [threading.Thread(target=w.stop, name=f"stop-{w.name}") for w in self.workers]
        for t in stoppers:  # together: each leaves the group within its own bound
            t.start()
        for t in stoppers:
            t.join()
        if self.broker is not None:
            self.broker.stop()

    def __enter__(self) -> Stack:
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # nobody else handles it
            self._sigterm = signal.signal(signal.SIGTERM, _interrupt)
        try:
            return self.start()
        except BaseException:
            self.stop()
            self._restore_sigterm()
            raise

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.stop()
        finally:
            self._restore_sigterm()

    def _restore_sigterm(self) -> None:
        if self._sigterm is not None:
            signal.signal(signal.SIGTERM, self._sigterm)
            self._sigterm = None


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def worker_config(cfg: Config, index: int) -> Config:
    """The config of worker `index` of a stack: its own web port and data dir; with the
    embedded chDB store only worker 0 sinks history (its directory allows one process)."""
    if index == 0:
        return cfg
    embedded_store = cfg.store_dsn.startswith("chdb://")
    return dataclasses.replace(
        cfg,
        data_dir=cfg.data_dir / f"worker-{index}",
        worker=dataclasses.replace(cfg.worker, web_port=free_port(cfg.worker.web_host)),
        store=dataclasses.replace(
            cfg.store,
            enabled=cfg.store.enabled and not embedded_store,
            dsn=cfg.store.dsn or cfg.store_dsn,
        ),
    )


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
