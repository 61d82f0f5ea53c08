"""The GPU reader seam: what a node agent needs from its accelerators, real or simulated.

    GpuReader (protocol)
    ├── NvmlReader       real NVIDIA GPUs through NVML (agents.nvml)
    └── SimulatedReader  a twin of one node (agents.sim), for machines without GPUs and tests

`read()` never raises for one GPU: a GPU that cannot be read comes back unhealthy and the rest
are still reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from agents.models import physics
from agents.sim import GpuTwin, TwinGpu

__all__ = ["GpuInfo", "GpuReader", "GpuReading", "NodeGpus", "SimulatedReader"]


@dataclass(frozen=True)
class GpuInfo:
    """Static facts about one GPU."""

    index: int
    product_name: str  # as the driver reports it, e.g. "NVIDIA H100 80GB HBM3"
    model: str  # catalogue name, e.g. "H100"
    memory_mib: int
    compute_capability: str | None = None
    uuid: str = ""
    mig_enabled: bool = False


@dataclass(frozen=True)
class NodeGpus:
    """A node's accelerators and how they are wired."""

    gpus: tuple[GpuInfo, ...]
    driver_version: str | None = None
    interconnect: str = "pcie"
    nvlink_islands: tuple[tuple[int, ...], ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    software_stack: str = ""  # "cuda-12.6" from the driver; "" = unknown (issue 16)


@dataclass(frozen=True)
class GpuReading:
    """One GPU's readings at one instant (fields as in the GpuSample Avro record)."""

    index: int
    healthy: bool = True
    util_pct: float = 0.0
    mem_used_mib: int = 0
    mem_bw_util_pct: float = 0.0
    nvlink_tx_mbps: float = 0.0
    nvlink_rx_mbps: float = 0.0
    temperature_c: float = 0.0
    power_w: float = 0.0
    sm_clock_mhz: int = 0
    throttle_reasons: int = 0
    ecc_errors: int = 0
    xid_events: tuple[int, ...] = ()
    perf_factor: float = 1.0
    energy_j: float | None = None  # cumulative energy counter, when the GPU has one

    def sample(self) -> dict:
        """The GpuSample record of this reading."""
        return {
            "index": self.index,
            "healthy": self.healthy,
            "util_pct": round(self.util_pct, 1),
            "mem_used_mib": self.mem_used_mib,
            "mem_bw_util_pct": round(self.mem_bw_util_pct, 1),
            "nvlink_tx_mbps": round(self.nvlink_tx_mbps, 1),
            "nvlink_rx_mbps": round(self.nvlink_rx_mbps, 1),
            "temperature_c": round(self.temperature_c, 1),
            "power_w": round(self.power_w, 1),
            "sm_clock_mhz": self.sm_clock_mhz,
            "throttle_reasons": self.throttle_reasons,
            "ecc_errors": self.ecc_errors,
            "xid_events": list(self.xid_events),
            "perf_factor": round(self.perf_factor, 3),
        }


class GpuReader(Protocol):
    """What the node agent reads from its accelerators."""

    def inventory(self) -> NodeGpus: ...

    def read(self) -> list[GpuReading]:
        """Current readings of every GPU; an unreadable GPU comes back unhealthy."""
        ...

    def close(self) -> None: ...


class SimulatedReader:
    """A twin of one node: `gpu_count` GPUs of `model`, advanced by wall (or injected) time."""

    def __init__(
        self,
        model: str = "H100",
        gpu_count: int = 8,
        *,
        seed: int = 0,
        load: float = 0.7,
        islands: tuple[tuple[int, ...], ...] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        env = physics(model)
        linked = env.interconnect != "pcie" and gpu_count > 1
        self.islands = islands if islands is not None else (
            (tuple(range(gpu_count)),) if linked else tuple((i,) for i in range(gpu_count))
        )  # fmt: skip
        in_island = {i for g in self.islands if len(g) > 1 for i in g}
        self.model, self.env, self.load, self.clock = model, env, load, clock
        rng = np.random.default_rng(seed)
        gpus = [TwinGpu(model, env.memory_mib, i in in_island, False) for i in range(gpu_count)]
        self.twin = GpuTwin(gpus, rng)
        self._last: float | None = None

    def inventory(self) -> NodeGpus:
        gpus = tuple(
            GpuInfo(i, f"Simulated {self.model}", self.model, self.env.memory_mib,
                    self.env.compute_capability, f"SIM-{self.model}-{i}")
            for i in range(self.twin.n)
        )  # fmt: skip
        return NodeGpus(gpus, "simulated", self.env.interconnect, self.islands,
                        {"simulated": "true"})  # fmt: skip

    def read(self) -> list[GpuReading]:
        now = self.clock()
        dt = 1.0 if self._last is None else max(0.0, now - self._last)
        self._last = now
        t = self.twin
        t.step(dt, np.full(t.n, self.load))
        link = t.nvlink_mbps()
        return [self._reading(i, float(link[i])) for i in range(t.n)]

    def _reading(self, i: int, link: float) -> GpuReading:
        t = self.twin
        return GpuReading(
            index=i,
            healthy=bool(t.healthy[i]),
            util_pct=float(t.util[i]),
            mem_used_mib=int(t.mem_used[i]),
            mem_bw_util_pct=float(t.util[i] * t.job_bw[i]),
            nvlink_tx_mbps=link,
            nvlink_rx_mbps=link * 0.97,
            temperature_c=float(t.temperature[i]),
            power_w=float(t.power[i]),
            sm_clock_mhz=int(t.clock[i]),
            throttle_reasons=int(t.throttle[i]),
            ecc_errors=int(t.ecc[i]),
            xid_events=tuple(t.take_xids(i)),
            perf_factor=float(t.perf[i]),
            energy_j=float(t.energy_j[i]),
        )

    def lose(self, index: int) -> None:
        """Fault injection: GPU `index` falls off the bus."""
        self.twin.lose(index)

    def close(self) -> None:
        return None
