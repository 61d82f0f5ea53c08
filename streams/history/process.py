"""The history sink in a child process of the worker, so it does not share the worker's GIL.

Decoding and converting every topic for ClickHouse is CPU-bound Python; in the worker's own
process it slowed telemetry ingestion (10,000 nodes: lag p99 0.9 s -> 2.4 s) and decisions.
The worker still owns the chDB directory: it starts this child with itself, stops it with
itself (SIGTERM: flush, commit, close), and the child exits if the worker dies. Queries reach
the child through the worker's `/sql/` page, which forwards them to the child's loopback port.
The forecast processor (`streams.forecasting.processor`) runs here too, beside the store it reads;
its model fits run in a pool process of their own.

    python -m streams.history.process   (started by the worker; GPUFLOW_HISTORY_PORT set)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from infra.broker import free_port
from infra.config import Config, config_env, load_config
from infra.process import ChildProcess, die_with_parent
from infra.store import StoreError
from streams.base.prometheus import CONTENT_TYPE_LATEST
from streams.forecasting.processor import ForecastProcessor
from streams.history.metrics import METRICS_PATH, SinkMetrics
from streams.history.sink import HistorySink
from streams.history.sql import SQL_PATH, run_request

__all__ = ["STATUS_PATH", "HistoryProcess", "main"]

log = logging.getLogger(__name__)

PORT_ENV = "GPUFLOW_HISTORY_PORT"
LOOPBACK = "127.0.0.1"
STATUS_PATH = "/status/"


class HistoryProcess:
    """Parent side: start, address and stop the child that owns the store."""

    def __init__(self, config: Config) -> None:
        self.config = config
        # loopback only, whatever the worker's own web host: the worker proxies /sql/ to it
        self.port = free_port(LOOPBACK)
        self.url = f"http://{LOOPBACK}:{self.port}{SQL_PATH}"
        self.metrics_url = f"http://{LOOPBACK}:{self.port}{METRICS_PATH}"
        self.log_path = config.data_dir / "history.log"
        self.status_url = f"http://{LOOPBACK}:{self.port}{STATUS_PATH}"
        # in the worker's process group: a `kill` of the worker's group takes it along
        self._proc = ChildProcess("history process", self.log_path, own_group=False)
        self.restarts = 0
        self._client: Any = None
        self._restart_at = 0.0
        self._stopping = False

    def start(self) -> None:
        env = {**os.environ, **config_env(self.config), PORT_ENV: str(self.port)}
        pid = self._proc.start([sys.executable, "-m", "streams.history.process"], env)
        log.info("history process started pid=%s port=%s", pid, self.port)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stopping = True
        self._proc.stop(timeout_s)

    async def poll(self) -> dict[str, Any]:
        """The sink's status (restarting the child, with back-off, if it has died)."""
        import httpx

        if self._stopping:
            return {"state": "stopped"}
        if not self._proc.alive():
            return self._supervise()
        if self._client is None:  # one client: building one loads the CA store (~50 ms)
            self._client = httpx.AsyncClient(timeout=1.0, verify=False)  # loopback http only
        try:
            answer = await self._client.get(self.status_url)
            return {**answer.json(), "restarts": self.restarts}
        except (httpx.HTTPError, ValueError) as exc:  # starting, or wedged
            return {"state": "unreachable", "last_error": str(exc)[:200], "restarts": self.restarts}

    def _supervise(self) -> dict[str, Any]:
        now = time.monotonic()
        if self._proc.pid is not None and self._proc.exited():
            delay = min(30.0, 2.0 ** min(self.restarts, 5))
            self._restart_at = now + delay
            log.error("history process exited; restart in_s=%.0f log=%s", delay, self.log_path)
        if now >= self._restart_at:
            self.restarts += 1
            self.start()
        return {"state": "down", "restarts": self.restarts}


def _lower_priority(by: int) -> None:
    """Nice every thread of this process by `by` (on Linux a nice value is per thread; threads
    started later inherit it from the thread that starts them)."""
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # not Linux: the process's value
        with contextlib.suppress(OSError):
            os.nice(by)
        return
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that has just exited
            now = os.getpriority(os.PRIO_PROCESS, tid)
            os.setpriority(os.PRIO_PROCESS, tid, min(19, now + by))
    log.info("history process niced by=%d threads=%d", by, len(tids))


def _handler(sink: HistorySink) -> type[BaseHTTPRequestHandler]:
    metrics = SinkMetrics(sink)

    class SqlHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/") == STATUS_PATH.rstrip("/"):
                # the sink's state (the worker shows it on /health/ and /metrics/)
                return self._answer(200, sink.status())
            if self.path.rstrip("/") != METRICS_PATH:
                self.send_error(404)
                return
            data = metrics.exposition()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", "0"))
                body: Any = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                status, answer = 400, {"error": "body is not JSON"}
            else:
                try:
                    status, answer = run_request(sink.store, body)
                except StoreError as exc:  # not open yet: the store is unavailable
                    status, answer = 503, {"error": f"history store unavailable: {exc}"}
            self._answer(status, answer)

        def _answer(self, status: int, answer: Any) -> None:
            data = json.dumps(answer, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("sql %s", format % args)

    return SqlHandler


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    die_with_parent()
    parent = os.getppid()
    config = load_config()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sink = HistorySink(config).start()
    forecasts = None
    if config.forecast.enabled:  # reads the store the sink opens, fits in a pool of its own
        forecasts = ForecastProcessor(config, lambda: sink.store).start()
    server = ThreadingHTTPServer((LOOPBACK, int(os.environ[PORT_ENV])), _handler(sink))
    threading.Thread(target=server.serve_forever, name="sql-http", daemon=True).start()
    niced = config.store.nice == 0
    while not stop.wait(1.0):
        if os.getppid() != parent or sink.error is not None:  # orphaned, or the sink died
            break
        if not niced and sink.status()["state"] == "ok":  # opened at full speed, then yields
            niced = True
            _lower_priority(config.store.nice)
    server.shutdown()
    if forecasts is not None:
        forecasts.stop()
    sink.stop()
    raise SystemExit(1 if sink.error is not None else 0)


if __name__ == "__main__":
    main()
