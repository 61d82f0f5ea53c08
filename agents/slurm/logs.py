"""A Slurm job's --output / --error files as JobLog chunks on gpuflow.jobs.logs.

The bridge reads the files itself, so it must see them: on one host that is given; a real site
needs the output directory on a filesystem shared with the compute nodes (or slurmrestd).
Each stream ships at most `limit` bytes an epoch; the rest is counted in `skipped`; the final
chunk (`last`) comes when the job has ended.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.slurm.runs import Run

__all__ = ["LogShipper", "RunLogs", "tail"]

CHUNK = 64 * 1024


def tail(path: str | Path, limit: int = 4096) -> str:
    """The last `limit` bytes of a file as text ('' when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


@dataclass
class LogShipper:
    """One stream of one job epoch: what was read (`offset`), sent (`seq`) and skipped."""

    path: str
    stream: str  # STDOUT | STDERR
    job_id: str
    epoch: int
    node_id: str
    limit: int
    offset: int = 0
    seq: int = 0
    skipped: int = 0
    done: bool = False

    def state(self) -> dict[str, Any]:
        return {"offset": self.offset, "seq": self.seq, "skipped": self.skipped, "done": self.done}

    def poll(self, *, final: bool = False) -> list[dict[str, Any]]:
        """JobLog records for bytes written since the last poll; `final`: the job ended, the
        last record says `last` (sent even when empty)."""
        if self.done:
            return []
        out: list[dict[str, Any]] = []
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                while True:
                    data = f.read(CHUNK)
                    if not data:
                        break
                    out.extend(self._chunk(data))
        except OSError:
            pass  # not created yet (pending job) or gone
        if final:
            if out:
                out[-1]["last"] = True
            else:
                out.append(self._record(b"", last=True))
            self.done = True
        return out

    def _chunk(self, data: bytes) -> list[dict[str, Any]]:
        start = self.offset
        self.offset += len(data)
        room = max(0, self.limit - (start - self.skipped))
        keep = data[:room]
        self.skipped += len(data) - len(keep)
        return [self._record(keep, at=start)] if keep else []

    def _record(self, data: bytes, *, at: int | None = None, last: bool = False) -> dict[str, Any]:
        seq, self.seq = self.seq, self.seq + 1
        ts = int(time.time() * 1000)
        return {
            "event_id": f"{self.job_id}:{self.epoch}:{self.stream}:{seq}",
            "ts": ts,
            "job_id": self.job_id,
            "epoch": self.epoch,
            "node_id": self.node_id,
            "stream": self.stream,
            "seq": seq,
            "offset": self.offset if at is None else at,
            "data": data,
            "skipped": self.skipped,
            "last": last,
        }


class RunLogs:
    """The shippers of every live run's streams, resumed from where its book entry got to."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # bytes an epoch, a stream
        self._shippers: dict[tuple[str, str], LogShipper] = {}

    def poll(self, run: Run, *, final: bool) -> list[dict[str, Any]]:
        """JobLog records of the run's stdout, then stderr, since the last poll; `run.logs`
        keeps each stream's position. `final`: the run ended; its shippers are let go."""
        node = run.nodes[0] if run.nodes else ""
        out: list[dict[str, Any]] = []
        for stream, path in (("STDOUT", run.stdout), ("STDERR", run.stderr)):
            if not path or (stream == "STDERR" and path == run.stdout):
                continue
            key = (run.key, stream)
            shipper = self._shippers.get(key)
            if shipper is None:
                shipper = LogShipper(
                    path,
                    stream,
                    run.job_id,
                    run.epoch,
                    node,
                    self.limit,
                    **run.logs.get(stream, {}),
                )
                self._shippers[key] = shipper
            records = shipper.poll(final=final)
            if records:
                out.extend(records)
                run.logs[stream] = shipper.state()
            if final:
                self._shippers.pop(key, None)
        return out
