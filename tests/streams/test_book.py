"""The book of state: a statement commits or discards as one, a release is safe twice, and a
rebuild from the logs gives the book the live worker had."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scorer import Assignment
from scorer.holds import preemptor_hold
from streams.scheduler.book import Book


def snapshot(book: Book) -> tuple[Any, ...]:
    return (
        {j: dict(e) for j, e in book.reservations.items()},
        {j: dict(e) for j, e in book.queue.items()},
        set(book.final),
        {j: e for j, e in book.epochs.items() if e},  # absent is epoch 0
        dict(book.state.jobs),
        book.state.free_gpus(),
    )


def entry(region: str = "eu", epoch: int = 0) -> dict[str, Any]:
    return {"region": region, "assignments": [], "released": False, "epoch": epoch}


def test_a_discarded_statement_leaves_the_book_as_it_was(world: Callable[..., Any]) -> None:
    book = world().s.book
    book.wait("a", {"region": "eu", "job": {"job_id": "a"}})
    before = snapshot(book)
    statement = book.statement()
    assert statement.reserve("a", [Assignment("n1", (0, 1))])
    assert statement.hold(preemptor_hold("b"), [Assignment("n1", (2,))])
    statement.place("a", entry(), 0)
    assert book.state.free_gpus() == {"A100-80": 5}  # taken at once: later steps see it
    statement.discard()
    assert snapshot(book) == before


def test_a_committed_statement_writes_everything_at_once(world: Callable[..., Any]) -> None:
    book = world().s.book
    book.wait("a", {"region": "eu", "job": {"job_id": "a"}})
    statement = book.statement()
    statement.reserve("a", [Assignment("n1", (0, 1))])
    statement.hold(preemptor_hold("b"), [Assignment("n1", (2,))])
    statement.place("a", entry(epoch=2), 2)
    assert "a" not in book.final and "a" in book.queue  # nothing written before commit
    statement.commit()
    assert book.reservations["a"]["epoch"] == 2 and "a" not in book.queue
    assert "a" in book.final and book.epoch("a") == 2
    assert set(book.state.jobs) == {"a", "hold:b"}


def test_a_refused_reservation_takes_nothing(world: Callable[..., Any]) -> None:
    book = world().s.book
    taken = book.statement()
    taken.reserve("a", [Assignment("n1", tuple(range(8)))])
    taken.commit()
    before = snapshot(book)
    statement = book.statement()
    assert not statement.reserve("b", [Assignment("n1", (0,))])  # 8 of 8 held by a
    statement.discard()
    assert snapshot(book) == before


def test_the_same_placement_again_is_not_given_back_by_a_discard(
    world: Callable[..., Any],
) -> None:
    book = world().s.book
    first = book.statement()
    first.reserve("a", [Assignment("n1", (0,))])
    first.commit()
    again = book.statement()
    assert again.reserve("a", [Assignment("n1", (0,))])  # a no-op in the arrays
    again.discard()
    assert "a" in book.state.jobs


def test_a_statement_is_used_once(world: Callable[..., Any]) -> None:
    statement = world().s.book.statement()
    statement.commit()
    with pytest.raises(RuntimeError, match="once"):
        statement.discard()


def test_release_is_safe_to_apply_twice(world: Callable[..., Any]) -> None:
    w = world()
    w.submit("j", gpu_count=4)
    book = w.s.book
    assert book.state.free_gpus() == {"A100-80": 4}
    assert book.release("j", {"region": "eu", "epoch": 0, "released": True})
    after = snapshot(book)
    assert not book.release("j", {"region": "eu", "epoch": 0, "released": True, "x": 1})
    assert snapshot(book) == after and len(book.released) == 1
    assert book.state.free_gpus() == {"A100-80": 8}


def test_a_replayed_end_changes_nothing(world: Callable[..., Any]) -> None:
    w = world()
    w.submit("j", gpu_count=4)
    w.report("j", "FINISHED")
    after = snapshot(w.s.book)
    w.follow(w.s.on_job_event(dict(w.events[-1])))
    assert snapshot(w.s.book) == after


def test_rebuild_gives_the_book_the_live_worker_had(
    world: Callable[..., Any], make_node: Callable[..., dict[str, Any]]
) -> None:
    w = world(make_node("n1"), make_node("n2", gpus=4))
    for i in range(5):
        w.submit(f"j{i}", gpu_count=3)  # 3 placed (two on n1, one on n2), 2 wait
    w.advance(5)
    w.report("j0", "FINISHED")
    w.report("j1", "EVICTED", progress=0.5)  # requeued at epoch 1, placed again or waiting
    w.advance(5)
    w.submit("big", gpu_count=8)  # waits behind the others
    live = snapshot(w.s.book)
    assert live[1] and any(e.get("released") for e in live[0].values())  # queue and markers
    rebuilt = w.restarted().s.book
    assert snapshot(rebuilt) == live
