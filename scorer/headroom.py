"""Headroom: GPUs a region keeps free of low-priority work for the demand forecast to come.

    headroom = ceil(training x sum of forecast training GPUs requested over the window
                    + inference x peak forecast inference GPUs requested in one step of it)

with training = 1.2, inference = 1.5 and a one-hour window by default. Training requests add
up (every job arriving in the window needs its GPUs); inference is sized by its peak step,
since services scale up to meet their busiest interval. A job is low priority when its
`priority` is at most `low_priority_max` and its kind is one of `low_priority_kinds` (batch
and notebooks by default): such jobs may only take GPUs beyond the headroom; everything else
may use all free GPUs. Priority classes can map onto these two fields later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scorer.forecasts import ForecastCurve
from scorer.types import JobSpec

__all__ = ["HeadroomPolicy", "headroom_gpus", "is_low_priority", "outside_headroom"]


@dataclass(frozen=True)
class HeadroomPolicy:
    training: float = 1.2
    inference: float = 1.5
    window_s: float = 3600.0
    low_priority_max: int = 0
    low_priority_kinds: tuple[str, ...] = ("BATCH", "NOTEBOOK")

    def __post_init__(self) -> None:
        if self.training < 0 or self.inference < 0 or self.window_s <= 0:
            raise ValueError("headroom multipliers must be >= 0 and the window > 0")
        object.__setattr__(
            self, "low_priority_kinds", tuple(k.upper() for k in self.low_priority_kinds)
        )


def is_low_priority(job: JobSpec, policy: HeadroomPolicy) -> bool:
    """Work that must leave the headroom free."""
    return job.priority <= policy.low_priority_max and job.kind in policy.low_priority_kinds


def headroom_gpus(
    training: ForecastCurve | None,
    inference: ForecastCurve | None,
    now_ms: int,
    policy: HeadroomPolicy,
) -> int:
    """GPUs to keep free over [now, now + window) from the two forecasts (missing: 0)."""
    end = now_ms + int(policy.window_s * 1000)
    total = 0.0
    if training is not None:
        covered = training.mean(now_ms, end)
        if covered is not None:  # the mean per step x the steps in the window = the sum
            total += policy.training * covered * (end - now_ms) / training.step_ms
    if inference is not None:
        peak = inference.values(now_ms, end)
        if peak.size:
            total += policy.inference * float(peak.max())
    return max(0, math.ceil(total - 1e-9))


def outside_headroom(need_gpus: int, free_gpus: int, headroom: int) -> bool:
    """Whether `need_gpus` fit in the free GPUs beyond the headroom."""
    return need_gpus <= free_gpus - headroom
