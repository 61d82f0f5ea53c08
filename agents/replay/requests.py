"""Seeded per-minute request-rate traces for inference services (`gpuflow generate requests`).

A service's rate is its peak x a daily shape (a night trough, a morning and an evening hump)
x a weekly shape (weekends lower) x slow drift and per-minute noise, plus flash bursts: a
sudden step up (over one or two minutes) that decays over tens of minutes. File: CSV
`minute,service,rps`, minute 0 = Monday 00:00 UTC of the trace.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from agents.replay.csvio import read_rows, to_float, to_int
from agents.replay.errors import TraceError

__all__ = ["DEMO_SHAPES", "RequestShape", "generate_requests", "read_requests", "write_requests"]

DAY = 1440


@dataclass(frozen=True)
class RequestShape:
    """How one service's traffic looks."""

    peak_rps: float
    trough: float = 0.3  # night rate / peak
    weekend: float = 0.7  # weekend day / weekday
    noise: float = 0.04  # per-minute lognormal sigma
    drift: float = 0.05  # slow day-to-day level wander (sigma of a daily factor)
    bursts_per_day: float = 1.0
    burst_gain: tuple[float, float] = (1.3, 1.9)  # rate x this at a burst's top
    burst_minutes: tuple[int, int] = (10, 40)  # decay time constant range
    phase_min: int = 0  # shift of the daily shape (a service serving another time zone)


# the four example services' traffic (examples/services/*.yaml), as bench/services.py runs them
DEMO_SHAPES = {
    "chat": RequestShape(5000.0, trough=0.25, phase_min=0),
    "code": RequestShape(3300.0, trough=0.15, weekend=0.4, phase_min=60),
    "embed": RequestShape(27000.0, trough=0.35, weekend=0.8, phase_min=-300),
    "vision": RequestShape(1000.0, trough=0.3, phase_min=-360, bursts_per_day=1.5),
}


def _daily(minutes: NDArray[np.float64], trough: float) -> NDArray[np.float64]:
    hours = (minutes % DAY) / 60.0
    morning = np.exp(-(((hours - 10.5) / 2.6) ** 2))
    evening = 0.9 * np.exp(-(((hours - 19.5) / 2.2) ** 2))
    return np.asarray(trough + (1 - trough) * np.maximum(morning, evening))


def _weekly(n: int, weekend: float) -> NDArray[np.float64]:
    """Weekdays 1, weekend days `weekend`, changing over the three hours around midnight."""
    days = np.arange(n // DAY + 2)
    level = np.where(days % 7 >= 5, weekend, 1.0)
    ramp = 180
    knots_t = np.concatenate([[d * DAY - ramp / 2, d * DAY + ramp / 2] for d in days])
    knots_v = np.concatenate([[level[d - 1] if d else level[0], level[d]] for d in days])
    return np.interp(np.arange(n, dtype=np.float64), knots_t, knots_v)


def _bursts(n: int, shape: RequestShape, rng: np.random.Generator) -> NDArray[np.float64]:
    gain = np.ones(n)
    count = rng.poisson(shape.bursts_per_day * n / DAY)
    for start in rng.integers(0, n, size=count):
        top = rng.uniform(*shape.burst_gain) - 1.0
        tau = rng.uniform(*shape.burst_minutes)
        t = np.arange(n - start, dtype=np.float64)
        onset = np.minimum(1.0, (t + 1) / rng.integers(1, 3))  # up within one or two minutes
        gain[start:] += top * onset * np.exp(-t / tau)
    return gain


def _one(n: int, shape: RequestShape, rng: np.random.Generator) -> NDArray[np.float64]:
    minutes = np.arange(n, dtype=np.float64) + shape.phase_min
    week = _weekly(n, shape.weekend)
    days = math.ceil(n / DAY) + 1
    level = np.exp(rng.normal(0.0, shape.drift, size=days))
    drift = np.interp(np.arange(n), np.arange(days) * DAY, level)
    noise = np.exp(rng.normal(0.0, shape.noise, size=n))
    rate = shape.peak_rps * _daily(minutes, shape.trough) * week * drift * noise
    return np.asarray(rate * _bursts(n, shape, rng))


def generate_requests(
    shapes: Mapping[str, RequestShape], minutes: int, seed: int = 0
) -> dict[str, NDArray[np.float64]]:
    """Per-minute rates per service; the same seed gives the same trace."""
    rng = np.random.default_rng(seed)
    return {name: _one(minutes, shapes[name], rng) for name in sorted(shapes)}


def write_requests(path: Path, rates: Mapping[str, Sequence[float] | NDArray[np.float64]]) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["minute", "service", "rps"])
        for name in sorted(rates):
            for minute, rps in enumerate(rates[name]):
                out.writerow([minute, name, f"{float(rps):.3f}"])


def read_requests(path: Path) -> dict[str, NDArray[np.float64]]:
    """Rates per service from `minute,service,rps`; every service must cover the same minutes."""
    seen: dict[str, dict[int, float]] = {}
    for row in read_rows(path, ("minute", "service", "rps")):
        minute = row.required("minute", to_int)
        if minute < 0:
            raise row.error("minute", "must be >= 0")
        rps = row.required("rps", to_float)
        if rps < 0:
            raise row.error("rps", "must be >= 0")
        seen.setdefault(row.required("service", str), {})[minute] = rps
    if not seen:
        raise TraceError(str(path), "no rows")
    length = max(max(m) for m in seen.values()) + 1
    out: dict[str, NDArray[np.float64]] = {}
    for name, by_minute in seen.items():
        if len(by_minute) != length:
            raise TraceError(str(path), f"service {name} has {len(by_minute)} of {length} minutes")
        out[name] = np.array([by_minute[m] for m in range(length)])
    return out
