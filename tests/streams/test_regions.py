"""The router's view of regions other workers own: the newest window wins, old ones expire."""

from __future__ import annotations

import time

from infra.config import load_config
from schemas import SingleObjectCodec
from scorer import ClusterState, NodeSpec, Placer
from streams.scheduler.core import Scheduler
from streams.scheduler.regions import RemoteRegions


def summary(region: str, free: int, *, age_s: float = 0.0) -> dict:
    at = int((time.time() - age_s) * 1000)
    return {
        "region": region,
        "ts": at,
        "window_end": at,
        "free_gpus_by_model": {"H100": free},
        "max_free_per_node_by_model": {"H100": min(free, 8)},
        "total_gpus_by_model": {"H100": 64},
        "queue_depth": 0,
        "price_per_gpu_hour_mean": 3.0,
        "carbon_g_per_kwh": 100.0,
    }


def test_latest_summary_per_region_and_expiry() -> None:
    remote = RemoteRegions(load_config(env={}), SingleObjectCodec(), max_age_s=0.2)
    remote.apply(summary("eu", 8))
    remote.apply(summary("eu", 16))
    remote.apply(summary("eu", 2, age_s=0.1))  # an older window read late (start-up backlog)
    remote.apply(summary("us", 4))
    remote.apply(summary("ap", 4, age_s=5.0))  # its owner went quiet long ago
    views = remote.views()
    assert set(views) == {"eu", "us"} and views["eu"].free_gpus == {"H100": 16}
    time.sleep(0.3)
    assert remote.views() == {}


def test_router_prefers_its_own_exact_view_over_a_remote_summary() -> None:
    state = ClusterState()
    state.upsert_node(NodeSpec("n1", "eu", "H100", 8, 81920))
    remote = RemoteRegions(load_config(env={}), SingleObjectCodec())
    remote.apply(summary("eu", 0))  # stale news about our own region
    remote.apply(summary("ap", 8))  # a region only another worker owns
    s = Scheduler(
        state,
        Placer(state),
        reservations={},
        queue={},
        nodes={},
        partitions=4,
        view_ttl_s=0,
        remote_views=remote.views,
    )
    views = s.region_views()
    assert views["eu"].free_gpus == {"H100": 8}
    assert views["ap"].free_gpus == {"H100": 8}
