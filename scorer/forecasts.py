"""A forecast as the decision core sees it: values per step from an origin, nothing else."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ForecastCurve"]


@dataclass(frozen=True)
class ForecastCurve:
    """Point i covers [issued_ms + i*step_ms, issued_ms + (i+1)*step_ms)."""

    issued_ms: int
    step_s: int
    points: tuple[float, ...]
    model: str = ""  # the forecaster that made it (DemandForecast.model), where known

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple(float(p) for p in self.points))
        if self.step_s <= 0:
            raise ValueError(f"forecast step must be > 0 s, got {self.step_s}")

    @property
    def step_ms(self) -> int:
        return self.step_s * 1000

    @property
    def end_ms(self) -> int:
        return self.issued_ms + len(self.points) * self.step_ms

    def index_at(self, ms: int) -> int:
        """Index of the step holding `ms` (may be out of range)."""
        return int((ms - self.issued_ms) // self.step_ms)

    def values(self, from_ms: int, to_ms: int) -> np.ndarray:
        """Points of the steps that overlap [from_ms, to_ms), within the forecast."""
        first = max(0, self.index_at(from_ms))
        last = min(len(self.points), self.index_at(max(from_ms, to_ms - 1)) + 1)
        return np.asarray(self.points[first:last], dtype=float)

    def mean(self, from_ms: int, to_ms: int) -> float | None:
        """Time-weighted mean over [from_ms, to_ms) where the forecast covers it, else None."""
        lo, hi = max(from_ms, self.issued_ms), min(to_ms, self.end_ms)
        if hi <= lo:
            return None
        first, last = self.index_at(lo), self.index_at(hi - 1)
        starts = self.issued_ms + self.step_ms * np.arange(first, last + 1)
        overlap = np.minimum(starts + self.step_ms, hi) - np.maximum(starts, lo)
        pts = np.asarray(self.points[first : last + 1], dtype=float)
        return float((pts * overlap).sum() / overlap.sum())
