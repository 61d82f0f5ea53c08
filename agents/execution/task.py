"""One (job, epoch) carried out: a small state machine over a driver.

    RUNNING --exit--------------------------------------------> ENDED (FINISHED / FAILED)
    RUNNING --stop(kind)--> STOPPING: [checkpoint signal, grace] -> SIGTERM, wait -> SIGKILL
                                      --all processes gone--> ENDED (EVICTED / CANCELLED /
                                                                      TIMEOUT)
    (launch refused) ----------------------------------------> ENDED (FAILED LAUNCH_ERROR)

Times are wall-clock (they are journalled and outlive an executor restart). The runner does
not retry; the scheduler decides about a next epoch.
"""

from __future__ import annotations

import enum
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.execution.driver import Handle, LaunchError, RawProcessDriver
from agents.execution.journal import EpochDir
from agents.execution.logs import tail

__all__ = ["Event", "State", "TaskRunner", "Timing"]

PROGRESS_FILE = ".gpuflow-progress"
Event = dict[str, Any]


class State(enum.Enum):
    RUNNING = "running"
    STOPPING = "stopping"
    ENDED = "ended"


@dataclass(frozen=True)
class Timing:
    term_wait_s: float = 5.0  # SIGTERM -> SIGKILL
    default_grace_s: float = 30.0  # checkpoint signal -> SIGTERM when nothing else says
    stderr_tail_bytes: int = 4096


class TaskRunner:
    def __init__(
        self, d: EpochDir, task: dict[str, Any], driver: RawProcessDriver, timing: Timing
    ) -> None:
        self.d, self.task, self.driver, self.timing = d, task, driver, timing
        self.state = State.RUNNING
        self.handle: Handle | None = None
        self.stop: dict[str, Any] | None = d.get("stop")
        if self.stop:
            self.state = State.STOPPING
        self.progress_path = Path(task["checkpoint_dir"]) / PROGRESS_FILE
        self._progress_key = self._stat_key()
        self.progress = float(task.get("base_progress") or 0.0)
        self.ending: Event | None = None

    @property
    def gpus(self) -> set[int]:
        return set(self.task["gpu_indices"])

    def start(self, env: dict[str, str]) -> Event:
        """Launch; STARTED with the pid, or the FAILED LAUNCH_ERROR end."""
        t = self.task
        try:
            self.driver.check(t["command"], t["workdir"], t.get("image"), env)
            self.handle = self.driver.launch(t["command"], self.d.path, env, t["workdir"])
        except (LaunchError, OSError) as exc:
            return self.end({"type": "FAILED", "cause": "LAUNCH_ERROR", "detail": str(exc)})
        self.d.put(
            "pid",
            {
                "pid": self.handle.pid,
                "start": self.handle.start,
                "started_ms": int(time.time() * 1000),
            },
        )
        return {"type": "STARTED", "pid": self.handle.pid}

    def attach(self) -> bool:
        """After an executor restart: find the process again; False if it ended meanwhile."""
        info = self.d.get("pid")
        self.handle = self.driver.attach(info) if info else None
        return self.handle is not None

    def request_stop(self, kind: str, *, grace_s: float, checkpoint: bool, detail: str) -> None:
        """Stop for `kind` (EVICTED / CANCELLED / TIMEOUT); the first request wins."""
        if self.state is not State.RUNNING:
            return
        now = time.time()
        t = self.task
        if checkpoint:
            sig, phase, wait = t.get("checkpoint_signal") or "SIGUSR1", "checkpoint", grace_s
        else:
            sig, phase = "SIGTERM", "term"
            wait = grace_s if kind == "CANCELLED" else self.timing.term_wait_s
        self.stop = {
            "kind": kind,
            "phase": phase,
            "since": now,
            "deadline": now + wait,
            "detail": detail,
            "killed": False,
        }
        self.d.put("stop", self.stop)
        self.state = State.STOPPING
        self._signal(signal.Signals[sig])

    def tick(self, now: float | None = None) -> list[Event]:
        """Advance; the events due (CHECKPOINTED, and the end once everything is gone)."""
        if self.state is State.ENDED:
            return []
        now = time.time() if now is None else now
        out = self._checkpoints()
        limit = float(self.task.get("time_limit_s") or 0)
        started = float(self.task.get("started_s") or now)
        if self.state is State.RUNNING and limit and now - started >= limit:
            self.request_stop(
                "TIMEOUT", grace_s=0, checkpoint=False, detail=f"time limit {limit:g}s reached"
            )
        h = self.handle
        if h is not None and self.driver.alive(h):
            if self.state is State.STOPPING:
                self._escalate(now)
            return out
        if h is not None:
            self.driver.kill(h)  # what the command left behind in its group goes too
            if not self.driver.gone(h):
                return out
        return [*out, self.end(self._ending())]

    def _escalate(self, now: float) -> None:
        st = self.stop
        assert st is not None and self.handle is not None
        saved = st["phase"] == "checkpoint" and self._saved_since(st["since"])
        if now < st["deadline"] and not saved:
            return
        if st["phase"] in ("checkpoint",):
            st.update(phase="term", deadline=now + self.timing.term_wait_s)
            self._signal(signal.SIGTERM)
        elif st["phase"] == "term":
            st.update(phase="kill", killed=True)
            self.driver.kill(self.handle)
        self.d.put("stop", st)

    def _ending(self) -> Event:
        status = self.d.get("exit") or {}
        if "launch_error" in status:
            return {"type": "FAILED", "cause": "LAUNCH_ERROR", "detail": status["launch_error"]}
        code = status.get("exit_code")
        st = self.stop
        if code is None and st and st.get("killed"):
            code = -signal.SIGKILL
        stderr = tail(self.d.file("stderr.log"), self.timing.stderr_tail_bytes)
        if st is not None:
            ev: Event = {"type": st["kind"], "exit_code": code, "detail": st["detail"]}
            if st["kind"] == "EVICTED":
                ev["progress"] = self.progress
            if st["kind"] == "TIMEOUT":
                ev["stderr_tail"] = stderr
            return ev
        if code == 0:
            return {"type": "FINISHED", "exit_code": 0, "progress": 1.0}
        detail = (
            f"exited with {code}"
            if code is not None
            else "ended without an exit status (killed while the executor was down)"
        )
        return {
            "type": "FAILED",
            "cause": "EXIT",
            "exit_code": code,
            "detail": detail,
            "stderr_tail": stderr,
        }

    def end(self, event: Event) -> Event:
        self.state = State.ENDED
        self.ending = event
        return event

    def _signal(self, sig: int) -> None:
        if self.handle is not None:
            self.driver.signal(self.handle, sig)

    def _stat_key(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.progress_path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def _saved_since(self, since: float) -> bool:
        key = self._progress_key
        return key is not None and key[0] / 1e9 >= since

    def _checkpoints(self) -> list[Event]:
        """A CHECKPOINTED event each time the job rewrites its progress file."""
        key = self._stat_key()
        if key is None or key == self._progress_key:
            return []
        self._progress_key = key
        try:
            value = float(self.progress_path.read_text().strip())
        except (OSError, ValueError):
            return []
        self.progress = min(1.0, max(0.0, value))
        return [{"type": "CHECKPOINTED", "progress": self.progress}]
