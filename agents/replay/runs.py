"""What the digital twin keeps per job: the GPUs of one node given to it (`Slice`), what
happened to it while the replay ran (`JobRun`), and the GPUs it holds, per node and in all.
`slices_from` turns a PlacementDecision's assignment records into slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.replay.trace import TraceJob

__all__ = ["JobRun", "Slice", "gpu_count", "gpus_by_node", "slices_from"]


@dataclass(frozen=True)
class Slice:
    """GPUs of one node given to a job (the twin's copy of an Assignment)."""

    node_id: str
    gpu_indices: tuple[int, ...]
    gpu_milli: int = 1000


@dataclass
class JobRun:
    """What happened to one job (mutable while the replay runs)."""

    job: TraceJob
    submit_s: float
    first_start_s: float | None = None
    end_s: float | None = None
    rejected: bool = False
    done: float = 0.0  # reference-seconds of work kept
    slices: tuple[Slice, ...] = ()
    gpu_model: str | None = None
    segment_start: float = 0.0
    accounted_s: float = 0.0  # GPU time, cost and energy are counted up to here
    restore: float = 0.0
    rate: float = 0.0
    blocked: bool = False  # holds its GPUs, waits for host CPU / memory
    host_waits: int = 0
    epoch: int = 0  # bumps on every (re)placement, invalidating stale finish events
    preemptions: int = 0
    migrations: int = 0
    lost_gpu_seconds: float = 0.0  # computed work thrown away by evictions, x GPUs
    segments: list[tuple[float, float, float]] = field(default_factory=list)  # held (t0, t1, GPUs)
    held_since: float = 0.0
    gpu_seconds: float = 0.0  # GPUs held x time (shares count their fraction)
    cost: float = 0.0
    energy_kwh: float = 0.0
    model_seconds: dict[str, float] = field(default_factory=dict)
    rate_log: list[tuple[float, float, float]] = field(default_factory=list)  # since, work, rate

    @property
    def running(self) -> bool:
        return bool(self.slices)

    @property
    def finish_at(self) -> float:
        if self.rate_log:  # re-rated: from the last change on
            since, work, rate = self.rate_log[-1]
            return since + (self.job.duration_s - self.done - work) / rate
        return self.segment_start + self.restore + (self.job.duration_s - self.done) / self.rate


def gpus_by_node(run: JobRun) -> dict[str, int]:
    """GPUs the job holds on each node (a share counts as a GPU)."""
    out: dict[str, int] = {}
    for s in run.slices:
        out[s.node_id] = out.get(s.node_id, 0) + len(s.gpu_indices)
    return out


def gpu_count(slices: Sequence[Slice]) -> float:
    """GPUs held (a share counts its fraction)."""
    return sum(len(s.gpu_indices) * s.gpu_milli / 1000 for s in slices)


def slices_from(assignments: Iterable[Mapping[str, Any]]) -> tuple[Slice, ...]:
    """Twin slices from PlacementDecision assignment records."""
    return tuple(
        Slice(
            str(a["node_id"]),
            tuple(int(g) for g in a["gpu_indices"]),
            int(a.get("gpu_milli", 1000)),
        )
        for a in assignments
    )
