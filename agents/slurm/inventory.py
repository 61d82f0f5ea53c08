"""Slurm nodes as gpuflow nodes: NodeInventory and NodeTelemetry records.

A node's GRES GPUs become its GPUs, their type a catalogue model (`slurm.gres_models`, then
the catalogue's names and aliases: `h100` -> H100; an unknown type is published as itself, an
opaque model, with one warning). DRAIN, DOWN, FAIL (and not responding) nodes report
`node_healthy = false`. GPUs that Slurm gave to jobs gpuflow did not place (plain `sbatch`)
report `healthy = false`, so the placer never counts them free: the indices Slurm names
(`IDX:`) where they do not collide with GPUs gpuflow placed its own jobs on, else as many
other indices (Slurm picks a job's GPUs itself, so its indices and gpuflow's may differ).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from agents.slurm.commands import SlurmJob, SlurmNode
from agents.telemetry import SCHEMA, telemetry_event
from infra.config_sections import SlurmConfig
from scorer.catalog import Catalog, default_catalog

__all__ = ["GpuModels", "NodeReports", "foreign_gpus", "inventory_event", "node_telemetry"]

log = logging.getLogger(__name__)

LIVE_STATES = ("RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING")


class GpuModels:
    """GRES type -> catalogue model, warning once per unknown type."""

    def __init__(self, gres_map: Mapping[str, str], catalog: Catalog | None = None) -> None:
        self.gres_map = {k.lower(): v for k, v in gres_map.items()}
        self.catalog = catalog or default_catalog()
        self._warned: set[str] = set()

    def model(self, gres_type: str) -> str:
        key = gres_type.lower()
        if key in self.gres_map:
            return self.gres_map[key]
        for name in (gres_type, gres_type.upper()):
            if name in self.catalog:
                return self.catalog.canonical(name)
        name = gres_type or "gpu"
        if name not in self._warned:
            self._warned.add(name)
            log.warning(
                "slurm GRES type %r is not in the catalogue: an opaque model "
                "(map it with slurm.gres_models)",
                name,
            )
        return name

    def memory_mib(self, model: str) -> int:
        spec = self.catalog.get(model)
        return spec.memory_mib if spec is not None else 0


def inventory_event(
    node: SlurmNode, region: str, settings: SlurmConfig, models: GpuModels, now_ms: int
) -> dict[str, object]:
    model = models.model(node.gpu_type)
    node_id = settings.node_prefix + node.name
    labels = {
        "slurm_node": node.name,
        "slurm_partitions": ",".join(node.partitions),
        "slurm_gres_type": node.gpu_type,
    }
    if node.features:
        labels["slurm_features"] = ",".join(node.features)
    return {
        "event_id": f"inv:{node_id}:{now_ms}",
        "ts": now_ms,
        "schema": SCHEMA,
        "node_id": node_id,
        "region": region,
        "zone": settings.zone,
        "rack": "",
        "cloud": "slurm",
        "gpu_model": model,
        "gpu_count": node.gpus,
        "gpu_memory_mib": models.memory_mib(model),
        "interconnect": "pcie",
        "nvlink_islands": [],
        "cpu_milli": node.cpus * 1000,
        "memory_mib": node.memory_mib,
        "price_per_gpu_hour": settings.price_per_gpu_hour,
        "compute_capability": None,
        "driver_version": None,
        "mig_enabled": False,
        "software_stack": "",
        "labels": labels,
    }


def foreign_gpus(
    nodes: Iterable[SlurmNode],
    jobs: Iterable[SlurmJob],
    ours: set[int],
    placed: Mapping[str, set[int]],
) -> dict[str, set[int]]:
    """Per node, the GPU indices to report taken by jobs gpuflow did not place.

    `ours`: Slurm ids of the bridge's jobs; `placed`: node -> indices gpuflow placed its
    live jobs on. Without IDX in the job records, each foreign job's GPUs per node count."""
    by_node = {n.name: n for n in nodes}
    wanted: dict[str, list[int]] = {}
    count: dict[str, int] = {}
    for job in jobs:
        if job.job_id in ours or job.state not in LIVE_STATES:
            continue
        for name in job.nodes:
            idx = job.gpu_idx.get(name, ())
            wanted.setdefault(name, []).extend(idx)
            count[name] = count.get(name, 0) + (len(idx) or job.gpus_per_node)
    out: dict[str, set[int]] = {}
    for name, n in count.items():
        node = by_node.get(name)
        if node is None or n <= 0:
            continue
        mine = placed.get(name, set())
        free = [i for i in range(node.gpus) if i not in mine]
        first = [i for i in dict.fromkeys(wanted.get(name, [])) if i in free]
        rest = [i for i in free if i not in first]
        out[name] = set((first + rest)[: min(n, len(free))])
    return out


def node_telemetry(
    node: SlurmNode,
    region: str,
    settings: SlurmConfig,
    now_ms: int,
    taken: set[int],
    busy: set[int],
) -> dict[str, object]:
    """A full REALTIME snapshot: GPUs in `taken` unavailable, `taken | busy` at 100 %."""
    gpus = [
        {
            "index": i,
            "healthy": i not in taken,
            "util_pct": 100.0 if i in taken | busy else 0.0,
            "mem_used_mib": 0,
            "mem_bw_util_pct": 0.0,
            "nvlink_tx_mbps": 0.0,
            "nvlink_rx_mbps": 0.0,
            "temperature_c": 0.0,
            "power_w": 0.0,
            "sm_clock_mhz": 0,
            "throttle_reasons": 0,
            "ecc_errors": 0,
            "xid_events": [],
            "perf_factor": 1.0,
        }
        for i in range(node.gpus)
    ]
    return telemetry_event(
        settings.node_prefix + node.name,
        region,
        now_ms,
        "REALTIME",
        True,
        gpus,
        node_healthy=node.healthy,
    )


class NodeReports:
    """Which inventory and telemetry records are due: a node's on any change, every node's
    inventory every `inventory_every_s` and telemetry every `heartbeat_s`."""

    def __init__(self, region: str, settings: SlurmConfig, models: GpuModels) -> None:
        self.region, self.s, self.models = region, settings, models
        self._sent_inv: dict[str, tuple[Any, ...]] = {}
        self._sent_tel: dict[str, tuple[Any, ...]] = {}
        self._inv_at = self._tel_at = 0.0

    def due(
        self,
        nodes: Iterable[SlurmNode],
        taken: Mapping[str, set[int]],
        placed: Mapping[str, set[int]],
        now: float,
    ) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
        """(inventory, telemetry) records to send at monotonic `now`."""
        now_ms = int(time.time() * 1000)
        inv_due, tel_due = now >= self._inv_at, now >= self._tel_at
        inventory, telemetry = [], []
        for node in nodes:
            inv_sig = (node.cpus, node.memory_mib, node.gpu_type, node.gpus, node.partitions)
            if inv_due or self._sent_inv.get(node.name) != inv_sig:
                inventory.append(inventory_event(node, self.region, self.s, self.models, now_ms))
                self._sent_inv[node.name] = inv_sig
            mine, busy = taken.get(node.name, set()), placed.get(node.name, set())
            tel_sig = (node.healthy, tuple(sorted(mine)), tuple(sorted(busy)))
            if tel_due or self._sent_tel.get(node.name) != tel_sig:
                telemetry.append(node_telemetry(node, self.region, self.s, now_ms, mine, busy))
                self._sent_tel[node.name] = tel_sig
        if inv_due:
            self._inv_at = now + self.s.inventory_every_s
        if tel_due:
            self._tel_at = now + self.s.heartbeat_s
        return inventory, telemetry
