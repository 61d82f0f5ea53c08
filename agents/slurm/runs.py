"""The bridge's book of its Slurm jobs: one `Run` per gpuflow placement (job, epoch), what was
reported of it, and a state file so a restarted bridge neither submits twice nor loses an end.

How a Slurm job's end becomes a JobEvent (`end_event`):
  COMPLETED -> FINISHED (exit 0); FAILED / OUT_OF_MEMORY -> FAILED cause EXIT (126/127:
  LAUNCH_ERROR); TIMEOUT / DEADLINE -> TIMEOUT; NODE_FAIL / BOOT_FAIL -> FAILED cause NODE_LOST
  (gpuflow places it again); PREEMPTED -> EVICTED; CANCELLED -> CANCELLED, unless the bridge
  was stopping it for gpuflow: a preemption, migration or drained node -> EVICTED, a cancel ->
  CANCELLED, whatever state Slurm ends it in.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agents.slurm.commands import SlurmJob

__all__ = ["ENDED_STATES", "Run", "RunBook", "end_event"]

log = logging.getLogger(__name__)

ENDED_STATES = (
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "CANCELLED",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
    "REVOKED",
    "SPECIAL_EXIT",
)
# pending reasons that will not go away by waiting: refuse at once
HOPELESS = (
    "ReqNodeNotAvail",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "PartitionDown",
    "PartitionInactive",
    "BadConstraints",
    "NodeDown",
    "InvalidAccount",
    "InvalidQOS",
    "PartitionConfig",
    "JobHeldAdmin",
)


@dataclass
class Run:
    """One placement the bridge carries out as one Slurm job."""

    job_id: str
    epoch: int
    nodes: list[str]  # gpuflow node ids
    placed: dict[str, list[int]]  # Slurm node -> GPU indices gpuflow placed it on
    slurm_id: int = 0
    submitted_s: float = 0.0  # wall clock
    started: bool = False
    stop: str = ""  # "" | "evict" | "cancel" | "refuse"
    stop_detail: str = ""
    kill_at: float = 0.0  # wall clock: scancel then
    killed: bool = False
    stdout: str = ""
    stderr: str = ""
    logs: dict[str, dict[str, Any]] = field(default_factory=dict)  # stream -> shipper state
    signal: str = "USR1"  # the job's checkpoint signal, Slurm's spelling
    grace_s: float = 0.0  # the job's checkpoint grace (0: the decision's, then the bridge's)
    decision: dict[str, Any] = field(default_factory=dict)  # kept until submitted
    progress_file: str = ""

    @property
    def key(self) -> str:
        return f"{self.job_id}:{self.epoch}"


class RunBook:
    """Live runs and the (job, epoch) placements already ended, kept in a JSON file."""

    def __init__(self, path: Path, *, remember: int = 10_000) -> None:
        self.path = path
        self.remember = remember
        self.runs: dict[str, Run] = {}  # key -> run
        self.ended: dict[str, None] = {}  # keys, oldest first
        self.dirty = False
        if path.is_file():
            self._load()

    def _load(self) -> None:
        doc = json.loads(self.path.read_text())
        self.runs = {k: Run(**v) for k, v in doc.get("runs", {}).items()}
        self.ended = dict.fromkeys(doc.get("ended", []))
        log.info("slurm bridge state read runs=%d ended=%d", len(self.runs), len(self.ended))

    def save(self) -> None:
        if not self.dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        doc = {"runs": {k: asdict(r) for k, r in self.runs.items()}, "ended": list(self.ended)}
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, self.path)
        self.dirty = False

    def known(self, job_id: str, epoch: int) -> bool:
        key = f"{job_id}:{epoch}"
        return key in self.runs or key in self.ended

    def add(self, run: Run) -> None:
        self.runs[run.key] = run
        self.dirty = True

    def end(self, run: Run) -> None:
        self.runs.pop(run.key, None)
        self.ended[run.key] = None
        while len(self.ended) > self.remember:
            del self.ended[next(iter(self.ended))]
        self.dirty = True

    def live_for(self, job_id: str) -> Run | None:
        """The job's newest live run."""
        found = [r for r in self.runs.values() if r.job_id == job_id]
        return max(found, key=lambda r: r.epoch) if found else None


def _exit(job: SlurmJob) -> int:
    return -job.exit_signal if job.exit_signal else job.exit_code


def end_event(run: Run, job: SlurmJob) -> tuple[str, dict[str, Any]]:
    """The JobEvent type and fields for a run whose Slurm job ended in `job.state`."""
    code, state = _exit(job), job.state
    detail = f"slurm job {job.job_id} {state} exit {job.exit_code}:{job.exit_signal}"
    if run.stop == "evict":
        return "EVICTED", {"detail": run.stop_detail or detail, "exit_code": code}
    if run.stop == "refuse":
        return "FAILED", {"detail": run.stop_detail or detail, "cause": "REFUSED"}
    if run.stop == "cancel":
        return "CANCELLED", {"detail": run.stop_detail or detail, "exit_code": code}
    if state == "COMPLETED":
        return "FINISHED", {"detail": detail, "exit_code": code, "cause": "EXIT"}
    if state in ("TIMEOUT", "DEADLINE"):
        return "TIMEOUT", {"detail": detail, "exit_code": code}
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return "FAILED", {"detail": detail, "exit_code": code, "cause": "NODE_LOST"}
    if state == "PREEMPTED":
        return "EVICTED", {"detail": detail, "exit_code": code}
    if state == "CANCELLED":
        return "CANCELLED", {"detail": detail + " (cancelled in Slurm)", "exit_code": code}
    cause = "LAUNCH_ERROR" if job.exit_code in (126, 127) and not job.exit_signal else "EXIT"
    return "FAILED", {"detail": detail, "exit_code": code, "cause": cause}
