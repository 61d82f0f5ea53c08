"""Typed holds: every kind round-trips through the key `ClusterState` and the changelogs keep,
and keys written before holds were typed parse as the hold they were."""

from __future__ import annotations

import pytest

from scorer.holds import (
    Hold,
    HoldKind,
    backfill_hold,
    is_hold,
    move_key,
    parse_hold,
    preemptor_hold,
)


@pytest.mark.parametrize(
    ("hold", "key"),
    [
        (preemptor_hold("j1"), "hold:j1"),  # as streams.tenancy.HOLD + job wrote it
        (backfill_hold(), "hold:backfill"),  # as streams.queueing's pass hold
        (Hold(HoldKind.MOVE, "j1"), "j1#move"),  # as scorer.replan's hold_key
        (Hold(HoldKind.ROOM, "gang"), "gang#room"),  # as the defragmentation room
    ],
)
def test_key_round_trips(hold: Hold, key: str) -> None:
    assert hold.key == key
    assert parse_hold(key) == hold and is_hold(key)


@pytest.mark.parametrize("job_id", ["j1", "a:b", "#move", "x#moved"])
def test_a_job_id_is_no_hold(job_id: str) -> None:
    assert parse_hold(job_id) is None and not is_hold(job_id)


def test_move_key_is_the_replanners() -> None:
    from scorer.replan import hold_key

    assert hold_key("x") == move_key("x") == "x#move"


def test_backfill_has_no_job_and_the_others_need_one() -> None:
    with pytest.raises(ValueError, match="BACKFILL"):
        Hold(HoldKind.BACKFILL, "j")
    with pytest.raises(ValueError, match="PREEMPTOR"):
        Hold(HoldKind.PREEMPTOR, "")
