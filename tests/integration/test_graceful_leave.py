"""SIGTERM: the worker commits what it processed, leaves the group and exits within its bound,
so the other worker takes its regions over without waiting for a session timeout."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from cluster import cluster
from harness import wait_for

from infra.broker import EmbeddedBroker
from infra.kafka import committed_offsets
from infra.topics import NODE_TELEMETRY

pytestmark = pytest.mark.integration


def test_sigterm_commits_leaves_the_group_and_exits_in_time(
    broker: EmbeddedBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with cluster(broker, tmp_path, workers=2, fleet="demo", nodes=40, seed=2) as c:
        assert wait_for(lambda: c.split([0, 1]), 120), c.logs()
        leaving = c.workers[1]
        page: dict = {}

        def read_now() -> dict[int, int]:
            """What the leaving worker has applied of telemetry (1 Hz per node) by now."""
            page.clear()
            page.update(httpx.get(c.url(1, "/consumer/"), timeout=10).json())
            lane = page.get("telemetry_lane")  # telemetry read beside Faust (the default)
            if lane:
                rows = lane["partitions"].items()
                return {int(p): row["applied"] - 1 for p, row in rows if row["applied"]}
            return {
                int(name.rsplit("/", 1)[1]): row["read_offset"]
                for name, row in page["partitions"].items()
                if name.startswith(NODE_TELEMETRY + "/") and row["read_offset"] is not None
            }

        # the lane follows the new assignment within a timer tick: wait until it has applied
        assert wait_for(lambda: bool(read_now()), 30), page
        read = read_now()
        lane = page.get("telemetry_lane")
        group = lane["group"] if lane else c.config.worker.app_id
        assert read, page
        bound = c.configs[1].worker.shutdown_timeout_s
        started = time.monotonic()
        leaving.stop(timeout=bound + 10)
        exited_s = time.monotonic() - started
        committed = committed_offsets(c.config.kafka, group, NODE_TELEMETRY)

        assert leaving.returncode == 0, leaving.log_tail()  # not the watchdog's 3, not a kill
        assert exited_s <= bound
        for partition, offset in read.items():  # its last commit covers what it had read
            assert committed.get(partition, -1) >= offset + 1, (partition, offset, committed)
        log = leaving.log_tail(200_000)
        assert "LeaveGroup request succeeded" in log, log[-3000:]
        assert wait_for(lambda: c.regions_of(0) == set(c.regions), 60), c.logs()
        taken_s = time.monotonic() - started
        with capsys.disabled():
            print(
                f"\ngraceful leave: exited {exited_s:.1f} s after SIGTERM (bound {bound:.0f} s); "
                f"the other worker held every region {taken_s:.1f} s after it "
                f"(session timeout {c.config.kafka.session_timeout_s:.0f} s)"
            )
