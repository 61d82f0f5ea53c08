"""The worker's Faust `Worker`: a bounded graceful leave on SIGTERM, and no spinner.

Faust's worker draws a progress spinner at levels of WARN and above, and for it sets the root
logger to DEBUG with a handler that spins on every record: every `log.debug` in Faust, mode and
aiokafka (several per message produced) then builds a `LogRecord` and runs the handlers. Our
worker logs to a file, not a terminal, so it keeps no spinner and the configured level stays the
root's level (`test_shutdown.py`).

Graceful leave on SIGTERM, within a bound.

On SIGTERM Faust stops the app: streams finish the event in hand, the consumer commits what
was processed, and aiokafka sends LeaveGroup, so the group rebalances at once instead of
waiting a session timeout for the member to be declared dead. A watchdog bounds the whole
shutdown: a worker still running `worker.shutdown_timeout_s` after the signal exits with
status 3 (its partitions then move after the session timeout, and at-least-once delivery with
idempotent decisions covers anything processed but not committed).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from faust.worker import Worker

__all__ = ["TIMED_OUT_EXIT", "GracefulWorker"]

log = logging.getLogger(__name__)

TIMED_OUT_EXIT = 3


class GracefulWorker(Worker):
    """Faust's worker with a bounded SIGTERM shutdown."""

    def __init__(self, *args: Any, shutdown_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.shutdown_timeout_s = shutdown_timeout_s
        self._term_at: float | None = None
        self.spinner = None  # no terminal to spin on; see the module docstring

    def _on_sigterm(self) -> None:
        if self._term_at is None:
            self._term_at = time.monotonic()
            log.warning(
                "SIGTERM: committing, leaving the group, exiting within %.0fs",
                self.shutdown_timeout_s,
            )
            threading.Thread(target=self._watchdog, name="shutdown-watchdog", daemon=True).start()
        super()._on_sigterm()

    def _watchdog(self) -> None:
        time.sleep(self.shutdown_timeout_s)
        log.error("shutdown took longer than %.0fs; exiting now", self.shutdown_timeout_s)
        logging.shutdown()
        os._exit(TIMED_OUT_EXIT)

    def stop_and_shutdown(self) -> None:
        super().stop_and_shutdown()
        if self._term_at is not None:
            log.warning("stopped in_s=%.2f after SIGTERM", time.monotonic() - self._term_at)
