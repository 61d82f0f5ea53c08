"""How a node's facts are encoded in ClusterState's rows: milli-GPU units and the free-share
thresholds of the fragmentation profile, small integers for names (regions, zones, racks,
models, stacks), the NVLink island of each GPU and the compute capability.
"""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from scorer.catalog import GpuModelSpec
from scorer.types import NodeSpec

__all__ = [
    "FULL_GPU",
    "SHARE_THRESHOLDS",
    "Interner",
    "RowSummary",
    "island_ids",
    "row_summary",
    "sm_version",
]

FULL_GPU = 1000  # milli-GPU of a whole GPU
# free-share thresholds of the per-node fragmentation profile (multiples of 125 milli)
SHARE_THRESHOLDS = np.arange(1, 9, dtype=np.int64) * 125
_THRESHOLDS = SHARE_THRESHOLDS.tolist()


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


class RowSummary(NamedTuple):
    """A node's derived columns: what a decision reads instead of its GPUs."""

    free_whole: int  # whole free healthy GPUs
    healthy: int
    free_total: int  # free milli on healthy GPUs
    share_below: list[int] | int  # per threshold T: free milli of healthy GPUs below T
    share_atleast: list[int] | int  # per threshold T: healthy GPUs with T or more free
    max_share: int
    island_free: int  # most whole free GPUs in one NVLink island


def row_summary(
    exists: list[bool], ok: list[bool], free: list[int], island: list[int]
) -> RowSummary:
    """The summary of one node's GPUs (plain lists: a node has a handful of GPUs, and plain
    Python over them costs less than numpy's per-call overhead).

    e.g. free [1000, 1000, 300, 0], all healthy, one island: 2 whole, 2300 milli, below 500:
    300 (the 300 GPU; 0 adds nothing), at least 500: 2.
    """
    usable, islands = [], []
    for e, o, f, i in zip(exists, ok, free, island, strict=True):
        if e and o:
            usable.append(f)
            if f == FULL_GPU:
                islands.append(i)
    if all(f == 0 or f == FULL_GPU for f in usable):  # no shares: nothing below any T
        below: list[int] | int = 0
        atleast: list[int] | int = len(islands)
    else:
        below = [sum(f for f in usable if f < t) for t in _THRESHOLDS]
        atleast = [sum(1 for f in usable if f >= t) for t in _THRESHOLDS]
    top = max(Counter(islands).values(), default=0)
    return RowSummary(len(islands), len(usable), sum(usable), below, atleast,
                      max(usable, default=0), top)  # fmt: skip
