"""The fleet a service replay runs on: zones of one GPU model each, shared with training.

Training (preemptible batch work) fills what services leave free, up to its own demand; a
service's COLD tier takes GPUs back from it. One owner, `ServiceFleet`, writes the GPU counts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from agents.replay.csvio import read_rows, to_float, to_int
from agents.replay.errors import TraceError

__all__ = ["DEMO_FLEET", "FleetZone", "ServiceFleet", "read_fleet", "training_demand"]


@dataclass(frozen=True)
class FleetZone:
    region: str
    zone: str
    gpu_model: str
    gpus: int
    training_share: float = 0.75  # mean share of the zone training wants


# three regions of two zones of 128 H100, training wanting ~80 % of them (bench/services.py)
DEMO_FLEET = tuple(
    FleetZone(region, f"{region}-{z}", "H100", 128, training_share=0.8)
    for region in ("us-east", "us-west", "eu-west")
    for z in ("a", "b")
)


def read_fleet(path: Path) -> tuple[FleetZone, ...]:
    """zones.csv: region, zone, gpu_model, gpus[, training_share]."""
    zones = []
    for row in read_rows(path, ("region", "zone", "gpu_model", "gpus")):
        gpus = row.required("gpus", to_int)
        if gpus < 1:
            raise row.error("gpus", "must be >= 1")
        share = row.parse("training_share", to_float, 0.75)
        if not 0 <= share <= 1:
            raise row.error("training_share", "must be in [0, 1]")
        zones.append(
            FleetZone(row.get("region"), row.get("zone"), row.get("gpu_model"), gpus, share)
        )
    if not zones:
        raise TraceError(str(path), "no zones")
    return tuple(zones)


def training_demand(
    zones: Sequence[FleetZone], minutes: int, seed: int
) -> dict[str, NDArray[np.int64]]:
    """GPUs training wants per zone and minute: its share, wandering slowly (AR(1))."""
    rng = np.random.default_rng(seed + 7919)
    out: dict[str, NDArray[np.int64]] = {}
    for z in zones:
        walk = np.empty(minutes)
        level = 0.0
        for t, shock in enumerate(rng.normal(0.0, 0.01, size=minutes)):
            level = 0.995 * level + shock
            walk[t] = level
        share = np.clip(z.training_share + walk, 0.0, 1.0)
        out[z.zone] = np.floor(share * z.gpus).astype(np.int64)
    return out


class ServiceFleet:
    """GPUs per zone: held by services, used by training, free."""

    def __init__(self, zones: Sequence[FleetZone], demand: Mapping[str, NDArray[np.int64]]):
        self.zones = {z.zone: z for z in zones}
        self._demand = demand
        self.service_gpus = {z.zone: 0 for z in zones}
        self.training_gpus = {z.zone: 0 for z in zones}
        self.down: set[str] = set()  # zones lost (their nodes stale): no GPU there counts

    def free(self, zone: str) -> int:
        if zone in self.down:
            return 0
        return self.zones[zone].gpus - self.service_gpus[zone] - self.training_gpus[zone]

    def lose(self, zone: str) -> None:
        """The zone's nodes went stale: everything on them is gone."""
        self.down.add(zone)
        self.service_gpus[zone] = 0
        self.training_gpus[zone] = 0

    def restore(self, zone: str) -> None:
        self.down.discard(zone)

    def take_free(self, zone: str, gpus: int) -> None:
        if self.free(zone) < gpus:
            raise ValueError(f"zone {zone}: {gpus} GPUs asked, {self.free(zone)} free")
        self.service_gpus[zone] += gpus

    def reclaim(self, zone: str, gpus: int) -> None:
        """Take GPUs from training (it is preempted; the GPUs go to a service)."""
        if self.training_gpus[zone] < gpus:
            raise ValueError(f"zone {zone}: {gpus} GPUs asked of {self.training_gpus[zone]}")
        self.training_gpus[zone] -= gpus
        self.service_gpus[zone] += gpus

    def release(self, zone: str, gpus: int) -> None:
        self.service_gpus[zone] -= gpus

    def settle_training(self, minute: int) -> None:
        """Training takes what services leave, up to its demand this minute."""
        for name, zone in self.zones.items():
            if name in self.down:
                continue
            room = zone.gpus - self.service_gpus[name]
            self.training_gpus[name] = int(min(self._demand[name][minute], room))

    @property
    def total_gpus(self) -> int:
        return sum(z.gpus for z in self.zones.values())
