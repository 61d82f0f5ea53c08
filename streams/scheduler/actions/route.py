"""Route: the global choice of region for a submitted job (`streams.scheduler.routing`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from streams.scheduler.routing import route

if TYPE_CHECKING:
    from streams.base.outbox import Outgoing
    from streams.scheduler.protocols import Routes

__all__ = ["Route"]


class Route:
    """Rank the regions for a JobSubmitted record and hand it to the best."""

    name = "route"

    def __init__(self, s: Routes) -> None:
        self.s = s

    def run(self, job: Mapping[str, Any], started_ns: int) -> list[Outgoing]:
        return route(self.s, job, started_ns=started_ns)
