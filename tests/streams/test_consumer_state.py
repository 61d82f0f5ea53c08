"""StallWatch (a partition is stalled when its fetched records stop reaching the stream) and
the count of records the streams have not been handed yet."""

from __future__ import annotations

from typing import Any

import pytest

from streams.runtime.consumer_state import StallWatch, unread


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _row(read: int | None, position: int, paused: bool = False) -> dict[str, Any]:
    return {"read_offset": read, "position": position, "paused": paused}


def test_fetched_but_unhanded_records_that_do_not_move_are_a_stall() -> None:
    clock = Clock()
    watch = StallWatch(after_s=30, clock=clock)
    assert watch.observe({"jobs/1": _row(35, 75)}) == []
    clock.now += 29
    assert watch.observe({"jobs/1": _row(35, 75)}) == []
    clock.now += 1
    assert watch.observe({"jobs/1": _row(35, 75)}) == ["jobs/1"]
    assert watch.stalled == ["jobs/1"]


def test_a_stream_working_through_its_buffer_is_not_stalled() -> None:
    clock = Clock()
    watch = StallWatch(after_s=30, clock=clock)
    for read in range(0, 70, 5):
        watch.observe({"jobs/1": _row(read, 75)})
        clock.now += 10  # behind all along, but moving
    assert watch.stalled == []


def test_caught_up_empty_and_paused_partitions_are_never_stalled() -> None:
    clock = Clock()
    watch = StallWatch(after_s=30, clock=clock)
    rows = {
        "caught-up/0": _row(74, 75),
        "empty/0": _row(None, 0),
        "paused/0": _row(3, 75, paused=True),
        "never-handed/0": _row(None, 40),
    }
    watch.observe(rows)
    clock.now += 60
    assert watch.observe(rows) == ["never-handed/0"]


def test_a_stall_that_clears_is_forgotten() -> None:
    clock = Clock()
    watch = StallWatch(after_s=30, clock=clock)
    watch.observe({"jobs/1": _row(35, 75)})
    clock.now += 31
    assert watch.observe({"jobs/1": _row(35, 75)}) == ["jobs/1"]
    assert watch.observe({"jobs/1": _row(74, 75)}) == []
    clock.now += 1
    assert watch.observe({"jobs/1": _row(74, 90)}) == []  # behind again: a fresh start


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # read up to offset 9 of 12 held: 10 and 11 unread
        ({"t/0": {"highwater": 12, "read_offset": 9}}, 2),
        # nothing read yet: from the committed offset (5) to the highwater (8)
        ({"t/0": {"highwater": 8, "read_offset": None, "committed": 5}}, 3),
        # caught up on one partition, 4 behind on the other; another topic's lag not counted
        (
            {
                "t/0": {"highwater": 7, "read_offset": 6},
                "t/1": {"highwater": 9, "read_offset": 4},
                "u/0": {"highwater": 100, "read_offset": 0},
            },
            4,
        ),
        # no fetch answered yet: no highwater, nothing known to be unread
        ({"t/0": {"highwater": None, "read_offset": None}}, 0),
    ],
)
def test_unread_counts_records_past_what_the_streams_were_handed(
    rows: dict[str, dict[str, Any]], expected: int
) -> None:
    assert unread(rows, "t") == expected
