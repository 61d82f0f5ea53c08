"""Refuse: a job the placer refused spills over to its next region, looks for victims and
waits in its queue region, or is REJECTED with every reason (`outcomes.refused`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streams.scheduler.outcomes import refused

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.actions.base import Attempt
    from streams.scheduler.protocols import Refuses

__all__ = ["Refuse"]


class Refuse:
    name = "refuse"

    def __init__(self, s: Refuses) -> None:
        self.s = s

    def run(self, attempt: Attempt) -> list[Outgoing] | None:
        if attempt.refusal is None:
            return None  # nothing proposed before this action: not for it to decide
        r = attempt.refusal
        return refused(self.s, attempt.routed, r.result, attempt.started_ns, r.code, r.reason)
