"""Score: topology fit — keep a gang inside one NVLink island, else one node.

Per node (whole gang on it): 100 when one island holds it, 70 across NVLink/HCCS islands,
40 over PCIe. A gang spread over nodes is scored by the domain it spans instead
(`domain_score`): node 100 > rack 75 > zone 50 > region 25 > cross-region 0.
"""

from __future__ import annotations

import numpy as np

from scorer.framework import CycleContext

__all__ = ["DOMAIN_SCORES", "NAME", "TopologyScore", "domain_score", "node_topology_score"]

NAME = "topology"
DOMAIN_SCORES = {"node": 100.0, "rack": 75.0, "zone": 50.0, "region": 25.0, "global": 0.0}


class TopologyScore:
    name = NAME

    def score(self, ctx: CycleContext, slots: np.ndarray) -> np.ndarray | float:
        if ctx.job.gpu_count == 1:
            return 100.0  # one GPU (or a share) does not communicate
        k = ctx.gpus_taken(slots)
        link = ctx.models.link_gbs[ctx.state.model[slots]]
        return node_topology_score(k, ctx.state.island_free[slots], link)


def node_topology_score(
    gpus: np.ndarray | int, island_free: np.ndarray, link_gbs: np.ndarray
) -> np.ndarray:
    """100 if an island fits the gang (or 1 GPU), else 70 with fast links (>100 GB/s), else 40."""
    one_island = (gpus <= 1) | (island_free >= gpus)
    return np.where(one_island, 100.0, np.where(link_gbs > 100, 70.0, 40.0))


def domain_score(level: str) -> float:
    return DOMAIN_SCORES[level]
