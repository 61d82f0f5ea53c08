"""The processes an embedded stack starts: the worker runs with two malloc arenas unless the user
chose otherwise, and a holder stopped with SIGTERM (a bench killed by `kill` or a CI timeout)
still stops the broker and worker it started, by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

_HOLDER = """
import sys, time
from gpuflow.stack import Stack
from infra.config import load_config

config = load_config(data_dir=sys.argv[1], worker={"web_port": 0})
with Stack(config) as stack:
    print(stack.broker.pid, stack.workers[0].pid, flush=True)
    time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "(Z)" not in Path(f"/proc/{pid}/stat").read_text()


@pytest.mark.integration
def test_worker_env_and_sigterm_to_the_holder_stops_broker_and_worker(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "data")],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert holder.stdout is not None
        line = holder.stdout.readline()  # once the stack is up
        pids = [int(p) for p in line.split()]
        assert len(pids) == 2 and all(_alive(p) for p in pids), line
        environ = Path(f"/proc/{pids[1]}/environ").read_bytes().split(b"\0")
        expected = os.environ.get("MALLOC_ARENA_MAX", "2").encode()
        assert b"MALLOC_ARENA_MAX=" + expected in environ
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=90) != 0  # interrupted, after stopping what it started
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if _alive(p)], (
            holder.stderr.read()[-2000:] if holder.stderr else ""
        )
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)
        for pid in pids:  # what the old code left behind: the test must not leak it either
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
