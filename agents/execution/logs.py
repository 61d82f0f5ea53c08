"""Ships an epoch's stdout/stderr files to gpuflow.jobs.logs in chunks (JobLog records).

Bounded per job and epoch: each stream publishes its first `max_bytes`, then only counts what it
passes over (`skipped`), and at the end publishes the last `tail_bytes` (so `gpuflow logs`
shows the head and the tail of a long log); the whole file stays on the node's disk. How far
each stream got is journalled (`shipped.json`), so a restarted executor goes on where it was;
a chunk published twice (a crash between the publish and the journal) has the same
event_id and seq, and readers drop the second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.execution.journal import EpochDir

__all__ = ["LogLimits", "LogShipper", "tail"]

STREAMS = ("STDOUT", "STDERR")


@dataclass(frozen=True)
class LogLimits:
    chunk_bytes: int = 64 * 1024
    max_bytes: int = 1024 * 1024  # per stream and epoch
    tail_bytes: int = 64 * 1024
    per_tick_chunks: int = 8


def tail(path: Any, limit: int = 4096) -> str:
    """The last `limit` bytes of a file, as text, starting at a line when it can."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - limit))
            data = f.read()
    except OSError:
        return ""
    if size > limit and b"\n" in data:
        data = data.split(b"\n", 1)[1]
    return data.decode("utf-8", "replace")


class LogShipper:
    """One epoch's two streams; `ship(final)` publishes what is new through `send`."""

    def __init__(
        self,
        d: EpochDir,
        node_id: str,
        send: Callable[[dict[str, Any]], None],
        limits: LogLimits | None = None,
    ) -> None:
        self.d, self.node_id, self.send = d, node_id, send
        self.limits = limits or LogLimits()
        saved = d.get("shipped") or {}
        self.state = {
            s: saved.get(s, {"offset": 0, "seq": 0, "sent": 0, "last": False}) for s in STREAMS
        }

    @property
    def done(self) -> bool:
        return all(st["last"] for st in self.state.values())

    def ship(self, final: bool = False) -> int:
        """Publish new output (all of it and the last chunks when `final`); chunks sent."""
        sent = sum(self._stream(s, final) for s in STREAMS)
        if sent:
            self.d.put("shipped", self.state)
        return sent

    def _stream(self, stream: str, final: bool) -> int:
        st, lim = self.state[stream], self.limits
        if st["last"]:
            return 0
        path = self.d.file(f"{stream.lower()}.log")
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        sent = 0
        with open(path, "rb") if size else _Empty() as f:
            while (
                st["sent"] < lim.max_bytes
                and st["offset"] < size
                and (final or sent < lim.per_tick_chunks)
            ):
                want = min(lim.chunk_bytes, size - st["offset"], lim.max_bytes - st["sent"])
                f.seek(st["offset"])
                self._chunk(stream, st, f.read(want), skipped=0, last=False)
                sent += 1
            if final:
                start = max(st["offset"], size - lim.tail_bytes)
                f.seek(start)
                self._chunk(
                    stream,
                    st,
                    f.read(size - start),
                    skipped=start - st["offset"],
                    last=True,
                    offset=start,
                )
                sent += 1
        return sent

    def _chunk(
        self,
        stream: str,
        st: dict[str, Any],
        data: bytes,
        *,
        skipped: int,
        last: bool,
        offset: int | None = None,
    ) -> None:
        at = st["offset"] if offset is None else offset
        d = self.d
        self.send(
            {
                "event_id": f"{d.job_id}:{d.epoch}:{stream}:{st['seq']}",
                "ts": int(time.time() * 1000),
                "job_id": d.job_id,
                "epoch": d.epoch,
                "node_id": self.node_id,
                "stream": stream,
                "seq": st["seq"],
                "offset": at,
                "data": data,
                "skipped": skipped,
                "last": last,
            }
        )
        st["seq"] += 1
        st["offset"] = at + len(data)
        st["sent"] += len(data)
        st["last"] = last


class _Empty:
    """A stand-in for a log file that has nothing yet."""

    def __enter__(self) -> _Empty:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def seek(self, _: int) -> None:
        return None

    def read(self, _: int = -1) -> bytes:
        return b""
