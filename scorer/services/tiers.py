"""Where new replicas come from, in the seed's tiers, under the spread rule.

WARM: a loaded standby replica in one of the service's zones (serving within 100 ms).
NEIGHBOUR: a free GPU in an allowed zone or a neighbouring region (the model loads, 1-2 min).
COLD: a GPU reclaimed from preemptible batch work or a powered-down node (3-5 min).
DEGRADE: nothing left; the requests beyond capacity are shed or queued (the spec says which).

The spread rule: no zone holds more than ceil(max_zone_share x target) replicas. Only when the
rule leaves replicas unplaced is it relaxed (zone by zone, still fewest first) before degrading.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

__all__ = ["Grant", "Tier", "ZoneRoom", "plan_scale_in", "plan_scale_out", "zone_cap"]


class Tier(Enum):
    WARM = "WARM"
    NEIGHBOUR = "NEIGHBOUR"
    COLD = "COLD"
    DEGRADE = "DEGRADE"


@dataclass(frozen=True)
class ZoneRoom:
    """One zone as the scaler sees it: replicas the service has there, and room per tier
    (warm standbys; free GPUs; reclaimable GPUs), in replicas."""

    zone: str
    replicas: int = 0
    warm: int = 0
    free: int = 0
    reclaimable: int = 0

    def room(self, tier: Tier) -> int:
        return {Tier.WARM: self.warm, Tier.NEIGHBOUR: self.free, Tier.COLD: self.reclaimable}[tier]


@dataclass(frozen=True)
class Grant:
    tier: Tier
    zone: str  # "" for DEGRADE
    count: int


def zone_cap(target: int, share: float) -> int:
    """Most replicas one zone may hold when the service has `target` of them."""
    return max(1, math.ceil(share * target - 1e-9))


def _fill(
    rooms: Sequence[ZoneRoom], have: dict[str, int], left: int, cap: int | None
) -> tuple[list[Grant], int]:
    used: dict[tuple[Tier, str], int] = {}
    for tier in (Tier.WARM, Tier.NEIGHBOUR, Tier.COLD):
        while left > 0:
            open_ = [
                r
                for r in rooms
                if r.room(tier) - used.get((tier, r.zone), 0) > 0
                and (cap is None or have[r.zone] < cap)
            ]
            if not open_:
                break
            pick = min(open_, key=lambda r: (have[r.zone], r.zone))
            used[(tier, pick.zone)] = used.get((tier, pick.zone), 0) + 1
            have[pick.zone] += 1
            left -= 1
    grants = [Grant(t, z, n) for (t, z), n in used.items()]
    order = {t: i for i, t in enumerate(Tier)}
    return sorted(grants, key=lambda g: (order[g.tier], g.zone)), left


def plan_scale_out(
    rooms: Sequence[ZoneRoom], add: int, target: int, max_zone_share: float
) -> list[Grant]:
    """Grants for `add` more replicas (the service then wants `target`): warm first, then
    free GPUs, then cold, fewest-replica zone first, within the spread cap; then the cap
    relaxed; whatever is still missing is one DEGRADE grant."""
    have = {r.zone: r.replicas for r in rooms}
    grants, left = _fill(rooms, have, add, zone_cap(target, max_zone_share))
    if left > 0:  # spend the rooms the first pass did not
        rest = [_less(r, grants) for r in rooms]
        more, left = _fill(rest, have, left, None)
        grants = _merge(grants + more)
    if left > 0:
        grants.append(Grant(Tier.DEGRADE, "", left))
    return grants


def _less(room: ZoneRoom, grants: Sequence[Grant]) -> ZoneRoom:
    took = {g.tier: g.count for g in grants if g.zone == room.zone}
    return ZoneRoom(
        room.zone,
        room.replicas,
        room.warm - took.get(Tier.WARM, 0),
        room.free - took.get(Tier.NEIGHBOUR, 0),
        room.reclaimable - took.get(Tier.COLD, 0),
    )


def _merge(grants: Sequence[Grant]) -> list[Grant]:
    total: dict[tuple[Tier, str], int] = {}
    for g in grants:
        total[(g.tier, g.zone)] = total.get((g.tier, g.zone), 0) + g.count
    order = {t: i for i, t in enumerate(Tier)}
    return [
        Grant(t, z, n)
        for (t, z), n in sorted(total.items(), key=lambda i: (order[i[0][0]], i[0][1]))
    ]


def plan_scale_in(replicas: Mapping[str, int], remove: int) -> dict[str, int]:
    """Replicas to stop per zone: always from the zone holding the most (keeps the spread)."""
    have = dict(replicas)
    out: dict[str, int] = {}
    for _ in range(min(remove, sum(have.values()))):
        zone = max(have, key=lambda z: (have[z], z))
        have[zone] -= 1
        out[zone] = out.get(zone, 0) + 1
    return out
