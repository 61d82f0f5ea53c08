"""The worker's history child yields the CPU once its store is open: every thread of it runs at
`store.nice` (so on a full machine decisions and telemetry go first), and at the worker's own
priority when that is 0."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from harness import run_stack, wait_for

from infra.config import Config

pytestmark = pytest.mark.integration


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):  # the thread ended since the listing
            continue
    return out


def _history_child(worker_pid: int) -> int | None:
    for pid in _children(worker_pid):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):  # a child that ended since
            continue
        if b"streams.history.process" in cmdline:
            return pid
    return None


# chDB's memory statistics threads set their own priority (-10) when they start
OWN_PRIORITY = {"MemoryWorker"}


def _named_nices(pid: int) -> list[tuple[str, int]]:
    """Each thread of `pid`: its name and nice value (/proc/<pid>/task/<tid>/stat, field 19)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # the thread ended since the listing
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        if name not in OWN_PRIORITY:
            out.append((name, int(rest.split()[16])))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("nice", [10, 0])
def test_history_child_threads_run_at_the_configured_nice(config: Config, nice: int) -> None:
    cfg = dataclasses.replace(config, store=dataclasses.replace(config.store, nice=nice))
    with run_stack(cfg, executor=False) as running:
        worker = running.worker.pid
        assert worker is not None
        found: dict[str, int] = {}

        def child() -> bool:
            pid = _history_child(worker)
            found["pid"] = pid or 0
            return pid is not None

        assert wait_for(child, 60), running.worker.log_tail()
        pid = found["pid"]
        # the sink's, librdkafka's and the HTTP server's threads are up
        assert wait_for(lambda: len(_named_nices(pid)) > 3, 60), _named_nices(pid)
        # niced once the store is open and the sink subscribed; every thread, then and later
        assert wait_for(lambda: {n for _, n in _named_nices(pid)} == {nice}, 60), [
            t for t in _named_nices(pid) if t[1] != nice
        ]
