"""Filter: the node's availability zone is one the job allows (a service replica's spread).

An allowed zone is `region/zone` (zone names repeat across regions) or a bare `zone`, which
matches that zone in every region. A job naming none may use any zone.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext, Status
from scorer.types import JobSpec

__all__ = ["NAME", "ZoneFilter", "zone_allowed"]

NAME = "zone"


def zone_allowed(allowed: tuple[str, ...], region: str, zone: str) -> bool:
    """Whether a node in `region`, zone `zone`, is in one of the `allowed` zones."""
    return not allowed or f"{region}/{zone}" in allowed or (bool(zone) and zone in allowed)


class ZoneFilter:
    name = NAME
    static = True

    def static_key(self, job: JobSpec) -> tuple[object, ...]:
        """What the mask depends on besides the nodes' inventory: the zones the job allows."""
        return (job.allowed_zones,)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        allowed = ctx.job.allowed_zones
        slots = ctx.slots
        if not allowed:
            return np.ones(slots.shape[0], bool)
        zones = ctx.state.zone[slots]
        ok = []
        for idx in np.unique(zones):
            node = ctx.state.spec(int(slots[int(np.argmax(zones == idx))]))
            if zone_allowed(allowed, node.region, node.zone):
                ok.append(idx)
        return np.isin(zones, ok)

    def explain(self, ctx: CycleContext, slot: int) -> Status:
        node = ctx.state.spec(slot)
        if zone_allowed(ctx.job.allowed_zones, node.region, node.zone):
            return Status.success()
        allowed = ", ".join(ctx.job.allowed_zones)
        zone = f"{node.region}/{node.zone}" if node.zone else f"{node.region} (no zone)"
        return Status.unresolvable(f"{zone} is not an allowed zone ({allowed})")
