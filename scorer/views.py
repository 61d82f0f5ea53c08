"""Per-region summaries of a ClusterState, for the router."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scorer.types import RegionView

if TYPE_CHECKING:
    from scorer.state import ClusterState

__all__ = ["region_view", "region_views"]


def region_view(state: ClusterState, region: str) -> RegionView:
    """Free/total GPUs, largest free block and cheapest price by model, plus grid signals."""
    slots = state.slots(region)
    live = slots[state.node_ok[slots]]
    free, largest, total, price = {}, {}, {}, {}
    for m in np.unique(state.model[live]):
        of_model = live[state.model[live] == m]
        name = state.models[int(m)]
        free[name] = int(state.free_whole[of_model].sum())
        largest[name] = int(state.free_whole[of_model].max())
        total[name] = int(state.gpu_count[of_model].sum())
        price[name] = float(state.price[of_model].min())
    idx = state.region_index(region)
    return RegionView(
        region=region,
        free_gpus=free,
        largest_free_block=largest,
        total_gpus=total,
        price_per_gpu_hour=price,
        queue_depth=state.queue_depth.get(region, 0),
        carbon_g_per_kwh=float(state.carbon[idx]) if idx is not None else None,
        price_per_kwh=float(state.kwh_price[idx]) if idx is not None else None,
    )


def region_views(state: ClusterState) -> dict[str, RegionView]:
    return {r: region_view(state, r) for r in state.regions}
