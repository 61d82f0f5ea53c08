"""A child process with its output in a log file, stopped by PID.

The broker, the worker and the worker's history child are all run this way. `own_group=True`
starts the child in its own session and signals the whole group, so whatever it starts goes
with it; the history child stays in its worker's group instead, and is signalled alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["ChildProcess", "die_with_parent"]

log = logging.getLogger(__name__)


class ChildProcess:
    """Start once, then `kill()` (a crash) or `stop()` (SIGTERM, then SIGKILL); both idempotent."""

    def __init__(self, name: str, log_path: Path, *, own_group: bool = True) -> None:
        self.name = name
        self.log_path = log_path
        self.own_group = own_group
        self._proc: subprocess.Popen[bytes] | None = None
        self.returncode: int | None = None  # once stopped or killed

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
        """Run `argv` with stdout and stderr appended to the log; the child's PID.

        Raises OSError when `argv[0]` cannot be run.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                list(argv),
                env=dict(env) if env is not None else None,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=self.own_group,
            )
        return self._proc.pid

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exited(self) -> bool:
        """Started, and has exited on its own (forgets it, so `stop` has nothing to do)."""
        if self._proc is None or self._proc.poll() is None:
            return False
        self._proc = None
        return True

    def kill(self, timeout_s: float = 10.0) -> None:
        """SIGKILL, as a crash would."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self._signal(proc, signal.SIGKILL)
            self.returncode = proc.wait(timeout_s)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after `timeout_s`."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        self._signal(proc, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("%s pid=%s ignored SIGTERM; killing", self.name, proc.pid)
            self._signal(proc, signal.SIGKILL)
            proc.wait(10)
        self.returncode = proc.returncode
        log.info("%s stopped pid=%s", self.name, proc.pid)

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if self.own_group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)


def die_with_parent() -> None:
    """Linux: this process gets SIGTERM when its parent dies, even by SIGKILL (a child that
    holds a store, a pool process, a ledger save must not outlive the worker)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
