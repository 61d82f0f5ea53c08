"""EASY backfill reservations: the earliest start of a blocked gang, per GPU, by hand."""

from __future__ import annotations

import math

import pytest

from scorer.tenancy import earliest_start, held_now

INF = math.inf
NOW = 1_000.0


@pytest.mark.parametrize(
    ("free_at", "need", "chunk", "tp", "start", "gpus"),
    [
        # one node: 4 GPUs needed on it; n1 frees its 4th-earliest GPU at 300, n2 at 500
        (
            {"n1": [NOW, NOW, NOW + 200, NOW + 300], "n2": [NOW] + [NOW + 500] * 3},
            4, 4, 1, NOW + 300, {"n1": (0, 1, 2, 3)},
        ),
        # only 2 needed on one node: n1 has 2 free now -> start now; it takes the GPUs that
        # free last among those ready by then, which are the two free ones
        ({"n1": [NOW, NOW, 200.0 + NOW, 300.0 + NOW]}, 2, 2, 1, NOW, {"n1": (0, 1)}),
        # a node whose ends are unknown is never the earliest
        ({"n1": [NOW, NOW, NOW + 200, NOW + 300], "n2": [INF] * 4}, 2, 2, 1, NOW, {"n1": (0, 1)}),
        # a spread gang of 6 in TP groups of 2: at 200 n1 has 3 ready -> 2 usable, n2 2 -> 4;
        # at 300 n1 has 4, n2 2 -> 6
        (
            {"n1": [NOW, NOW, 200.0 + NOW, 300.0 + NOW], "n2": [NOW, 200.0 + NOW, INF, INF]},
            6, 2, 2, NOW + 300, {"n1": (0, 1, 2, 3), "n2": (0, 1)},
        ),
        # a node too small for the gang is never chosen; unknown ends: never
        ({"n1": [NOW, NOW], "n2": [INF, INF, INF, INF]}, 4, 4, 1, None, None),
    ],
)  # fmt: skip
def test_earliest_start(
    free_at: dict[str, list[float]],
    need: int,
    chunk: int,
    tp: int,
    start: float | None,
    gpus: dict[str, tuple[int, ...]] | None,
) -> None:
    got = earliest_start("g", free_at, need=need, chunk=chunk, tp=tp)
    if start is None:
        assert got is None
        return
    assert got is not None and got.start_ms == start and dict(got.gpus) == gpus


def test_the_reservation_prefers_gpus_busy_now_and_holds_only_those_free() -> None:
    # need all 4 of n1 (ready at 300, n2 at 900): the two free now are held for it
    free_at = {"n1": [NOW, NOW, NOW + 200, NOW + 300], "n2": [NOW + 900] * 4}
    got = earliest_start("g", free_at, need=4, chunk=4, tp=1)
    assert got is not None and got.start_ms == NOW + 300
    assert held_now(got, free_at, NOW) == {"n1": (0, 1)}  # all 4 needed: the free two are held
    # need 3: the 3rd earliest GPU frees at 200, when all four are ready; the reservation
    # takes the three freeing last (1 at 100, 2 and 3 at 200) and leaves GPU 0, free now, alone
    free_at = {"n1": [NOW, NOW + 100, NOW + 200, NOW + 200]}
    got = earliest_start("g", free_at, need=3, chunk=3, tp=1)
    assert got is not None and got.start_ms == NOW + 200 and dict(got.gpus) == {"n1": (1, 2, 3)}
    assert held_now(got, free_at, NOW) == {}  # nothing free now is needed: GPU 0 backfills
