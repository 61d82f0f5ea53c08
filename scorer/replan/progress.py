"""Where a running job stands, from what the scheduler knows: when its segment started, how
fast it runs there, the work it had done before, and its checkpoint period.

Work is counted in reference-seconds (a job's `expected_duration_s` on its reference GPU); a
segment runs `speed` reference-seconds per second after `restore_s` spent reloading. Periodic
checkpoints fall every `interval` seconds of compute in the segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scorer.types import Assignment, JobSpec

__all__ = ["MoveCost", "RunningJob", "move_cost"]


@dataclass(frozen=True)
class RunningJob:
    """A placed job as the re-planner sees it."""

    job: JobSpec
    region: str
    gpu_model: str
    assignments: tuple[Assignment, ...]
    speed: float  # reference-seconds per second where it runs
    started_ms: int  # this segment's start
    done_s: float = 0.0  # reference-seconds done before this segment
    restore_s: float = 0.0  # this segment's restore (0 on a fresh start)
    moves: int = 0  # migrations so far
    last_move_ms: int | None = None

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def duration_s(self) -> float | None:
        return self.job.expected_duration_s

    def compute_s(self, now_ms: int) -> float:
        """Seconds of compute in this segment so far (none while restoring)."""
        return max(0.0, (now_ms - self.started_ms) / 1000 - self.restore_s)

    def work_done(self, now_ms: int) -> float:
        return self.done_s + self.compute_s(now_ms) * self.speed

    def remaining(self, now_ms: int) -> float | None:
        """Reference-seconds still to do (None without a duration estimate)."""
        if self.duration_s is None:
            return None
        return max(0.0, self.duration_s - self.work_done(now_ms))

    def finish_at(self, now_ms: int) -> float | None:
        """Expected finish staying put, in seconds from `now_ms`."""
        left = self.remaining(now_ms)
        if left is None or self.speed <= 0:
            return None
        restoring = max(0.0, self.restore_s - (now_ms - self.started_ms) / 1000)
        return restoring + left / self.speed

    def lost_on_stop(self, now_ms: int, interval_s: float) -> float:
        """Reference-seconds since the last periodic checkpoint: lost if it stops now."""
        compute = self.compute_s(now_ms)
        kept = math.floor(compute / interval_s) * interval_s if interval_s > 0 else 0.0
        return (compute - kept) * self.speed


@dataclass(frozen=True)
class MoveCost:
    """What moving a job now to GPUs of speed `new_speed` costs and gains (seconds)."""

    stay_s: float  # expected time to finish where it is
    move_s: float  # expected time to finish after the move
    restore_s: float
    lost_s: float  # compute seconds (at the old speed) lost since the last checkpoint
    saved_s: float  # stay_s - move_s

    def pays(self, margin_s: float, margin_frac: float) -> bool:
        """Worth it: the move saves more than the margin (a fixed part plus a share of what
        the job still needs), so it can never make the job finish later."""
        return self.saved_s > margin_s + margin_frac * self.stay_s


def move_cost(
    run: RunningJob,
    now_ms: int,
    new_speed: float,
    *,
    restore_s: float,
    interval_s: float,
    checkpoint_first: bool = False,
) -> MoveCost | None:
    """e.g. 3 h of reference work left at speed 0.25 (12 h to go), 600 s since the last
    checkpoint, moved to speed 1.0 with a 60 s restore: lost 600 x 0.25 = 150 ref-s, move
    = 60 + (10800 + 150) / 1.0 = 11010 s, saved 43200 - 11010 = 32190 s."""
    stay = run.finish_at(now_ms)
    left = run.remaining(now_ms)
    if stay is None or left is None or new_speed <= 0:
        return None
    lost = 0.0 if checkpoint_first else run.lost_on_stop(now_ms, interval_s)
    move = restore_s + (left + lost) / new_speed
    lost_s = lost / run.speed if run.speed > 0 else 0.0
    return MoveCost(stay, move, restore_s, lost_s, stay - move)
