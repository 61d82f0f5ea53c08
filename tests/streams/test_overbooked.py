"""GPUs booked twice, judged from the logs alone, when jobs migrate (`streams.overbooking`)."""

from __future__ import annotations

from typing import Any

import pytest

from streams.scheduler.overbooking import overbooked


def _placed(job_id: str, ts: int, node: str, gpu: int = 0) -> dict[str, Any]:
    slot = {"node_id": node, "gpu_indices": [gpu], "gpu_milli": 1000}
    return {"job_id": job_id, "ts": ts, "outcome": "PLACED", "epoch": 0, "assignments": [slot]}


def _move(job_id: str, ts: int, node: str, hold_until: int | None = None) -> dict[str, Any]:
    slot = {"node_id": node, "gpu_indices": [0], "gpu_milli": 1000}
    return {"job_id": job_id, "ts": ts, "hold_until_ts": hold_until, "to_assignments": [slot]}


def _event(job_id: str, kind: str, ts: int) -> dict[str, Any]:
    return {"job_id": job_id, "type": kind, "ts": ts, "epoch": 0}


# job a: placed on n1 at t=0, moved to n2 (decided t=10); what b or c may take, and when
CASES = [
    # confirmed at t=20: n1 is free from then on, so b at t=25 shares nothing
    ("confirmed move frees its source", [_event("a", "MIGRATED", 20)],
     [_placed("b", 25, "n1")], []),
    # no MIGRATED: a still holds n1 when b is placed on it at t=25
    ("unconfirmed move keeps its source", [], [_placed("b", 25, "n1")], ["n1[0] holds 2000 milli"]),
    # the target is held from the decision (t=10): c on n2 at t=15 books it twice
    ("target held from the decision", [_event("a", "MIGRATED", 20)],
     [_placed("c", 15, "n2")], ["n2[0] holds 2000 milli"]),
    # never confirmed, hold until t=30: c on n2 at t=35 is fine ...
    ("expired hold frees the target", [], [_placed("c", 35, "n2")], []),
    # ... at t=25 it is not
    ("live hold keeps the target", [], [_placed("c", 25, "n2")], ["n2[0] holds 2000 milli"]),
    # moved, then finished at t=40: n2 is free for c at t=45
    ("the moved job's end frees its target",
     [_event("a", "MIGRATED", 20), _event("a", "FINISHED", 40)], [_placed("c", 45, "n2")], []),
]  # fmt: skip


@pytest.mark.parametrize(("case", "events", "others", "expected"), CASES, ids=[c[0] for c in CASES])
def test_moves_on_the_log_timeline(
    case: str, events: list[dict[str, Any]], others: list[dict[str, Any]], expected: list[str]
) -> None:
    decisions = [_placed("a", 0, "n1"), *others]
    assert overbooked(decisions, events, [_move("a", 10, "n2", hold_until=30)]) == expected


def test_without_the_moves_a_confirmed_move_reads_as_a_double_booking() -> None:
    """What the integration tests saw before they read the migration log too."""
    decisions = [_placed("a", 0, "n1"), _placed("b", 25, "n1")]
    assert overbooked(decisions, [_event("a", "MIGRATED", 20)]) == ["n1[0] holds 2000 milli"]
