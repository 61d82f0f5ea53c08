"""What `Ledger.prune` forgets: finished jobs past the horizon, and records of jobs that have no
final decision here once the newest of them is past it (an end redelivered after its job was
forgotten, a job routed on and never decided here), so the ledger stays live jobs plus the
horizon however its logs arrive."""

from __future__ import annotations

from streams.ledger.ledger import Ledger

HORIZON = 60_000


def _ledger() -> Ledger:
    ledger = Ledger()
    ledger.final["done"] = (0, "PLACED", 1_000, b"d")
    ledger.ended["done"] = {0: ("FINISHED", 2_000)}
    ledger.routed["done"] = (1, 900)
    ledger.final["running"] = (0, "PLACED", 1_000, b"r")  # no end: holds GPUs, always kept
    ledger.ended["late"] = {0: ("FINISHED", 3_000)}  # redelivered after "late" was pruned
    ledger.migrated["late"] = [{"type": "MIGRATED", "job_id": "late", "ts": 2_500}]
    ledger.moves["moved"] = [{"event_id": "m1", "job_id": "moved", "ts": 2_000}]
    ledger.routed["elsewhere"] = (2, 1_500)  # handed to another worker, decided there later
    ledger.routed["recent"] = (1, 100_000)  # on its way: within the horizon
    ledger.ended["held"] = {0: ("EVICTED", 1_000)}  # no decision here, but a table holds it
    return ledger


def test_orphaned_records_go_with_the_horizon() -> None:
    ledger = _ledger()
    assert ledger.prune(now_ms=30_000, horizon_ms=HORIZON) == 0  # all within the horizon
    pruned = ledger.prune(now_ms=120_000, horizon_ms=HORIZON, live={"held"})
    assert pruned == 4  # done; late, moved and elsewhere with no final decision
    assert set(ledger.final) == {"running"}
    assert set(ledger.ended) == {"held"}
    assert not ledger.migrated and not ledger.moves
    assert set(ledger.routed) == {"recent"}
    assert ledger.attempts() == {"recent": 1}


def test_an_orphan_is_kept_while_any_of_its_records_is_recent() -> None:
    ledger = Ledger()
    ledger.ended["j"] = {0: ("EVICTED", 1_000)}
    ledger.migrated["j"] = [{"type": "MIGRATED", "job_id": "j", "ts": 90_000}]
    assert ledger.prune(now_ms=120_000, horizon_ms=HORIZON) == 0
    assert ledger.prune(now_ms=151_000, horizon_ms=HORIZON) == 1
    assert not ledger.ended and not ledger.migrated


def test_a_prune_inside_a_fold_leaves_orphans_for_the_end() -> None:
    """In the middle of a fold a job's decision may still be unread: its other records are
    not orphans yet, so `orphans=False` keeps them; jobs over by their decision still go."""
    ledger = _ledger()
    assert ledger.prune(now_ms=120_000, horizon_ms=HORIZON, live={"held"}, orphans=False) == 1
    assert "done" not in ledger.final and "done" not in ledger.routed
    assert {"late", "moved", "elsewhere"} <= set(ledger.ended) | set(ledger.moves) | set(
        ledger.routed
    )
