"""Scale-out tiers under the spread rule, and scale-in from the fullest zone."""

from __future__ import annotations

import pytest

from scorer.services import Grant, Tier, ZoneRoom, plan_scale_in, plan_scale_out, zone_cap


@pytest.mark.parametrize(
    ("target", "share", "want"), [(1, 0.5, 1), (4, 0.5, 2), (5, 0.5, 3), (10, 0.34, 4), (3, 1.0, 3)]
)
def test_zone_cap(target: int, share: float, want: int) -> None:
    assert zone_cap(target, share) == want  # max(1, ceil(share x target))


def test_warm_first_then_free_then_cold() -> None:
    rooms = [ZoneRoom("a", replicas=1, warm=1, free=1, reclaimable=5)]
    grants = plan_scale_out(rooms, add=4, target=5, max_zone_share=1.0)
    assert grants == [
        Grant(Tier.WARM, "a", 1),
        Grant(Tier.NEIGHBOUR, "a", 1),
        Grant(Tier.COLD, "a", 2),
    ]


def test_spread_fills_the_fewest_replica_zone_first_within_the_cap() -> None:
    rooms = [ZoneRoom("a", replicas=2, free=9), ZoneRoom("b", free=9), ZoneRoom("c", free=9)]
    grants = plan_scale_out(rooms, add=4, target=6, max_zone_share=0.34)  # cap ceil(2.04) = 3
    assert {g.zone: g.count for g in grants} == {"b": 2, "c": 2}  # ties go by zone name
    placed = {"a": 2}
    for g in grants:
        placed[g.zone] = placed.get(g.zone, 0) + g.count
    assert max(placed.values()) <= 3 and sum(placed.values()) == 6


def test_a_lost_zone_moves_replicas_to_the_others_and_relaxes_spread_only_when_needed() -> None:
    # zone a is gone (no room, no replicas); b and c take all 4, beyond the 0.5 cap only if forced
    rooms = [ZoneRoom("a"), ZoneRoom("b", replicas=1, free=2), ZoneRoom("c", replicas=1, free=8)]
    grants = plan_scale_out(rooms, add=4, target=6, max_zone_share=0.5)
    assert all(g.zone in ("b", "c") for g in grants)
    assert sum(g.count for g in grants) == 4
    assert {g.zone: g.count for g in grants} == {"b": 2, "c": 2}  # 3 + 3: within the cap


def test_nothing_left_is_one_degrade_grant() -> None:
    rooms = [ZoneRoom("a", free=1)]
    grants = plan_scale_out(rooms, add=3, target=3, max_zone_share=0.5)
    assert grants == [Grant(Tier.NEIGHBOUR, "a", 1), Grant(Tier.DEGRADE, "", 2)]


def test_scale_in_takes_from_the_fullest_zone() -> None:
    assert plan_scale_in({"a": 4, "b": 2, "c": 1}, 3) == {"a": 2, "b": 1}
    assert plan_scale_in({"a": 1}, 5) == {"a": 1}
