"""One look (scorer.services.look): which indices get new replicas from which tier and zone,
which stop, and the grants the serving slots get; the serving replicas of a look."""

from __future__ import annotations

import pytest

from scorer.services import Held, Start, Tier, parse_service, plan_look, serving_of

SPEC = parse_service({
    "name": "chat", "params_b": 1, "precision": "FP16", "gpus_per_replica": 2, "batch": 8,
    "context": 1024, "min_replicas": 1, "max_replicas": 16, "regions": ["r"],
    "max_zone_share": 0.5,
})  # fmt: skip
A, B = "r/a", "r/b"


def _grants(look: object) -> list[tuple[str, str, int]]:
    return [(g.tier.value, g.zone, g.count) for g in look.grants]  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("case", "before", "serving", "standbys", "held", "rooms", "starts", "grants", "stops"),
    [
        # 3 + 1 from nothing: 2 free GPUs (1 replica) in a, 4 in b, 4 reclaimable in a:
        # free first, fewest-replica zone first under the cap ceil(0.5 x 4) = 2, then cold
        ("fresh", 0, 3, 1, [], {A: (2, 4), B: (4, 0)},
         [Start(0, A, Tier.NEIGHBOUR), Start(1, B, Tier.NEIGHBOUR), Start(2, B, Tier.NEIGHBOUR),
          Start(3, A, Tier.COLD)],
         [("NEIGHBOUR", A, 1), ("NEIGHBOUR", B, 2)], ()),
        # 2 -> 3 serving: the loaded standby at index 2 serves (WARM), index 3 is a new standby
        ("warm", 2, 3, 1, [Held(0, A, True), Held(1, B, True), Held(2, A, True)],
         {A: (0, 0), B: (2, 0)}, [Start(3, B, Tier.NEIGHBOUR)], [("WARM", A, 1)], ()),
        # a standby still loading is on its way: no grant for it
        ("loading", 2, 3, 0, [Held(0, A, True), Held(1, B, True), Held(2, A, False)],
         {A: (8, 0), B: (8, 0)}, [], [], ()),
        # serving index 0 is gone: the loaded standby at 2 steps in (WARM), its replacement
        # is a refill, not a grant
        ("lost", 2, 2, 1, [Held(1, B, True), Held(2, B, True)], {A: (2, 0), B: (0, 0)},
         [Start(0, A, Tier.NEIGHBOUR)], [("WARM", B, 1)], ()),
        # 4 -> 2 serving (and 1 standby): the highest indices stop
        ("in", 4, 2, 1, [Held(i, A if i % 2 else B, True) for i in range(5)], {A: (0, 0)},
         [], [], (4, 3)),
        # no room at all: the missing serving replica degrades and waits for the next look
        ("degrade", 1, 2, 0, [Held(0, A, True)], {A: (1, 0), B: (0, 1)}, [],
         [("DEGRADE", "", 1)], ()),
    ],
)  # fmt: skip
def test_plan_look(
    case: str,
    before: int,
    serving: int,
    standbys: int,
    held: list[Held],
    rooms: dict[str, tuple[int, int]],
    starts: list[Start],
    grants: list[tuple[str, str, int]],
    stops: tuple[int, ...],
) -> None:
    look = plan_look(SPEC, before, serving, standbys, held, rooms)
    assert list(look.starts) == starts, case
    assert _grants(look) == grants, case
    assert look.stops == stops, case
    assert look.wanted == serving + standbys
    counted = sum(n for t, _, n in grants if t in ("NEIGHBOUR", "COLD"))
    assert look.refills == len(starts) - counted


def test_the_serving_replicas_are_the_lowest_loaded_ones() -> None:
    held = [Held(0, A, False), Held(1, B, True), Held(2, A, True), Held(3, B, True)]
    assert [h.index for h in serving_of(2, held)] == [1, 2]
    assert serving_of(0, held) == []
