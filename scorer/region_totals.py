"""Free GPU capacity per region and per (region, GPU model), kept as rows change.

Every decision asks its region's free share (the weights under load) and model pressure asks
the free milli-GPU per model: summing over a region's nodes each time would be a pass over
them, so each node's part is moved out and in again whenever its row changes. Regions are
the state's indices (-1: the fleet), asked for by name (None: the fleet).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from scorer.node_rows import FULL_GPU

__all__ = ["RegionTotals", "RowPart"]

RowPart = tuple[int, int, int, int]  # region, free milli-GPU, GPUs, model: a node's part


class RegionTotals:
    """Per region (the fleet last): free milli-GPU and GPUs of live nodes, and free milli-GPU
    per GPU model; `_counted[slot]` is what the slot adds now."""

    def __init__(self, region_index: Mapping[object, int]) -> None:
        self._index = region_index  # region name -> index, the state's (it grows there)
        self._free: list[int] = [0]
        self._gpus: list[int] = [0]
        self._counted: dict[int, RowPart] = {}
        self._model_free: dict[tuple[int, int], int] = {}  # (region or -1, model) -> milli

    def add_region(self) -> None:
        """A new region index (the fleet's totals stay last)."""
        self._free.insert(-1, 0)
        self._gpus.insert(-1, 0)

    def count(self, slot: int, part: RowPart | None) -> None:
        """The slot now adds `part` (None: the node is gone), in place of what it added."""
        region, free, gpus, model = self._counted.pop(slot, (-1, 0, 0, -1))
        if region >= 0:
            self._move(region, -free, -gpus, model)
        if part is not None:
            self._counted[slot] = part
            self._move(*part)

    def _move(self, region: int, free: int, gpus: int, model: int) -> None:
        by_model = self._model_free
        for r in (region, -1):
            self._free[r] += free
            self._gpus[r] += gpus
            by_model[r, model] = by_model.get((r, model), 0) + free

    def free_by_model(self, region: str | None, models: int) -> np.ndarray:
        """Free milli-GPU per model index 0..models-1 in `region` (None: the fleet), as floats
        (zeros for a region the state does not know)."""
        idx = -1 if region is None else self._index.get(region)
        if idx is None:
            return np.zeros(models)
        get = self._model_free.get
        return np.array([get((idx, m), 0) for m in range(models)], float)

    def free_share(self, region: str | None) -> float:
        """Free share of the region's GPUs (None: the fleet); 1.0 where there are none."""
        idx = -1 if region is None else self._index.get(region)
        if idx is None:
            return 1.0
        capacity = self._gpus[idx] * FULL_GPU
        return float(self._free[idx]) / capacity if capacity else 1.0
