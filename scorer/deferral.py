"""Green and cheap deferral: when should a deferrable job start, given the grid forecast?

A job with `deferrable_until_ts` may start any time until then. Each candidate start t (now,
and every forecast step boundary up to the deadline) is valued over the job's run
[t, t + duration) (its expected duration, else one step) as

    score(t) = w x carbon(t) / carbon(now) + (1 - w) x price(t) / price(now)

with the forecast's time-weighted means, w = `carbon_weight` (a signal without a forecast
drops out). The job is held for the lowest score, earliest on ties, when that is at least
`min_gain` below starting now; otherwise, and without a deadline or a forecast, it starts now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from scorer.forecasts import ForecastCurve
from scorer.types import JobSpec

__all__ = ["Deferral", "DeferralPolicy", "plan_deferral"]


@dataclass(frozen=True)
class DeferralPolicy:
    carbon_weight: float = 0.5  # 1: carbon only, 0: price only
    min_gain: float = 0.05

    def __post_init__(self) -> None:
        if not 0.0 <= self.carbon_weight <= 1.0 or self.min_gain < 0:
            raise ValueError("carbon_weight must be in [0, 1] and min_gain >= 0")


@dataclass(frozen=True)
class Deferral:
    """Hold the job until `start_ms`: its score there is `score` (1.0 = starting now)."""

    start_ms: int
    score: float
    reason: str


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _starts(now_ms: int, deadline_ms: int, curves: list[ForecastCurve]) -> np.ndarray:
    """Now, and every step boundary of the forecasts after now, up to the deadline."""
    out = {now_ms}
    for c in curves:
        bounds = c.issued_ms + c.step_ms * np.arange(len(c.points) + 1)
        out.update(int(b) for b in bounds if now_ms < b <= deadline_ms)
    return np.array(sorted(out), dtype=np.int64)


def _means(
    signals: list[tuple[ForecastCurve, float]], start_ms: int, run_ms: int
) -> list[float] | None:
    """Each signal's forecast mean over the run, or None where one is not covered."""
    means = [c.mean(start_ms, start_ms + run_ms) for c, _ in signals]
    if any(m is None or m <= 0 for m in means):
        return None
    return [float(m) for m in means if m is not None]


def plan_deferral(
    job: JobSpec,
    now_ms: int,
    *,
    carbon: ForecastCurve | None,
    price: ForecastCurve | None,
    policy: DeferralPolicy,
) -> Deferral | None:
    """When to release `job`, or None to start it now."""
    deadline = job.deferrable_until_ts
    weighted = ((carbon, policy.carbon_weight), (price, 1.0 - policy.carbon_weight))
    signals = [(c, w) for c, w in weighted if c is not None and w > 0]
    if deadline is None or deadline <= now_ms or not signals:
        return None
    step_ms = min(c.step_ms for c, _ in signals)
    run_ms = int(job.expected_duration_s * 1000) if job.expected_duration_s else step_ms
    now = _means(signals, now_ms, run_ms)
    if now is None:
        return None  # no forecast for now: nothing to compare a later start with
    weights = [w / sum(w for _, w in signals) for _, w in signals]
    best_t, best = now_ms, 1.0
    for t in _starts(now_ms, deadline, [c for c, _ in signals]):
        means = _means(signals, int(t), run_ms)
        if means is None:
            continue
        score = sum(w * m / n for w, m, n in zip(weights, means, now, strict=True))
        if score < best - 1e-12:
            best_t, best = int(t), score
    if best_t == now_ms or 1.0 - best < policy.min_gain:
        return None
    what = " and ".join(name for name, c in (("carbon", carbon), ("price", price)) if c is not None)
    reason = (
        f"deferred until {_iso(best_t)} for lower {what}: forecast {100 * (1 - best):.0f}% "
        f"below starting now (latest start {_iso(deadline)})"
    )
    return Deferral(best_t, best, reason)
