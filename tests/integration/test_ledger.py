"""The worker's ledger on the real broker: an incremental catch-up folds exactly what a whole
read folds, a saved ledger makes a restarted worker read only the logs' tails, and a ledger
whose saved positions no longer match the log starts again from the beginning."""

from __future__ import annotations

import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from harness import (
    CODEC,
    TopicReader,
    check_once_and_not_overbooked,
    final_decisions,
    run_stack,
    submit_jobs,
    wait_for,
)

from agents.jobgen import generate_jobs
from infra.config import Config
from infra.kafka import consumer, producer
from infra.store import samples as S
from infra.topics import DECISIONS_PLACEMENT, JOBS_EVENTS, topic_for_event
from streams.ledger.ledger import Ledger
from streams.ledger.snapshot import load_ledger, save_ledger

pytestmark = pytest.mark.integration

HORIZON_MS = 600_000


def _send(config: Config, events: list[tuple[str, dict[str, Any]]]) -> None:
    p = producer(config.kafka)
    for name, rec in events:
        key = str(rec.get("job_id") or rec["job"]["job_id"]).encode()
        p.produce(topic_for_event(name), CODEC.encode(name, rec), key=key)
    p.flush(10)


def _history(prefix: str, n: int, *, epochs: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """n jobs through the four logs: routed, decided (every fifth refused), every other placed
    one finished, every third evicted and placed again at epoch 1, every fourth moved (its
    MigrationDecision delivered twice) and confirmed MIGRATED. With `epochs`, ends carry the
    epoch they end, as a worker writes them (without, they say none, i.e. 0)."""
    now = int(time.time() * 1000)
    out: list[tuple[str, dict[str, Any]]] = []
    for i in range(n):
        job_id, ts = f"{prefix}{i}", now + i
        out.append(("RoutedJob", S.routed_job(S.job_submitted(job_id, "t", ts), "eu", ts)))
        if i % 5 == 0:
            refused = S.placement(job_id, ts, submitted_ts=ts, outcome="REJECTED", region=None)
            out.append(("PlacementDecision", refused))
            continue
        out.append(("PlacementDecision", S.placement(job_id, ts, submitted_ts=ts)))
        epoch: dict[str, Any] = {"epoch": 0} if epochs else {}
        if i % 3 == 0:
            out.append(("JobEvent", S.job_event(job_id, "eu", "EVICTED", ts + 1) | epoch))
            again = S.placement(job_id, ts + 2, submitted_ts=ts) | {"epoch": 1}
            out.append(("PlacementDecision", again))
            epoch = {"epoch": 1} if epochs else {}
        if i % 4 == 0:
            move = S.migration(job_id, "eu", "eu", ts + 3)
            out += [("MigrationDecision", move), ("MigrationDecision", move)]
            out.append(("JobEvent", S.job_event(job_id, "eu", "MIGRATED", ts + 4, nodes=("n2",))))
        if i % 2 == 0:
            out.append(("JobEvent", S.job_event(job_id, "eu", "FINISHED", ts + 5) | epoch))
    return out


def _folded(ledger: Ledger) -> dict[str, Any]:
    return {k: v for k, v in vars(ledger).items() if k != "positions"}


def test_catch_up_folds_only_the_tail_and_agrees_with_a_whole_read(
    config: Config, tmp_path: Path
) -> None:
    first, second = _history("a", 40), _history("b", 25)
    _send(config, first)
    saved = Ledger()
    assert saved.catch_up(config.kafka, CODEC) == len(first)
    save_ledger(saved, tmp_path / "ledger.pickle")

    _send(config, second)
    ledger = load_ledger(tmp_path / "ledger.pickle")
    assert _folded(ledger) == _folded(saved)
    assert ledger.catch_up(config.kafka, CODEC) == len(second)  # the tail, nothing before it
    assert ledger.catch_up(config.kafka, CODEC) == 0

    whole = Ledger()
    whole.catch_up(config.kafka, CODEC)
    assert _folded(ledger) == _folded(whole)
    # the fold itself: a5 refused, a3 placed again at epoch 1, a4's move once, a8 migrated
    decisions = ledger.decisions(CODEC)
    assert decisions["a5"]["outcome"] == "REJECTED"
    assert decisions["a3"]["epoch"] == 1 and ledger.final["a3"][:2] == (1, "PLACED")
    assert ledger.ended["a3"][0][0] == "EVICTED"
    assert len(ledger.moves["a4"]) == 1
    assert [e["type"] for e in ledger.migrated["a8"]] == ["MIGRATED"]
    assert ledger.routed["b24"][0] == 1


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda o, ts, k: (o, ts + 1, k), id="another-record-at-the-offset"),
        pytest.param(lambda o, ts, k: (o + 1000, ts, k), id="log-shorter-than-the-position"),
    ],
)
def test_a_position_the_log_does_not_hold_starts_again_from_the_beginning(
    config: Config, change: Any
) -> None:
    events = _history("c", 20)
    _send(config, events)
    ledger = Ledger()
    ledger.catch_up(config.kafka, CODEC)
    whole = _folded(ledger)
    for positions in ledger.positions.values():  # as if the broker's log were replaced
        for partition, (offset, ts, key) in positions.items():
            positions[partition] = change(offset, ts, key)
    ledger.final["ghost"] = (0, "PLACED", 0, b"old")  # only in the old log
    assert ledger.catch_up(config.kafka, CODEC) == len(events)
    assert _folded(ledger) == whole


