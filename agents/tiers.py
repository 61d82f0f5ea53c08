"""Tiered telemetry cadence and delta filtering: pure logic, driven by an injected clock.

Per node, a `TierScheduler` decides what to send at a time `now_s`:

* REALTIME (every `realtime_s`): a full snapshot every `full_snapshot_s`, otherwise only the
  GPUs whose readings changed significantly since they were last sent (`significant_change`);
* HEARTBEAT: a bare event when nothing else was sent for `heartbeat_s`, so silence means down;
* NEARLINE (every `nearline_s`): host disk/network throughput;
* SLOW (every `slow_s`): energy since the last slow report and perf-per-watt.

Nodes start their cycles at a per-node offset so a fleet does not send every snapshot at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "REALTIME_FIELDS",
    "ReportPlan",
    "TierPolicy",
    "TierScheduler",
    "changed_mask",
    "significant_change",
]

# The GpuSample fields the delta thresholds look at.
REALTIME_FIELDS = ("healthy", "util_pct", "mem_used_mib", "temperature_c", "perf_factor")


@dataclass(frozen=True)
class TierPolicy:
    """Cadences (seconds) and significant-change thresholds."""

    realtime_s: float = 1.0
    nearline_s: float = 15.0
    slow_s: float = 300.0
    full_snapshot_s: float = 30.0
    heartbeat_s: float = 5.0  # keep below the worker's stale_after_s
    util_delta_pct: float = 5.0
    mem_delta_mib: int = 1024
    temp_delta_c: float = 3.0
    perf_delta: float = 0.05

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> TierPolicy:
        known = {f.name: f.type for f in dataclasses.fields(cls)}
        unknown = set(raw) - set(known)
        if unknown:
            raise ValueError(f"unknown tier setting {sorted(unknown)[0]!r}")
        values = {k: (int(v) if k == "mem_delta_mib" else float(v)) for k, v in raw.items()}
        if any(v <= 0 for k, v in values.items() if k.endswith("_s")):
            raise ValueError("tier periods must be > 0")
        return cls(**values)  # type: ignore[arg-type]

    def with_heartbeat_below(self, stale_after_s: float) -> TierPolicy:
        """This policy with a heartbeat at most half the staleness limit."""
        beat = min(self.heartbeat_s, max(self.realtime_s, stale_after_s / 2))
        return dataclasses.replace(self, heartbeat_s=beat)


def significant_change(
    prev: Mapping[str, Any] | None, cur: Mapping[str, Any], policy: TierPolicy
) -> bool:
    """Whether one GPU's reading differs enough from what was last sent to be worth sending."""
    if prev is None or prev["healthy"] != cur["healthy"] or cur.get("xid_events"):
        return True
    return (
        abs(cur["util_pct"] - prev["util_pct"]) >= policy.util_delta_pct
        or abs(cur["mem_used_mib"] - prev["mem_used_mib"]) >= policy.mem_delta_mib
        or abs(cur["temperature_c"] - prev["temperature_c"]) >= policy.temp_delta_c
        or abs(cur["perf_factor"] - prev["perf_factor"]) >= policy.perf_delta
    )


def changed_mask(
    prev: Mapping[str, np.ndarray], cur: Mapping[str, np.ndarray], policy: TierPolicy
) -> np.ndarray:
    """`significant_change` over arrays of many GPUs at once (keys: REALTIME_FIELDS)."""
    return (
        (prev["healthy"] != cur["healthy"])
        | (np.abs(cur["util_pct"] - prev["util_pct"]) >= policy.util_delta_pct)
        | (np.abs(cur["mem_used_mib"] - prev["mem_used_mib"]) >= policy.mem_delta_mib)
        | (np.abs(cur["temperature_c"] - prev["temperature_c"]) >= policy.temp_delta_c)
        | (np.abs(cur["perf_factor"] - prev["perf_factor"]) >= policy.perf_delta)
    )


@dataclass(frozen=True)
class ReportPlan:
    """What one node sends at one instant."""

    tier: str | None  # REALTIME | HEARTBEAT | None (only a NEARLINE/SLOW report is due)
    full_snapshot: bool
    gpu_indices: tuple[int, ...]
    nearline: bool = False
    slow: bool = False


class TierScheduler:
    """One node's cadence state. Call `plan(now_s, changed)` each real-time tick, then send it."""

    def __init__(self, policy: TierPolicy, start_s: float, offset_s: float = 0.0) -> None:
        self.policy = policy
        # Due times; the offset staggers nodes so snapshots spread over the period.
        self._next_full = start_s
        self._next_nearline = start_s + offset_s % policy.nearline_s
        self._next_slow = start_s + offset_s % policy.slow_s
        self._last_sent = float("-inf")
        self._first_full = True
        self._offset = offset_s

    @property
    def last_sent_s(self) -> float:
        return self._last_sent

    def plan(self, now_s: float, changed: Sequence[int], n_gpus: int) -> ReportPlan | None:
        """What to send now, given the indices of GPUs that changed significantly."""
        p = self.policy
        nearline = now_s >= self._next_nearline
        slow = now_s >= self._next_slow
        if nearline:
            self._next_nearline = _advance(self._next_nearline, p.nearline_s, now_s)
        if slow:
            self._next_slow = _advance(self._next_slow, p.slow_s, now_s)
        plan: ReportPlan | None
        sent_at = now_s
        if now_s >= self._next_full:
            # The first snapshot goes out at once; later ones on the node's staggered grid.
            if self._first_full:
                self._next_full += self._offset % p.full_snapshot_s + p.full_snapshot_s
                self._first_full = False
                # Back-date the first send so a fleet's heartbeats do not all fall due together.
                sent_at = now_s - self._offset % p.heartbeat_s
            self._next_full = _advance(self._next_full, p.full_snapshot_s, now_s)
            plan = ReportPlan("REALTIME", True, tuple(range(n_gpus)), nearline, slow)
        elif changed:
            plan = ReportPlan("REALTIME", False, tuple(sorted(changed)), nearline, slow)
        elif nearline or slow:  # that report proves liveness; no separate heartbeat
            plan = ReportPlan(None, False, (), nearline, slow)
        elif now_s - self._last_sent >= p.heartbeat_s - 1e-9:
            plan = ReportPlan("HEARTBEAT", False, (), nearline, slow)
        else:
            return None
        self._last_sent = sent_at
        return plan


def _advance(due: float, period: float, now_s: float) -> float:
    """The next due time after `now_s` on the grid `due + k * period` (skips missed slots)."""
    if due > now_s:
        return due
    steps = int((now_s - due) // period) + 1
    return due + steps * period
