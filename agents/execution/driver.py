"""Drivers: how a task's command becomes processes. `RawProcessDriver` runs it as a plain
process group under the shim; there is no container driver (no runtime on these nodes), so a
job with an `image` is refused at launch (LAUNCH_ERROR) by `RawProcessDriver.check`."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.errors import AgentError

SHIM = Path(__file__).with_name("shim.py")

__all__ = ["Handle", "LaunchError", "RawProcessDriver", "group_alive", "process_start"]


class LaunchError(AgentError):
    """The command cannot be started here (not found, bad working directory, an image)."""


@dataclass
class Handle:
    """A started task: the shim's pid (= its process group), and its kernel start time, which
    tells a re-used pid from ours after a restart."""

    pid: int
    start: int
    popen: subprocess.Popen[bytes] | None = None  # None once re-attached after a restart


def process_start(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot); None if gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def group_alive(pgid: int) -> bool:
    """Whether any live (non-zombie) process is in process group `pgid`."""
    try:  # the usual answer, without reading every process's stat (ms on a busy node)
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False  # no process at all, zombies included
    except PermissionError:
        pass  # someone else's group now: look at the processes themselves
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class RawProcessDriver:
    """Plain processes: the command in its own session, under the shim."""

    name = "raw_exec"

    def check(
        self, command: Sequence[str], workdir: str, image: str | None, env: Mapping[str, str]
    ) -> None:
        """Refuse what cannot start, with the reason (LaunchError)."""
        if image:
            raise LaunchError(
                f"image {image!r}: this node has no container runtime (raw_exec driver only)"
            )
        if not command:
            raise LaunchError("command: empty")
        if workdir and not Path(workdir).is_dir():
            raise LaunchError(f"workdir {workdir!r}: no such directory")
        exe = command[0]
        found = (
            os.access(Path(workdir or ".", exe), os.X_OK)
            if "/" in exe
            else shutil.which(exe, path=env.get("PATH"))
        )
        if not found:
            raise LaunchError(f"{exe}: command not found")

    def launch(
        self, command: Sequence[str], epoch_dir: Path, env: Mapping[str, str], workdir: str
    ) -> Handle:
        with (
            open(epoch_dir / "stdout.log", "ab") as out,
            open(epoch_dir / "stderr.log", "ab") as err,
        ):
            popen = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SHIM), str(epoch_dir), "--", *command],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=dict(env),
                cwd=workdir or None,
                start_new_session=True,
                close_fds=True,
            )
        return Handle(popen.pid, process_start(popen.pid) or 0, popen)

    def attach(self, info: Mapping[str, Any]) -> Handle | None:
        """The journal's pid again, if it is still our process (same start time)."""
        pid, start = int(info["pid"]), int(info.get("start") or 0)
        return Handle(pid, start) if process_start(pid) == start else None

    def alive(self, h: Handle) -> bool:
        if h.popen is not None:
            return h.popen.poll() is None
        return process_start(h.pid) == h.start

    def signal(self, h: Handle, sig: int) -> None:
        """`sig` to the task's whole process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(h.pid, sig)

    def gone(self, h: Handle) -> bool:
        """The shim and every process of its group have ended."""
        return not self.alive(h) and not group_alive(h.pid)

    def kill(self, h: Handle) -> None:
        self.signal(h, signal.SIGKILL)
