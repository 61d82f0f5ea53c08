"""Counters and lag samples the worker exposes on its web port (`/metrics/`)."""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streams.base.prometheus import record_telemetry

__all__ = ["Metrics"]


@dataclass
class Metrics:
    """Events processed per stream, and recent lag (now - event ts) of telemetry."""

    started: float = field(default_factory=time.monotonic)
    events: Counter[str] = field(default_factory=Counter)
    telemetry_lag_ms: deque[float] = field(default_factory=lambda: deque(maxlen=20_000))
    # per consumer: records read, dead-lettered, and faults caught (streams.runtime.runtime.guard)
    consumed: Counter[str] = field(default_factory=Counter)
    dead_lettered: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    ignored: Counter[str] = field(default_factory=Counter)  # valid but out of date / unknown
    batches: Counter[str] = field(default_factory=Counter)  # per agent (streams.worker.batching)

    def seen(self, stream: str) -> None:
        self.events[stream] += 1

    def fault(self, consumer: str) -> None:
        self.faults[consumer] += 1

    def telemetry(self, *ts_ms: int) -> None:
        """Telemetry events applied (their report times, ms): counted, and their lag kept."""
        self.events["telemetry"] += len(ts_ms)
        now_ms = time.time() * 1000
        lags_ms = [now_ms - ts for ts in ts_ms]
        self.telemetry_lag_ms.extend(lags_ms)
        record_telemetry(*(lag / 1000 for lag in lags_ms))  # the same samples for Prometheus

    def snapshot(self) -> dict[str, Any]:
        lag = np.asarray(self.telemetry_lag_ms, dtype=float)
        return {
            "uptime_s": round(time.monotonic() - self.started, 1),
            "events": dict(self.events),
            "consumed": dict(self.consumed),
            "dead_lettered": dict(self.dead_lettered),
            "faults": dict(self.faults),
            "ignored": dict(self.ignored),
            "batches": dict(self.batches),  # consumed / batches: the mean batch taken
            "telemetry_lag_ms": {
                "samples": int(lag.size),
                "p50": float(np.percentile(lag, 50)) if lag.size else None,
                "p99": float(np.percentile(lag, 99)) if lag.size else None,
            },
        }
