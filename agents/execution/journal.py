"""The executor's journal on local disk: one directory per (job, epoch) it ever claimed.

    {state_dir}/{job}/{epoch}/task.json     what to run, written BEFORE the launch (a claim:
                                            an epoch with a task.json is never started again)
                              pid.json      the shim's pid and kernel start time (re-attach)
                              exit.json     written by the shim when the command ends
                              stdout.log    the command's output, whole
                              stderr.log
                              shipped.json  how far each log was published
                              stop.json     why the executor is stopping it (survives a restart)
                              reported.json the lifecycle events already produced

Writes are atomic (temp file + rename), so a crash leaves the old or the new content.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

__all__ = ["EpochDir", "Journal", "read_json", "write_json"]


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class EpochDir:
    """One (job, epoch)'s directory."""

    def __init__(self, path: Path, job_id: str, epoch: int) -> None:
        self.path, self.job_id, self.epoch = path, job_id, epoch

    def file(self, name: str) -> Path:
        return self.path / name

    def get(self, name: str) -> Any:
        return read_json(self.path / f"{name}.json")

    def put(self, name: str, data: Any) -> None:
        write_json(self.path / f"{name}.json", data)

    def reported(self) -> list[str]:
        return list(self.get("reported") or [])

    def mark_reported(self, kind: str) -> None:
        self.put("reported", [*self.reported(), kind])

    @property
    def ended(self) -> bool:
        return "END" in self.reported()


class Journal:
    """Claims and finds epochs under `root`; keeps the last `keep` ended epochs' directories."""

    def __init__(self, root: Path, keep: int = 2000) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.keep = keep

    def epoch_dir(self, job_id: str, epoch: int) -> EpochDir:
        return EpochDir(self.root / quote(job_id, safe="") / str(epoch), job_id, epoch)

    def claimed(self, job_id: str, epoch: int) -> bool:
        return self.epoch_dir(job_id, epoch).file("task.json").exists()

    def claim(self, job_id: str, epoch: int, task: dict[str, Any]) -> EpochDir:
        d = self.epoch_dir(job_id, epoch)
        d.path.mkdir(parents=True, exist_ok=True)
        d.put("task", task)
        return d

    def epochs(self) -> Iterator[EpochDir]:
        """Every claimed epoch, oldest job directory first."""
        for job in sorted(self.root.iterdir(), key=lambda p: p.stat().st_mtime):
            if not job.is_dir():
                continue
            for epoch in sorted(job.iterdir(), key=lambda p: p.name):
                if epoch.name.isdigit() and (epoch / "task.json").exists():
                    yield EpochDir(epoch, unquote(job.name), int(epoch.name))

    def prune(self) -> int:
        """Forget the oldest ended jobs past `keep` (their logs were shipped)."""
        ended = [d for d in self.epochs() if d.ended]
        gone = 0
        for d in ended[: max(0, len(ended) - self.keep)]:
            shutil.rmtree(d.path, ignore_errors=True)
            gone += 1
        return gone
