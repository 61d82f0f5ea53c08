"""The speed-aware queue: when capacity frees, the waiting job that gains most from it goes first.

Each waiting job is valued on the GPU model it would get now (the fastest free model it may use
that has room for it): `t` = its remaining work there (remaining reference-seconds / speed), and
`fit` = that speed over the job's best speed anywhere. Its key is t / fit - aging x waited:
short jobs first (shortest expected remaining time, which minimises the mean completion time),
each charged for running on a model slower than its best (a job 3x slower there counts 3x
longer), and every second waited takes `aging` seconds off (nothing starves: a job's key falls
below any newcomer's after it has waited its own t / fit). Jobs nothing free can host now sort
last. A pure function: callers order tenants and priorities first (DRF, priority), then call
this within each group.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Ranked", "Waiting", "fifo_order", "speed_aware_order"]


@dataclass(frozen=True)
class Waiting:
    """A waiting job as the queue sees it."""

    job_id: str
    queued_ms: int
    gpus: int  # whole GPUs it needs on one model (0 for a share or a CPU-only job)
    remaining_s: float | None  # reference-seconds of work left (None: unknown)
    speeds: Mapping[str, float] = field(default_factory=dict)  # model -> relative speed
    best_speed: float = 0.0  # on the fastest model it may use anywhere


@dataclass(frozen=True)
class Ranked:
    """A job in queue order, with the reason for its place."""

    job_id: str
    key: float
    model: str | None  # the model it would run on now (None: nothing free fits)
    explain: str


def fifo_order(waiting: Sequence[Waiting]) -> list[Ranked]:
    """Oldest first (the baselines' queue)."""
    ordered = sorted(waiting, key=lambda w: (w.queued_ms, w.job_id))
    return [Ranked(w.job_id, float(w.queued_ms), None, "fifo: oldest first") for w in ordered]


def speed_aware_order(
    waiting: Sequence[Waiting],
    free_gpus: Mapping[str, int],
    now_ms: int,
    *,
    aging: float = 1.0,
) -> list[Ranked]:
    """`waiting` ordered by key (see the module docstring), ties by age then id.

    e.g. V100 frees; A: 1 h left, 1.0 on V100 (its best) -> key 1 h; B: 3 h left, 1.0 -> 3 h:
    A first. A K80 frees instead; A runs at 0.1 there -> (10 h) / 0.1 = 100 h, B at 0.5 ->
    (6 h) / 0.5 = 12 h: B first, A waits for a better GPU (or ages into the K80).
    """
    ranked = [_rank(w, free_gpus, now_ms, aging) for w in waiting]
    order = sorted(
        zip(ranked, waiting, strict=True),
        key=lambda rw: (rw[0].key, rw[1].queued_ms, rw[1].job_id),
    )
    total = len(order)
    return [
        Ranked(r.job_id, r.key, r.model, f"speed-aware queue: {i + 1} of {total}; {r.explain}")
        for i, (r, _) in enumerate(order)
    ]


def _rank(w: Waiting, free_gpus: Mapping[str, int], now_ms: int, aging: float) -> Ranked:
    waited = max(0.0, (now_ms - w.queued_ms) / 1000)
    room = [m for m, s in w.speeds.items() if s > 0 and free_gpus.get(m, 0) >= max(1, w.gpus)]
    if not room or w.remaining_s is None or w.best_speed <= 0:
        why = "no free GPU it can use" if not room else "no duration estimate"
        return Ranked(w.job_id, math.inf, None, f"{why}; waited {waited / 3600:.2f} h")
    model = max(room, key=lambda m: (w.speeds[m], m))
    speed = w.speeds[model]
    here = w.remaining_s / speed
    fit = speed / w.best_speed
    key = here / fit - aging * waited
    explain = (
        f"{here / 3600:.2f} h expected on {model} ({fit:.0%} of its best speed), "
        f"waited {waited / 3600:.2f} h"
    )
    return Ranked(w.job_id, key, model, explain)
