"""Seeded node generation: N nodes spread over a fleet's regions, pools, zones and racks."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from agents.errors import FleetSpecError
from agents.models import physics
from agents.spec import FleetSpec, PoolSpec, RegionSpec

__all__ = ["apportion", "generate_nodes"]


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """Split `total` in proportion to `weights` (largest remainder; deterministic)."""
    s = float(sum(weights))
    if total <= 0 or s <= 0:
        return [0] * len(weights)
    exact = [total * w / s for w in weights]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (counts[i] - exact[i], i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return counts


def _pool_counts(spec: FleetSpec, n: int | None) -> list[tuple[RegionSpec, PoolSpec, int]]:
    pools = [(r, p) for r in spec.regions for p in r.pools]
    fixed = [p.count or 0 for _, p in pools]
    weighted = [0.0 if p.count is not None else p.weight for _, p in pools]
    if n is None:
        if sum(weighted) > 0 and sum(fixed) == 0:
            raise FleetSpecError("regions.*.pools.count", "give node counts or pass n")
        n = sum(fixed)
    if sum(fixed) > n:  # too many fixed nodes: shrink them proportionally
        counts = apportion(n, fixed)
    elif sum(weighted) > 0:
        counts = [f + w for f, w in zip(fixed, apportion(n - sum(fixed), weighted), strict=True)]
    else:
        counts = apportion(n, fixed)
    return [(r, p, c) for (r, p), c in zip(pools, counts, strict=True)]


def _islands(pool: PoolSpec) -> list[list[int]]:
    if pool.nvlink_islands:
        return [list(g) for g in pool.nvlink_islands]
    if pool.interconnect in ("nvlink", "xgmi", "hccs") and pool.gpus_per_node > 1:
        return [list(range(pool.gpus_per_node))]
    return [[i] for i in range(pool.gpus_per_node)]


def _placements(region: RegionSpec, k: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(zone, rack) for k nodes: round-robin over zones, racks filled in blocks."""
    zones = region.zones
    start = int(rng.integers(len(zones)))
    per_zone = max(1, math.ceil(k / len(zones)))
    per_rack = max(1, math.ceil(per_zone / region.racks_per_zone))
    out = []
    for i in range(k):
        zone = zones[(start + i) % len(zones)]
        slot = i // len(zones)
        rack_no = min(region.racks_per_zone - 1, slot // per_rack)
        out.append((zone, f"{zone}-r{rack_no:02d}"))
    return out


def _node(region: RegionSpec, pool: PoolSpec, node_id: str, zone: str, rack: str,
          driver: str) -> dict:  # fmt: skip
    env = physics(pool.gpu_model)
    return {
        "event_id": f"inv:{node_id}:0",
        "ts": 0,
        "schema": 1,
        "node_id": node_id,
        "region": region.name,
        "zone": zone,
        "rack": rack,
        "cloud": region.cloud,
        "gpu_model": pool.gpu_model,
        "gpu_count": pool.gpus_per_node,
        "gpu_memory_mib": pool.gpu_memory_mib,
        "interconnect": pool.interconnect,
        "nvlink_islands": _islands(pool),
        "cpu_milli": pool.cpu_milli or 12_000 * pool.gpus_per_node,
        "memory_mib": pool.memory_mib or 131_072 * pool.gpus_per_node,
        "price_per_gpu_hour": round(pool.price_per_gpu_hour * region.price_multiplier, 4),
        "compute_capability": env.compute_capability,
        "driver_version": driver if env.vendor == "nvidia" else None,
        "mig_enabled": pool.mig_enabled,
        "software_stack": pool.software_stack,
        "labels": {"pool": pool.name, "vendor": env.vendor, "simulated": "true"},
    }


def generate_nodes(spec: FleetSpec, n: int | None = None, seed: int = 0) -> list[dict]:
    """NodeInventory dicts for `n` nodes (default: the pools' counts), the same for one seed.

    Pools with `count` get that many nodes; the rest is shared by `weight`. Within a region,
    nodes spread round-robin over zones and fill racks in blocks, so a pool's nodes share racks.
    """
    rng = np.random.default_rng(seed)
    nodes: list[dict] = []
    for region, pool, k in _pool_counts(spec, n):
        if k == 0:
            continue
        places = _placements(region, k, rng)
        order = rng.permutation(k)  # which generated name lands in which rack
        for i in range(k):
            zone, rack = places[int(order[i])]
            node_id = f"{region.name}-{pool.name}-{i:05d}"
            nodes.append(_node(region, pool, node_id, zone, rack, spec.driver_version))
    ids = [x["node_id"] for x in nodes]
    if len(set(ids)) != len(ids):
        raise FleetSpecError("regions.*.pools.name", "pool names must be unique per region")
    return nodes
