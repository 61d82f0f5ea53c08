"""What the autoscaler knows of one service: its spec and scaling state, the load its zones
report (the rate now, and a per-minute history for the in-worker seasonal forecast), and the
attainment counters of its looks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scorer.services import ScaleState, ServiceSpec, seasonal_forecast
from scorer.services.seasonal import WEEK_MIN

__all__ = ["HORIZON_MIN", "ServiceBook"]

HORIZON_MIN = 15  # minutes the autoscaler looks ahead
_KEEP_MIN = WEEK_MIN + 2 * HORIZON_MIN  # per-minute history kept for the seasonal forecast


@dataclass
class ServiceBook:
    """What the autoscaler knows of one service."""

    spec: ServiceSpec
    state: ScaleState
    partition: int = 0  # of the specs topic: the worker holding it scales the service
    minutes: list[float] = field(default_factory=list)  # per-minute mean rate, oldest first
    last_minute: int | None = None
    minute_sum: float = 0.0
    minute_n: int = 0
    by_zone: dict[str, tuple[float, int]] = field(default_factory=dict)  # zone -> (rps, ts)
    previous_rps: float | None = None
    looks: int = 0
    within_slo: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the last decision, for the page

    def hear(self, zone: str, rps: float, ts_ms: int) -> None:
        """One zone's load report: the zone's rate now, and the service's per-minute mean."""
        self.by_zone[zone] = (rps, ts_ms)
        total = self.observed(ts_ms)
        minute = ts_ms // 60_000
        if self.last_minute is not None and minute > self.last_minute:
            mean = self.minute_sum / max(1, self.minute_n)
            gap = min(minute - self.last_minute, _KEEP_MIN)
            self.minutes.extend([mean] * gap)  # a silent minute holds the last rate
            del self.minutes[:-_KEEP_MIN]
            self.minute_sum, self.minute_n = 0.0, 0
        self.last_minute = minute if self.last_minute is None else max(self.last_minute, minute)
        self.minute_sum += total
        self.minute_n += 1

    def observed(self, now_ms: int, max_age_ms: int = 60_000) -> float:
        """The rate now: the sum of each zone's last report, those under a minute old."""
        return sum(r for r, ts in self.by_zone.values() if now_ms - ts <= max_age_ms)

    def seasonal(self, now_rps: float, horizon_min: int) -> list[float]:
        """The in-worker forecast: seasonal on the minutes heard, the one under way at its
        rate now."""
        return [float(x) for x in seasonal_forecast([*self.minutes, now_rps], horizon_min)]
