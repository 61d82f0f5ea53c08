"""A placement turned into the task an executor runs (`build_task`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agents.execution.task import PROGRESS_FILE

__all__ = ["build_task"]


def build_task(
    d: dict[str, Any], mine: dict[str, Any], spec: dict[str, Any] | None, checkpoint_root: Path
) -> dict[str, Any]:
    """What a placement on this node runs (journalled as task.json): the decision's part for
    the node (`mine`) and the job's spec; a job without a command waits its expected duration
    (the twin's kind of job)."""
    spec = spec or {}
    command = list(spec.get("command") or [])
    if spec and not command:  # the twin's kind of job: wait its expected duration
        seconds = float(d.get("expected_duration_s") or spec.get("expected_duration_s") or 1)
        command = [
            sys.executable,
            "-I",  # a bare interpreter (no site, no environment): 11 ms of CPU a start, not 26
            "-S",
            "-c",
            "import sys,time; time.sleep(float(sys.argv[1]))",
            f"{seconds:.3f}",
        ]
    ckpt = checkpoint_root / _safe(d["job_id"])
    ckpt.mkdir(parents=True, exist_ok=True)
    progress = ckpt / PROGRESS_FILE
    return {
        "job_id": d["job_id"],
        "epoch": int(d.get("epoch") or 0),
        "region": d["region"],
        "node_id": mine["node_id"],
        "node_ids": [a["node_id"] for a in d["assignments"]],
        "lead": d["assignments"][0]["node_id"] == mine["node_id"],
        "gpu_indices": list(mine["gpu_indices"]),
        "gpu_milli": int(mine.get("gpu_milli", 1000)),
        "command": command,
        "env": dict(spec.get("env") or {}),
        "workdir": spec.get("workdir") or "",
        "image": spec.get("image"),
        "time_limit_s": int(spec.get("time_limit_s") or 0),
        "checkpoint_signal": spec.get("checkpoint_signal") or "",
        "checkpoint_grace_s": float(spec.get("checkpoint_grace_s") or 0),
        "checkpoint_dir": str(ckpt),
        "started_s": time.time(),
        "resume": any(p.name != PROGRESS_FILE for p in ckpt.iterdir()),
        "base_progress": _read_progress(progress),
    }


def _safe(job_id: str) -> str:
    return quote(job_id, safe="")


def _read_progress(path: Path) -> float:
    try:
        return min(1.0, max(0.0, float(path.read_text().strip())))
    except (OSError, ValueError):
        return 0.0
