"""ChildProcess: started with its log, stopped by PID, its process group taken along."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from infra.process import ChildProcess


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers; /proc says whether it is one
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(") ", 1)[1].startswith("Z")


def _grandchild(log: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.strip():
            return int(text.split()[0])
        time.sleep(0.02)
    raise AssertionError("the child never wrote its grandchild's pid")


def test_stop_takes_the_whole_group_and_keeps_the_output(tmp_path: Path) -> None:
    child = ChildProcess("sleeper", tmp_path / "out.log")
    pid = child.start(["sh", "-c", "sleep 30 & echo $!; wait"])
    grandchild = _grandchild(tmp_path / "out.log")
    assert child.alive() and child.pid == pid
    child.stop(timeout_s=5)
    assert not child.alive() and child.pid is None
    time.sleep(0.1)
    assert _gone(pid) and _gone(grandchild)
    child.stop()  # twice is fine


def test_kill_is_a_crash_and_exited_notices_a_child_that_ended(tmp_path: Path) -> None:
    child = ChildProcess("crasher", tmp_path / "out.log")
    child.start([sys.executable, "-c", "import time; time.sleep(30)"])
    child.kill()
    assert child.pid is None
    done = ChildProcess("quick", tmp_path / "quick.log")
    done.start([sys.executable, "-c", "print('bye')"])
    deadline = time.monotonic() + 10
    while not done.exited() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert done.pid is None
    assert "bye" in done.log_tail()


def test_a_child_in_its_parents_group_is_signalled_alone(tmp_path: Path) -> None:
    child = ChildProcess("member", tmp_path / "out.log", own_group=False)
    pid = child.start([sys.executable, "-c", "import time; time.sleep(30)"])
    assert os.getpgid(pid) == os.getpgid(0)  # our group: killpg would have hit this test too
    child.stop(timeout_s=5)
    assert _gone(pid)
