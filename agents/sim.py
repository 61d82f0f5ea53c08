"""Vectorised GPU twin: believable per-GPU load, thermals, clocks and faults for many GPUs.

One `GpuTwin` holds numpy arrays for every GPU of a fleet (or of one simulated node) and
advances them in steps. Busy/idle follows a two-state Markov chain whose stationary busy share
is the target load; power follows utilisation up to the TDP (power cap); temperature relaxes
towards ambient + power-driven rise; GPUs with poor cooling cross the thermal slowdown point,
so their SM clock and `perf_factor` drop to 0.8-0.95 with consistent throttle-reason bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from agents.models import physics

__all__ = ["THROTTLE", "GpuTwin", "TwinGpu"]

# NVML clocks-event reason bits (nvmlClocksEventReason*).
THROTTLE = {
    "gpu_idle": 0x1,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
}
_SLOWDOWN_C = 84.0  # software thermal slowdown starts here
_HW_SLOWDOWN_C = 90.0
_TAU_S = 20.0  # thermal time constant
_MEAN_JOB_S = 600.0


@dataclass(frozen=True)
class TwinGpu:
    """Static description of one simulated GPU."""

    model: str
    memory_mib: int
    in_island: bool  # shares a fast link with other GPUs
    poor_cooling: bool


class GpuTwin:
    """State of many simulated GPUs, advanced with `step`."""

    def __init__(self, gpus: Sequence[TwinGpu], rng: np.random.Generator) -> None:
        n = len(gpus)
        self.n = n
        self.rng = rng
        env = [physics(g.model) for g in gpus]
        self.tdp = np.array([e.tdp_w for e in env])
        self.idle_w = np.array([e.idle_w for e in env])
        self.max_clk = np.array([e.max_sm_mhz for e in env], dtype=float)
        self.idle_clk = np.array([e.idle_sm_mhz for e in env], dtype=float)
        self.mem_total = np.array([g.memory_mib for g in gpus], dtype=float)
        self.in_island = np.array([g.in_island for g in gpus])
        poor = np.array([g.poor_cooling for g in gpus])
        self.ambient = rng.uniform(22.0, 30.0, n) + np.where(poor, 6.0, 0.0)
        self.gain = np.where(poor, rng.uniform(1.3, 1.5, n), rng.uniform(0.85, 1.1, n))
        self.busy = np.zeros(n, dtype=bool)
        self.job_mem = rng.uniform(0.3, 0.95, n)
        self.job_bw = rng.uniform(0.2, 0.9, n)
        self.job_intensity = rng.uniform(0.75, 1.05, n)
        self.job_link = rng.uniform(2_000.0, 40_000.0, n)
        self.temperature = self.ambient + 5.0
        self.util = np.zeros(n)
        self.mem_used = np.zeros(n)
        self.power = self.idle_w.copy()
        self.clock = self.idle_clk.copy()
        self.throttle = np.full(n, THROTTLE["gpu_idle"], dtype=np.int64)
        self.perf = np.where(poor, 0.85, 1.0)
        self.energy_j = np.zeros(n)
        self.healthy = np.ones(n, dtype=bool)
        self.ecc = np.zeros(n, dtype=np.int64)
        self.pending_xid: dict[int, list[int]] = {}
        self._started = False

    def step(self, dt_s: float, target_busy: np.ndarray) -> None:
        """Advance by `dt_s` seconds towards a per-GPU target busy share (0..1)."""
        target = np.clip(target_busy, 0.02, 0.97)
        if not self._started:  # start in the stationary distribution, thermally settled
            self.busy = self.rng.random(self.n) < target
            self._started = True
            self._load()
            for _ in range(12):
                self._thermals(_TAU_S * 5)
        else:
            self._switch_jobs(dt_s, target)
            self._load()
            self._thermals(dt_s)
        self.energy_j += self.power * dt_s
        self._mask_lost()

    def _switch_jobs(self, dt_s: float, target: np.ndarray) -> None:
        p_off = min(1.0, dt_s / _MEAN_JOB_S)
        p_on = np.minimum(1.0, p_off * target / (1.0 - target))
        u = self.rng.random(self.n)
        start = ~self.busy & (u < p_on)
        stop = self.busy & (u < p_off)
        k = int(start.sum())
        if k:  # a new job brings its own memory/bandwidth/intensity profile
            self.job_mem[start] = self.rng.uniform(0.3, 0.95, k)
            self.job_bw[start] = self.rng.uniform(0.2, 0.9, k)
            self.job_intensity[start] = self.rng.uniform(0.75, 1.05, k)
            self.job_link[start] = self.rng.uniform(2_000.0, 40_000.0, k)
        self.busy = (self.busy | start) & ~stop

    def _load(self) -> None:
        noise = self.rng.normal(0.0, 1.0, self.n)
        self.util = np.where(self.busy, np.clip(88.0 * self.job_intensity + noise, 40, 100), 0.0)
        idle_mem = np.minimum(self.mem_total, 450.0)
        self.mem_used = np.where(self.busy, self.job_mem * self.mem_total, idle_mem)

    def _thermals(self, dt_s: float) -> None:
        demand = self.idle_w + (self.tdp - self.idle_w) * self.util / 100.0 * self.job_intensity
        capped = demand > 0.98 * self.tdp
        over = np.clip(self.temperature - _SLOWDOWN_C, 0.0, None)
        clock_factor = np.clip((1.0 - 0.035 * over) * np.where(capped, 0.95, 1.0), 0.8, 1.0)
        self.power = np.minimum(demand, self.tdp) * np.where(self.busy, clock_factor, 1.0)
        rise = 55.0 * self.gain * self.power / self.tdp
        alpha = 1.0 - np.exp(-dt_s / _TAU_S)
        self.temperature = self.temperature + (self.ambient + rise - self.temperature) * alpha
        self.clock = np.where(self.busy, np.round(self.max_clk * clock_factor), self.idle_clk)
        bits = np.where(self.busy, 0, THROTTLE["gpu_idle"])
        bits = bits | np.where(self.busy & capped, THROTTLE["sw_power_cap"], 0)
        bits = bits | np.where(self.busy & (over > 0), THROTTLE["sw_thermal"], 0)
        hot = self.busy & (self.temperature > _HW_SLOWDOWN_C)
        hw = np.where(hot, THROTTLE["hw_thermal"] | THROTTLE["hw_slowdown"], 0)
        self.throttle = (bits | hw).astype(np.int64)
        # Measured speed: a slow average of the clock ratio while working.
        ratio = self.clock / self.max_clk
        self.perf = np.where(self.busy, 0.8 * self.perf + 0.2 * ratio, self.perf)

    def _mask_lost(self) -> None:
        lost = ~self.healthy
        if lost.any():
            for arr in (self.util, self.mem_used, self.power, self.clock):
                arr[lost] = 0.0
            self.busy[lost] = False

    # -- faults ---------------------------------------------------------------------------
    def lose(self, gpu: int) -> None:
        """The GPU fell off the bus: unhealthy, XID 79 reported once."""
        if self.healthy[gpu]:
            self.healthy[gpu] = False
            self.pending_xid.setdefault(gpu, []).append(79)

    def ecc_error(self, gpu: int) -> None:
        """An uncorrectable ECC error: count it, XID 48, unhealthy until reset."""
        self.ecc[gpu] += 1
        self.healthy[gpu] = False
        self.pending_xid.setdefault(gpu, []).append(48)

    def recover(self, gpu: int) -> None:
        self.healthy[gpu] = True

    def take_xids(self, gpu: int) -> list[int]:
        return self.pending_xid.pop(gpu, [])

    def nvlink_mbps(self) -> np.ndarray:
        """Per-GPU NVLink traffic (tx ~ rx) for GPUs in an island."""
        return np.where(self.busy & self.in_island, self.job_link * self.util / 100.0, 0.0)
