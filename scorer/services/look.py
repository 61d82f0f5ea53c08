"""One look of a service's autoscaler, after `decide` said how many replicas serve: which
replicas stand by, which indices get a new replica (tier and zone), which stop, and the grants
the look reports. The streaming autoscaler and the in-process service replay both act on it,
so the two engines make the same decisions from the same inputs.

Replicas are numbered: the lowest `serving` indices serve, the next `standbys` stand by loaded
(a warm pool), higher indices stop. A missing index below `wanted` gets a new replica, in index
order, from the tiers (`plan_scale_out`: free GPUs, then reclaimed ones, fewest-replica zone
first under the spread cap); an index the tiers cannot place waits for the next look. The serving
replicas are the `serving` lowest-indexed loaded ones, so a loaded standby stands in at once
for a serving replica that is gone. The grants reported fill the serving slots this look must
fill: standbys stepping in (WARM), new serving replicas by tier, and one DEGRADE grant for those
left without room.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scorer.services.spec import ServiceSpec
from scorer.services.tiers import Grant, Tier, ZoneRoom, plan_scale_out

__all__ = ["Held", "Look", "Start", "plan_look", "ready_after_s", "ready_minutes", "serving_of"]


@dataclass(frozen=True)
class Held:
    """A live replica (the latest of its index): its zone and whether it has loaded."""

    index: int
    zone: str
    ready: bool


@dataclass(frozen=True)
class Start:
    """A new replica for `index`, from `tier`, in `zone`."""

    index: int
    zone: str
    tier: Tier


@dataclass(frozen=True)
class Look:
    serving: int  # replicas that serve after this look
    wanted: int  # ... and the standbys beside them
    grants: tuple[Grant, ...]  # for the serving replicas (WARM, NEIGHBOUR, COLD, DEGRADE)
    starts: tuple[Start, ...]  # new replicas, serving ones and standbys, in index order
    stops: tuple[int, ...]  # indices to stop (at or above `wanted`), highest first
    counted: int = 0  # starts the grants count (serving slots they fill)

    @property
    def degraded(self) -> bool:
        return any(g.tier is Tier.DEGRADE for g in self.grants)

    @property
    def refills(self) -> int:
        """New replicas the grants do not count: standbys, and replacements of serving
        replicas a standby stands in for meanwhile."""
        return len(self.starts) - self.counted


def ready_after_s(spec: ServiceSpec, tier: Tier) -> float:
    """Seconds from a start to a loaded replica: the model load on a free GPU, the cold start
    on a reclaimed one."""
    return float(spec.model_load_s if tier is Tier.NEIGHBOUR else spec.cold_start_s)


def plan_look(
    spec: ServiceSpec,
    before: int,
    serving: int,
    standbys: int,
    held: Sequence[Held],
    rooms: Mapping[str, tuple[int, int]],
) -> Look:
    """The look that takes a service from `before` serving replicas to `serving` (and
    `standbys` beside them), given its live replicas and each allowed zone's room as
    (free GPUs, GPUs reclaimable from preemptible work)."""
    wanted = serving + standbys
    live = {h.index: h for h in held}
    stops = tuple(sorted((i for i in live if i >= wanted), reverse=True))
    missing = [i for i in range(wanted) if i not in live]
    have: dict[str, int] = dict.fromkeys(rooms, 0)
    for h in live.values():
        if h.index < wanted and h.zone in have:
            have[h.zone] += 1
    per = max(1, spec.gpus_per_replica)
    zone_rooms = [
        ZoneRoom(z, have[z], 0, free // per, reclaimable // per)
        for z, (free, reclaimable) in sorted(rooms.items())
    ]
    planned = plan_scale_out(zone_rooms, len(missing), max(1, wanted), spec.max_zone_share)
    slots = [
        (g.tier, g.zone) for g in planned if g.tier is not Tier.DEGRADE for _ in range(g.count)
    ]
    starts = tuple(Start(i, z, t) for i, (t, z) in zip(missing, slots, strict=False))
    grants, covered = _serving_grants(live, starts, before, serving, wanted)
    return Look(serving, wanted, grants, starts, stops, covered)


def _serving_grants(
    live: Mapping[int, Held], starts: Sequence[Start], before: int, serving: int, wanted: int
) -> tuple[tuple[Grant, ...], int]:
    """Grants for the serving slots this look must fill: those newly wanted and those whose
    replica is gone. A slot whose own replica is loaded serves (WARM); else a loaded standby
    steps in (WARM); else the new replica's tier counts; else DEGRADE. Returns the grants and
    how many of the starts they count (the rest are refills)."""
    standbys = sorted(i for i, h in live.items() if i >= serving and h.ready)
    new = {s.index: s for s in starts}
    count: dict[tuple[Tier, str], int] = {}
    covered = degraded = 0
    for i in range(serving):
        own = live.get(i)
        if own is not None and (i < before or not own.ready):
            continue  # serving already, or on its way
        if own is not None:
            key = (Tier.WARM, own.zone)
        elif standbys:
            key = (Tier.WARM, live[standbys.pop(0)].zone)
        elif i in new:
            key, covered = (new[i].tier, new[i].zone), covered + 1
        else:
            degraded += 1
            continue
        count[key] = count.get(key, 0) + 1
    order = {t: n for n, t in enumerate(Tier)}
    grants = [
        Grant(t, z, n)
        for (t, z), n in sorted(count.items(), key=lambda i: (order[i[0][0]], i[0][1]))
    ]
    if degraded:
        grants.append(Grant(Tier.DEGRADE, "", degraded))
    return tuple(grants), covered


def ready_minutes(spec: ServiceSpec, tier: Tier) -> int:
    """Whole minutes from a start to a loaded replica, on a replay's minute clock."""
    return math.ceil(ready_after_s(spec, tier) / 60.0)


def serving_of(serving: int, held: Sequence[Held]) -> list[Held]:
    """The replicas that serve: the `serving` lowest-indexed loaded ones."""
    return sorted((h for h in held if h.ready), key=lambda h: h.index)[:serving]
