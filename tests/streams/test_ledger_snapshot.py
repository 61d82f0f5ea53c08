"""The saved ledger file: a round trip keeps every table, and a file that is truncated, of
another format or damaged is not used (the worker then reads the logs from the start); a save
child that does not finish is stopped and leaves nothing half-written."""

from __future__ import annotations

import pickle
import time
from pathlib import Path

import pytest

from infra.broker import free_port
from infra.config import load_config
from schemas import SingleObjectCodec
from scorer.placer import Placer
from scorer.state import ClusterState
from streams.ledger.ledger import Ledger
from streams.ledger.snapshot import _FORMAT as FORMAT
from streams.ledger.snapshot import load_ledger, save_ledger
from streams.runtime.runtime import Runtime
from streams.scheduler.core import Scheduler


def _ledger(jobs: int) -> Ledger:
    ledger = Ledger()
    for i in range(jobs):
        job = f"j{i}"
        ledger.final[job] = (i % 2, "PLACED", 1_000 + i, f"decision {i}".encode())
        ledger.ended[job] = {0: ("EVICTED", 2_000 + i)}
        ledger.routed[job] = (1, 1_000 + i)
    ledger.moves["j1"] = [{"event_id": "m1", "job_id": "j1"}]
    ledger.migrated["j1"] = [{"type": "MIGRATED", "job_id": "j1"}]
    ledger.positions = {"gpuflow.decisions.placement": {0: (41, 1_234, b"j1"), 3: (7, 99, None)}}
    ledger.source = {"cluster": "c-1", "trimmed_ms": 1_500}
    return ledger


def test_round_trip_over_several_chunks(tmp_path: Path) -> None:
    saved = _ledger(10_000)  # more entries per table than one chunk holds
    path = tmp_path / "ledger" / "app.pickle"
    assert save_ledger(saved, path) == path.stat().st_size
    assert load_ledger(path) == saved
    assert [p.name for p in path.parent.iterdir()] == ["app.pickle"]  # no temporary left


def test_no_file_is_an_empty_ledger(tmp_path: Path) -> None:
    assert load_ledger(tmp_path / "none.pickle") == Ledger()


def test_a_truncated_file_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "app.pickle"
    save_ledger(_ledger(10_000), path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # cut between two chunks or inside one
    assert load_ledger(path) == Ledger()


def test_another_format_or_garbage_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "app.pickle"
    path.write_bytes(pickle.dumps({"format": 1, "ledger": {}}))
    assert load_ledger(path) == Ledger()
    path.write_bytes(b"\x00not a pickle")
    assert load_ledger(path) == Ledger()
    with open(path, "wb") as f:  # this format, but a table this version does not have
        pickle.dump({"format": FORMAT, "positions": {}}, f)
        pickle.dump(("tables_of_the_future", [("j", 1)]), f)
        pickle.dump(("end", []), f)
    assert load_ledger(path) == Ledger()


def test_a_ledger_that_cannot_be_saved_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = ClusterState()
    scheduler = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    blocked = tmp_path / "data"
    blocked.write_text("a file where the data directory should be")
    rt = Runtime(load_config(env={}, data_dir=str(blocked)), SingleObjectCodec(), scheduler)
    assert rt.ledger.path is not None
    rt.ledger.keep(_ledger(3), live=set())  # the worker still becomes ready
    assert "ledger not saved" in caplog.text
    assert blocked.read_text().startswith("a file")


def test_a_save_child_that_overruns_is_stopped_and_leaves_no_half_file(tmp_path: Path) -> None:
    # nothing listens on the port: the child's catch-up waits on the broker until stopped
    config = load_config(env={}, data_dir=str(tmp_path / "data"))
    config = config.with_bootstrap(f"127.0.0.1:{free_port('127.0.0.1')}")
    state = ClusterState()
    scheduler = Scheduler(state, Placer(state), reservations={}, queue={}, nodes={}, partitions=4)
    rt = Runtime(config, SingleObjectCodec(), scheduler)
    assert rt.ledger.path is not None
    save_ledger(_ledger(3), rt.ledger.path)
    before = rt.ledger.path.read_bytes()
    started = time.monotonic()
    assert rt.ledger.save_apart({"j1"}, timeout_s=3.0) is False
    assert time.monotonic() - started < 8.0
    assert rt.ledger.path.read_bytes() == before  # the last good save stays
    assert not [p.name for p in rt.ledger.path.parent.iterdir() if p.name.endswith(".tmp")]
