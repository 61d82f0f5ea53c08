"""Defer: hold a deferrable job for its green window, keep low-priority work out of the
forecast headroom (`streams.scheduler.outcomes.forecast_gate`); off without forecasts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams.scheduler.convert import job_spec
from streams.scheduler.outcomes import forecast_gate

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.actions.base import Attempt
    from streams.scheduler.protocols import Refuses

__all__ = ["Defer"]


class Defer:
    name = "defer"

    def __init__(self, s: Refuses) -> None:
        self.s = s

    def run(self, attempt: Attempt) -> list[Outgoing] | None:
        if not self.s.forecasts:
            return None
        spec = job_spec(attempt.routed["job"])
        return forecast_gate(self.s, attempt.routed, spec, attempt.started_ns)
