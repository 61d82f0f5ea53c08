"""The shim every job runs under, as the driver starts it (a real interpreter, a new session):
the exit record, signals to the group, launch errors, what the command inherits, and that it
stays cheap to start (no heavy imports)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agents.execution.driver import SHIM, group_alive

_HEAVY = {"subprocess", "json", "pathlib", "signal", "enum", "threading", "re"}


def _shim(epoch_dir: Path, *command: str, **popen: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(SHIM), str(epoch_dir), "--", *command],
        start_new_session=True,
        **popen,  # type: ignore[call-overload]
    )


def test_the_exit_status_is_written_as_json(tmp_path: Path) -> None:
    assert _shim(tmp_path, "sh", "-c", "exit 3").wait(10) == 3
    record = json.loads((tmp_path / "exit.json").read_text())
    assert record["exit_code"] == 3 and abs(record["ended_ms"] / 1000 - time.time()) < 10
    assert [p.name for p in tmp_path.iterdir()] == ["exit.json"]  # no temp file left


def test_a_signal_to_the_group_ends_the_command_not_the_shim_first(tmp_path: Path) -> None:
    shim = _shim(tmp_path, "sh", "-c", "echo up; exec sleep 30", stdout=subprocess.PIPE)
    assert shim.stdout is not None and shim.stdout.readline() == b"up\n"
    os.killpg(shim.pid, signal.SIGTERM)
    assert shim.wait(10) == 128 + signal.SIGTERM
    assert json.loads((tmp_path / "exit.json").read_text())["exit_code"] == -signal.SIGTERM
    assert not group_alive(shim.pid)


def test_a_command_that_cannot_run_is_a_launch_error(tmp_path: Path) -> None:
    assert _shim(tmp_path, "/etc/passwd").wait(10) == 127
    record = json.loads((tmp_path / "exit.json").read_text())
    assert record["launch_error"] == "/etc/passwd: Permission denied"


def test_the_command_gets_default_signals_and_its_own_process_group(tmp_path: Path) -> None:
    """Nothing ignored or blocked (Python ignores SIGPIPE and SIGXFSZ; glibc's posix_spawn
    leaves its internal signals ignored), and the shim leads the command's group."""
    script = "grep -E '^Sig(Ign|Blk)' /proc/self/status; ps -o pgid= -p $$"
    shim = _shim(tmp_path, "sh", "-c", script, stdout=subprocess.PIPE)
    out, _ = shim.communicate(timeout=10)
    *masks, pgid = out.decode().split()
    assert dict(zip(masks[::2], masks[1::2], strict=True)) == {
        "SigBlk:": "0" * 16,
        "SigIgn:": "0" * 16,
    }
    assert int(pgid) == shim.pid


def test_the_shim_starts_without_heavy_imports(tmp_path: Path) -> None:
    """A shim is started per job: `subprocess`, `json` or `pathlib` would triple its CPU."""
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", str(SHIM), str(tmp_path), "--", "true"],
        capture_output=True,
        timeout=10,
        check=True,
    )
    lines = out.stderr.decode().splitlines()
    imported = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import")}
    assert "os" in imported  # the output is what we think it is
    assert not imported & _HEAVY, sorted(imported & _HEAVY)