def test_prune_keeps_live_jobs_and_the_horizon(config: Config) -> None:
    _send(config, _history("d", 30))
    ledger = Ledger()
    ledger.catch_up(config.kafka, CODEC)
    now = int(time.time() * 1000)
    assert ledger.prune(now, HORIZON_MS) == 0  # everything within the horizon

    later = now + HORIZON_MS + 60_000
    pruned = ledger.prune(later, HORIZON_MS, live={"d2"})
    # over: refused (d0, d5, ..., d25: 6) or finished at their last epoch (even, not refused,
    # not d2: d4 d8 d14 d16 d22 d26 d28: 7; d6 d12 d18 d24 finished epoch 0, the events carry
    # no epoch, but run again at epoch 1); d2 is live by the caller's word
    assert pruned == 6 + 7
    kept = {f"d{i}" for i in range(30) if (i % 2 or i % 3 == 0) and i % 5} | {"d2"}
    assert set(ledger.final) == kept
    assert set(ledger.routed) == set(ledger.final)
    assert "d4" not in ledger.moves and "d4" not in ledger.ended
    # still placed (odd jobs) or evicted without a later end: never pruned
    assert ledger.ended["d3"] == {0: ("EVICTED", ledger.ended["d3"][0][1])}


def test_a_fold_pruned_as_it_reads_ends_where_one_pruned_after_reading_does(
    config: Config,
) -> None:
    """A snapshot's fold prunes every so many records, so it never holds a whole save
    interval of ended jobs; what it ends with is what pruning after the fold leaves."""
    _send(config, _history("q", 90, epochs=True))
    later = int(time.time() * 1000) + HORIZON_MS + 60_000  # everything over is past the horizon
    whole = Ledger()
    whole.catch_up(config.kafka, CODEC)
    assert whole.prune(later, HORIZON_MS, live={"q2"}) > 0

    pruned: list[int] = []

    def prune(ledger: Ledger) -> int:  # as the worker's snapshot does: orphans only at the end
        pruned.append(ledger.prune(later, HORIZON_MS, live={"q2"}, orphans=False))
        return pruned[-1]

    ledger = Ledger()
    read = ledger.catch_up(config.kafka, CODEC, prune=prune, prune_every=25)
    assert len(pruned) == read // 25 >= 4 and sum(pruned) > 0  # it pruned while it read
    ledger.prune(later, HORIZON_MS, live={"q2"})
    assert _folded(ledger) == _folded(whole)
    assert "q2" in ledger.final and "q4" not in ledger.final  # live by word; finished


def _caught_up_reads(log: str) -> list[int]:
    return [int(n) for n in re.findall(r"ledger caught up read=(\d+)", log)]


def test_a_restarted_worker_reads_only_what_came_after_its_saved_ledger(config: Config) -> None:
    with run_stack(config, ledger_snapshot_s=1.0) as running:
        regions = [r.name for r in running.fleet.spec.regions]
        jobs = generate_jobs(60, seed=4, regions=regions, mean_duration_s=1.0, prefix="snap")
        early, late = jobs[:40], jobs[40:]
        decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
        events = TopicReader(running.config, JOBS_EVENTS)
        submit_jobs(running.config, early, rate_per_s=40)
        path = running.config.data_dir / "ledger" / f"{running.config.worker.app_id}.pickle"
        want = {j["job_id"] for j in early}
        assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 60)
        assert wait_for(lambda: want <= set(load_ledger(path).final), 30), "never saved"

        running.worker.kill()
        covered = sum(
            o + 1 for parts in load_ledger(path).positions.values() for o, *_ in parts.values()
        )
        sender = threading.Thread(target=submit_jobs, args=(running.config, late, 40.0))
        sender.start()
        running.restart_worker()
        sender.join(30)
        everyone = {j["job_id"] for j in jobs}
        assert wait_for(lambda: everyone <= set(final_decisions(decisions.poll())), 90)
        check_once_and_not_overbooked(decisions, events)
        logged = running.worker.log_tail(200_000)
        reads = _caught_up_reads(logged)
        assert reads, logged[-2000:]
        # the restart's first catch-up read the tail only: what the four logs hold now, less
        # what the saved ledger covered (at least the early jobs' decisions and routes)
        whole = Ledger()
        total = whole.catch_up(running.config.kafka, CODEC)
        assert covered >= 2 * len(early)
        assert reads[0] <= total - covered, (reads, total, covered)
        decisions.close()
        events.close()


