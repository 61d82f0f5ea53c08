"""Per-region summaries of a ClusterState, for the router (one vectorised pass over nodes).

They read the state through `RegionRows`, which ClusterState satisfies (and whose
`region_views` is this module's), so this module needs no import of the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from scorer.types import RegionView

__all__ = ["RegionRows", "region_view", "region_views"]


class RegionRows(Protocol):
    """What a region's summary reads of the state: per-slot columns, names, grid signals."""

    @property
    def node_ok(self) -> np.ndarray: ...
    @property
    def region(self) -> np.ndarray: ...
    @property
    def model(self) -> np.ndarray: ...
    @property
    def free_whole(self) -> np.ndarray: ...
    @property
    def gpu_count(self) -> np.ndarray: ...
    @property
    def price(self) -> np.ndarray: ...
    @property
    def carbon(self) -> np.ndarray: ...
    @property
    def kwh_price(self) -> np.ndarray: ...
    @property
    def queue_depth(self) -> Mapping[str, int]: ...
    @property
    def models(self) -> tuple[str, ...]: ...
    @property
    def regions(self) -> tuple[str, ...]: ...
    def slots(self, region: str | None = None) -> np.ndarray: ...
    def region_index(self, region: str) -> int | None: ...
    def region_name(self, idx: int) -> str: ...


def region_views(state: RegionRows) -> dict[str, RegionView]:
    """Free/total GPUs, largest free block and cheapest price by model, plus grid signals,
    for every region (healthy nodes only)."""
    return _views(state, state.slots())


def region_view(state: RegionRows, region: str) -> RegionView:
    """The same summary for one region."""
    views = _views(state, state.slots(region))
    return views.get(region) or _view(state, state.region_index(region), region, {})


def _views(state: RegionRows, slots: np.ndarray) -> dict[str, RegionView]:
    live = slots[state.node_ok[slots]]
    models = state.models
    n_models = max(1, len(models))
    size = max(1, len(state.regions)) * n_models
    key = state.region[live].astype(np.int64) * n_models + state.model[live]
    free = np.bincount(key, weights=state.free_whole[live], minlength=size)
    total = np.bincount(key, weights=state.gpu_count[live], minlength=size)
    # largest block: free counts are small integers, so count (key, free) pairs and take the
    # highest free value present per key (much cheaper than np.maximum.at)
    width = int(state.free_whole[live].max(initial=0)) + 1
    seen = np.bincount(key * width + state.free_whole[live], minlength=size * width)
    present = seen.reshape(size, width) > 0
    largest = width - 1 - np.argmax(present[:, ::-1], axis=1)
    price = np.full(size, np.inf)
    np.minimum.at(price, key, state.price[live])
    by_region: dict[int, dict[str, tuple[int, int, int, float]]] = {}
    for k in np.flatnonzero(total):  # CPU-only nodes (no GPUs) add no model
        r, m = divmod(int(k), n_models)
        by_region.setdefault(r, {})[models[m]] = (
            int(free[k]),
            int(largest[k]),
            int(total[k]),
            float(price[k]),
        )
    regions = np.unique(state.region[slots])
    return {
        state.region_name(int(r)): _view(state, int(r), state.region_name(int(r)),
                                         by_region.get(int(r), {}))
        for r in regions
    }  # fmt: skip


def _view(
    state: RegionRows,
    idx: int | None,
    region: str,
    per_model: dict[str, tuple[int, int, int, float]],
) -> RegionView:
    return RegionView(
        region=region,
        free_gpus={m: v[0] for m, v in per_model.items()},
        largest_free_block={m: v[1] for m, v in per_model.items()},
        total_gpus={m: v[2] for m, v in per_model.items()},
        price_per_gpu_hour={m: v[3] for m, v in per_model.items()},
        queue_depth=state.queue_depth.get(region, 0),
        carbon_g_per_kwh=float(state.carbon[idx]) if idx is not None else None,
        price_per_kwh=float(state.kwh_price[idx]) if idx is not None else None,
    )
