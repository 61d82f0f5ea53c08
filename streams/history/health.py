"""Whether the history sink's store is failing: the sink's state (starting, ok,
store_unavailable, backing_off), since when it fails, the last error, and the back-off between
tries (0.2 s doubling to 5 s, cut short when the sink stops). `HistorySink.status()` reports it.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["StoreHealth"]

log = logging.getLogger(__name__)

_RETRY_S = (0.2, 0.5, 1.0, 2.0, 5.0)


class StoreHealth:
    """The store's failures as the sink sees them; `failed` backs off, `recovered` resets."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self.failures = 0
        self.failing_since: float | None = None
        self.last_error = ""
        self.state = "starting"

    def failed(self, state: str, exc: Exception) -> float:
        """Record a failure and wait out its back-off (interrupted by stop); the delay."""
        delay = _RETRY_S[min(self.failures, len(_RETRY_S) - 1)]
        self.failures += 1
        self.state = state
        self.last_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        if self.failing_since is None:
            self.failing_since = time.monotonic()
            log.error("history store failing state=%s error=%s", state, self.last_error)
        self._stop.wait(delay)
        return delay

    def recovered(self) -> None:
        if self.failing_since is not None:
            log.warning(
                "history store back after_s=%.1f failures=%d",
                time.monotonic() - self.failing_since,
                self.failures,
            )
        self.failures, self.failing_since, self.state = 0, None, "ok"
