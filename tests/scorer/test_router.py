"""rank_regions: the router's ordering of regions from RegionViews."""

from __future__ import annotations

from scorer import JobSpec, RegionView, rank_regions


def _view(region: str, model: str = "H100", free: int = 8, **kw) -> RegionView:
    return RegionView(
        region=region,
        free_gpus={model: free},
        largest_free_block={model: min(free, 8)},
        total_gpus={model: 64},
        price_per_gpu_hour={},
        **kw,
    )


def test_only_allowed_regions_are_listed() -> None:
    views = {r: _view(r) for r in ("eu", "us", "ap")}
    ranked = rank_regions(JobSpec("j", allowed_regions=("eu", "ap")), views)
    assert {r for r, _ in ranked} == {"eu", "ap"}


def test_free_capacity_beats_a_full_region() -> None:
    views = {"full": _view("full", free=0), "free": _view("free", free=8)}
    assert [r for r, _ in rank_regions(JobSpec("j", gpu_count=4), views)] == ["free", "full"]


def test_a_region_that_can_never_host_the_job_scores_zero() -> None:
    views = {"t4": _view("t4", "T4"), "h100": _view("h100", "H100")}
    ranked = dict(rank_regions(JobSpec("j", precision="FP8"), views))  # no FP8 on T4
    assert ranked["t4"] == 0.0 and ranked["h100"] > 0


def test_data_locality_and_rtt() -> None:
    views = {r: _view(r) for r in ("eu", "us", "ap")}
    rtt = {("us", "eu"): 80.0, ("ap", "eu"): 190.0}
    ranked = rank_regions(JobSpec("j", data_region="eu"), views, rtt_ms=rtt)
    assert [r for r, _ in ranked] == ["eu", "us", "ap"]


def test_green_and_short_queue_win_ties() -> None:
    views = {
        "dirty": _view("dirty", carbon_g_per_kwh=700.0),
        "green": _view("green", carbon_g_per_kwh=30.0),
    }
    assert rank_regions(JobSpec("j"), views)[0][0] == "green"
    views = {"busy": _view("busy", queue_depth=50), "idle": _view("idle", queue_depth=0)}
    assert rank_regions(JobSpec("j"), views)[0][0] == "idle"


def test_scores_are_0_to_100() -> None:
    views = {r: _view(r, m) for r, m in (("a", "H100"), ("b", "T4"), ("c", "K80"))}
    for _, score in rank_regions(JobSpec("j"), views):
        assert 0.0 <= score <= 100.0


def test_views_from_a_cluster_state(fleet, node) -> None:
    state = fleet([node("eu1", region="eu"), node("us1", "T4", region="us")])
    ranked = rank_regions(JobSpec("j", cost_speed_preference=1.0), state.region_views())
    assert ranked[0][0] == "eu"
    assert [r for r, _ in ranked] == ["eu", "us"]
    assert ranked == rank_regions(JobSpec("j", cost_speed_preference=1.0), state.region_views())


def test_a_spreadable_gang_fits_now_across_nodes() -> None:
    # 64 GPUs free in 8-GPU blocks: a TP=8 gang of 64 fits now where they are free
    views = {"a": _view("a", free=64), "b": _view("b", free=0)}
    ranked = dict(rank_regions(JobSpec("j", gpu_count=64, tensor_parallel=8), views))
    assert ranked["a"] > ranked["b"] > 0
