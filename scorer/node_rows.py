"""How a node's facts are encoded in ClusterState's rows: milli-GPU units and the free-share
thresholds of the fragmentation profile, small integers for names (regions, zones, racks,
models, stacks), the NVLink island of each GPU and the compute capability.
"""

from __future__ import annotations

import numpy as np

from scorer.catalog import GpuModelSpec
from scorer.types import NodeSpec

__all__ = ["FULL_GPU", "SHARE_THRESHOLDS", "Interner", "island_ids", "sm_version"]

FULL_GPU = 1000  # milli-GPU of a whole GPU
# free-share thresholds of the per-node fragmentation profile (multiples of 125 milli)
SHARE_THRESHOLDS = np.arange(1, 9, dtype=np.int64) * 125


class Interner:
    """Stable small integers for names (regions, zones, racks, models)."""

    def __init__(self) -> None:
        self.names: list[object] = []
        self.index: dict[object, int] = {}
        self.labels: tuple[str, ...] = ()

    def __call__(self, name: object) -> int:
        idx = self.index.get(name)
        if idx is None:
            idx = self.index[name] = len(self.names)
            self.names.append(name)
            self.labels = (*self.labels, str(name))
        return idx


def island_ids(node: NodeSpec) -> list[int]:
    """NVLink island of each GPU: declared islands, else one island (NVLink) or one per GPU."""
    if node.nvlink_islands:
        ids = list(range(len(node.nvlink_islands), len(node.nvlink_islands) + node.gpu_count))
        for island, members in enumerate(node.nvlink_islands):
            for gpu in members:
                if 0 <= gpu < node.gpu_count:
                    ids[gpu] = island
        return ids
    if node.interconnect.lower() != "pcie":
        return [0] * node.gpu_count
    return list(range(node.gpu_count))


def sm_version(declared: str | None, spec: GpuModelSpec | None) -> float:
    """The node's compute capability as declared ("9.0"), else the catalogue's."""
    try:
        return float(declared) if declared else (spec.compute_capability if spec else 0.0)
    except ValueError:
        return spec.compute_capability if spec else 0.0
