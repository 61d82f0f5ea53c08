"""The three ways a service replay sizes a service each minute: gpuflow's (observed rate and
a 15-minute seasonal forecast, hysteresis, warm standbys, tiers), static peak provisioning, and
a reactive HPA-like autoscaler (70 % target utilisation, the last minute's rate, no forecast,
no warm pool)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scorer.services import (
    ScaleState,
    ServiceSpec,
    decide,
    hpa_desired,
    replicas_for,
    seasonal_forecast,
)

__all__ = [
    "SCALERS",
    "GpuflowScaler",
    "ReactiveScaler",
    "Scaler",
    "ScalingMinute",
    "StaticPeakScaler",
]

HORIZON_MIN = 15


@dataclass(frozen=True, eq=False)
class ScalingMinute:
    """What a scaler sees when it sizes a service: its pool, the minute, the rates before it."""

    spec: ServiceSpec
    pool: NDArray[np.float64]
    minute: int
    history: NDArray[np.float64]  # requests/s of each minute before `minute`

    @property
    def last_rps(self) -> float:
        return float(self.history[-1]) if len(self.history) else 0.0

    @property
    def previous_rps(self) -> float | None:
        return float(self.history[-2]) if len(self.history) > 1 else None


class Scaler(Protocol):
    """Replicas a service should have at `now.minute`, from the rates of the minutes before it."""

    name: str
    keeps_warm: bool

    def target(self, now: ScalingMinute) -> tuple[int, str]: ...


@dataclass
class GpuflowScaler:
    name: str = "gpuflow"
    keeps_warm: bool = True
    horizon_min: int = HORIZON_MIN
    _states: dict[str, ScaleState] = field(default_factory=dict)

    def target(self, now: ScalingMinute) -> tuple[int, str]:
        spec, history = now.spec, now.history
        ahead = list(seasonal_forecast(history, self.horizon_min)) if len(history) else [0.0]
        state = self._states.get(spec.name, ScaleState(spec.min_replicas))
        decision, self._states[spec.name] = decide(
            spec, now.pool, state, now.last_rps, ahead, now.minute * 60.0, now.previous_rps
        )
        return decision.target, decision.reason


@dataclass
class StaticPeakScaler:
    """Provisioned once for the trace's peak minute (an oracle peak: the best static sizing)."""

    peak_rps: dict[str, float]
    name: str = "static-peak"
    keeps_warm: bool = False

    def target(self, now: ScalingMinute) -> tuple[int, str]:
        peak = self.peak_rps[now.spec.name]
        return replicas_for(peak, now.pool, now.spec), f"static for peak {peak:.1f} rps"


@dataclass
class ReactiveScaler:
    """The HPA's rule on the last minute's rate; scale-down as soon as the window allows."""

    replica_max_rps: dict[str, float]
    target_utilisation: float = 0.7
    name: str = "reactive-hpa"
    keeps_warm: bool = False

    def target(self, now: ScalingMinute) -> tuple[int, str]:
        window = now.last_rps
        top = self.replica_max_rps[now.spec.name]
        want = hpa_desired(now.spec, window, top, self.target_utilisation)
        return want, f"window {window:.1f} rps at {self.target_utilisation:.0%} of {top:.1f}"


SCALERS = ("gpuflow", "static-peak", "reactive-hpa")
