"""InsertLane: one batch in flight, outcomes collected in submission order."""

from __future__ import annotations

import threading

import pytest

from infra.store import StoreError
from infra.store.batching import Batch
from streams.history.writer import InsertLane


def test_one_insert_in_flight_and_its_outcome() -> None:
    gate, written = threading.Event(), []

    def insert(table: str, data: list[int]) -> int:
        gate.wait(5)
        if table == "bad":
            raise StoreError("refused")
        written.append(table)
        return len(data)

    lane = InsertLane(insert)
    first = Batch(offsets={("t", 0): 3})
    lane.submit(first, [("a", [1, 2]), ("b", [3])], 0.0)
    assert lane.busy and not lane.ready()
    with pytest.raises(RuntimeError):
        lane.submit(Batch(), [], 0.0)  # a second batch waits for the first's outcome
    gate.set()
    done = lane.wait()
    assert done is not None and done.batch is first and done.error is None
    assert (done.rows, done.done, written) == (3, ["a", "b"], ["a", "b"])
    lane.submit(Batch(), [("a", [1]), ("bad", [2]), ("c", [3])], 0.0)
    failed = lane.wait()
    assert failed is not None and isinstance(failed.error, StoreError)
    assert failed.done == ["a"] and written == ["a", "b", "a"]  # stops at the failure
    assert lane.wait() is None and not lane.busy
    lane.close()


def test_other_errors_reach_the_caller() -> None:
    def insert(table: str, data: object) -> int:
        raise ValueError("a bug")

    lane = InsertLane(insert)
    lane.submit(Batch(), [("a", [])], 0.0)
    with pytest.raises(ValueError):
        lane.wait()
    lane.close()
