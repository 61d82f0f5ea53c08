"""Place: the placer's proposal under quota; a job may start only where it does not delay the
region's backfill reservation (`queueing.respect_reservation`); then it is committed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streams.scheduler.actions.base import Refusal
from streams.scheduler.queueing import respect_reservation

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.actions.base import Attempt
    from streams.scheduler.protocols import Retries

__all__ = ["Place", "needs_reasons"]


class Place:
    name = "place"

    def __init__(self, s: Retries) -> None:
        self.s = s

    def run(self, attempt: Attempt) -> list[Outgoing] | None:
        routed, region = attempt.routed, attempt.region
        result, code, reason = self.s.propose(routed, region, explain=needs_reasons(routed))
        if result.placed:
            result, code, reason = respect_reservation(self.s, routed, region, result)
        if result.placed:
            placed = self.s.commit(routed, result, attempt.started_ns)
            if placed is not None:
                return [placed]
        attempt.refusal = Refusal(result, code, reason)
        return None


def needs_reasons(routed: Mapping[str, Any]) -> bool:
    """Whether a refusal here needs its reasons (only a decision that is sent does).

    A failed retry stays queued silently; a refusal with regions left to try spills over,
    and needs only "could it ever fit here" until a queue region is chosen.
    """
    if routed.get("_retry"):
        return False
    return not (routed.get("candidates") and routed.get("queue_region"))
