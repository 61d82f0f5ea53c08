"""The history sink in a child process of the worker, so it does not share the worker's GIL.

Decoding and converting every topic for ClickHouse is CPU-bound Python; in the worker's own
process it slowed telemetry ingestion (10,000 nodes: lag p99 0.9 s -> 2.4 s) and decisions.
The worker still owns the chDB directory: it starts this child with itself, stops it with
itself (SIGTERM: flush, commit, close), and the child exits if the worker dies. Queries reach
the child through the worker's `/sql/` page, which forwards them to the child's loopback port.
The forecast processor (`streams.forecasting`) runs here too, beside the store it reads; its
model fits run in a pool process of their own.

    python -m streams.history_process   (started by the worker; GPUFLOW_HISTORY_PORT set)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from infra.broker import free_port
from infra.config import Config, config_env, load_config
from infra.process import ChildProcess
from streams.forecasting import ForecastProcessor
from streams.history import HistorySink
from streams.web import SQL_PATH, run_request

__all__ = ["HistoryProcess", "main"]

log = logging.getLogger(__name__)

PORT_ENV = "GPUFLOW_HISTORY_PORT"


class HistoryProcess:
    """Parent side: start, address and stop the child that owns the store."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.port = free_port(config.worker.web_host)
        self.url = f"http://{config.worker.web_host}:{self.port}{SQL_PATH}"
        self.log_path = config.data_dir / "history.log"
        # in the worker's process group: a `kill` of the worker's group takes it along
        self._proc = ChildProcess("history process", self.log_path, own_group=False)

    def start(self) -> None:
        env = {**os.environ, **config_env(self.config), PORT_ENV: str(self.port)}
        pid = self._proc.start([sys.executable, "-m", "streams.history_process"], env)
        log.info("history process started pid=%s port=%s", pid, self.port)

    def stop(self, timeout_s: float = 30.0) -> None:
        self._proc.stop(timeout_s)


def _die_with_parent() -> None:
    # Linux: get SIGTERM when the worker dies, even by SIGKILL, so the chDB directory is freed.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _handler(sink: HistorySink) -> type[BaseHTTPRequestHandler]:
    class SqlHandler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            try:
                length = int(self.headers.get("Content-Length", "0"))
                body: Any = json.loads(self.rfile.read(length) or b"null")
            except ValueError:
                status, answer = 400, {"error": "body is not JSON"}
            else:
                status, answer = run_request(sink.store, body)
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
    _die_with_parent()
    parent = os.getppid()
    config = load_config()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    sink = HistorySink(config).start()
    forecasts = ForecastProcessor(config, sink.store).start() if config.forecast.enabled else None
    server = ThreadingHTTPServer(
        (config.worker.web_host, int(os.environ[PORT_ENV])), _handler(sink)
    )
    threading.Thread(target=server.serve_forever, name="sql-http", daemon=True).start()
    while not stop.wait(1.0):
        if os.getppid() != parent or sink.error is not None:  # orphaned, or the sink died
            break
    server.shutdown()
    if forecasts is not None:
        forecasts.stop()
    sink.stop()
    raise SystemExit(1 if sink.error is not None else 0)


if __name__ == "__main__":
    main()