def test_without_snapshots_nothing_is_saved(config: Config) -> None:
    with run_stack(config, ledger_snapshot_s=0) as running:
        regions = [r.name for r in running.fleet.spec.regions]
        jobs = generate_jobs(5, seed=8, regions=regions, mean_duration_s=1.0, prefix="nosnap")
        decisions = TopicReader(running.config, DECISIONS_PLACEMENT)
        submit_jobs(running.config, jobs, rate_per_s=20)
        want = {j["job_id"] for j in jobs}
        assert wait_for(lambda: want <= set(final_decisions(decisions.poll())), 60)
        assert not (running.config.data_dir / "ledger").exists()
        decisions.close()


def _trim(config: Config, to: dict[tuple[str, int], int]) -> None:
    """Move each partition's log start to the offset given, as retention does."""
    admin = AdminClient({"bootstrap.servers": config.kafka.bootstrap_servers})
    parts = [TopicPartition(t, p, o) for (t, p), o in to.items()]
    for done in admin.delete_records(parts).values():
        done.result(10)


def _ends(config: Config, ledger: Ledger) -> dict[tuple[str, int], int]:
    """The log end of every partition the ledger has read."""
    c = consumer(config.kafka, group_id=f"ends-{uuid.uuid4().hex[:8]}")
    try:
        return {
            (t, p): c.get_watermark_offsets(TopicPartition(t, p), timeout=10)[1]
            for t, parts in ledger.positions.items()
            for p in parts
        }
    finally:
        c.close()


@pytest.mark.engines("logbroker")  # Tansu 0.6 closes the connection on DeleteRecords
def test_a_ledger_reads_on_from_a_log_start_retention_moved_past_its_position(
    config: Config,
) -> None:
    first, second = _history("r", 20), _history("s", 10)
    _send(config, first)
    ledger = Ledger()
    ledger.catch_up(config.kafka, CODEC)
    _send(config, second)
    # right after each saved record: nothing lost, the fold goes on from the log start
    _trim(
        config, {(t, p): o + 1 for t, ps in ledger.positions.items() for p, (o, *_) in ps.items()}
    )
    assert ledger.catch_up(config.kafka, CODEC) == len(second)
    assert {f"r{i}" for i in range(20)} | {f"s{i}" for i in range(10)} <= set(ledger.final)
    assert ledger.trimmed_ms == 0

    # past them: a whole batch of records went to retention before the ledger read them
    _send(config, _history("u", 10))
    _trim(config, _ends(config, ledger))
    before = int(time.time() * 1000)
    after = _history("v", 10)
    _send(config, after)
    assert ledger.catch_up(config.kafka, CODEC) == len(after)
    kept = {f"r{i}" for i in range(20)} | {f"s{i}" for i in range(10)}
    assert kept | {f"v{i}" for i in range(10)} <= set(ledger.final)
    assert not any(job.startswith("u") for job in ledger.final)  # lost, and it says so:
    assert before <= ledger.trimmed_ms <= int(time.time() * 1000)  # older decisions may miss

    # a ledger with nothing saved reads the trimmed log from its start: older is unknown
    fresh = Ledger()
    assert fresh.catch_up(config.kafka, CODEC) == len(after)
    assert before <= fresh.trimmed_ms <= ledger.trimmed_ms

    # trimmed to the end, nothing after: any decision until now may be missing
    _send(config, _history("w", 5))
    _trim(config, _ends(config, ledger))
    ledger.catch_up(config.kafka, CODEC)
    assert ledger.trimmed_ms >= int(time.time() * 1000) - 5_000
    assert kept <= set(ledger.final)


def test_a_ledger_from_another_cluster_starts_again_from_the_beginning(config: Config) -> None:
    events = _history("k", 10)
    _send(config, events)
    ledger = Ledger()
    ledger.catch_up(config.kafka, CODEC)
    whole = _folded(ledger)
    ledger.source["cluster"] = "another-cluster"  # as after the broker came back empty
    ledger.final["ghost"] = (0, "PLACED", 0, b"old")
    assert ledger.catch_up(config.kafka, CODEC) == len(events)
    assert _folded(ledger) == whole
