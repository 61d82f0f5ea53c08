"""The network model: path choice, communication demand, the allocator's policies."""

from __future__ import annotations

import numpy as np
import pytest

from scorer import JobSpec
from scorer.network import (
    AllocationPolicy,
    BandwidthAllocator,
    Flow,
    Layout,
    Link,
    LinkGraph,
    NetworkError,
    comm_demand,
)


def _triangle(used_ab: float = 0.0, loss_ab: float = 0.0) -> LinkGraph:
    # a>b direct: 10G, 50 ms; detour a>c>b: 40G / 60G, 30 + 40 = 70 ms
    return LinkGraph(
        [
            Link("a", "b", 50, 10, 0.02, used_gbps=used_ab, loss_pct=loss_ab),
            Link("a", "c", 30, 40, 0.01),
            Link("c", "b", 40, 60, 0.01),
        ]
    )


@pytest.mark.parametrize(
    ("volume_gbit", "route"),
    [
        # 8 Gbit: direct 8 / 9.5 + 0.05 = 0.892 s; detour 8 / 38 + 0.07 = 0.281 s -> detour
        # (allocatable = capacity x 0.95 headroom: 9.5 and 38)
        (8.0, ("a>c", "c>b")),
        # 0.08 Gbit: direct 0.08 / 9.5 + 0.05 = 0.0584 s; detour 0.08 / 38 + 0.07 = 0.0721 s
        (0.08, ("a>b",)),
    ],
)
def test_path_metric_trades_width_for_latency(volume_gbit: float, route: tuple[str, ...]) -> None:
    path = _triangle().path("a", "b", volume_gbit)
    assert path is not None and path.links == route


def test_path_avoids_a_congested_link() -> None:
    # a tiny transfer prefers the direct link (see above) unless it is congested: 9.6 of 10G
    # used is 96 % >= 90 %; 2 % loss >= 1 % is congested too
    assert _triangle().path("a", "b", 0.08).links == ("a>b",)  # type: ignore[union-attr]
    for graph in (_triangle(used_ab=9.6), _triangle(loss_ab=2.0)):
        path = graph.path("a", "b", 0.08)
        assert path is not None and path.links == ("a>c", "c>b") and not path.congested


def test_only_congested_routes_are_used_but_flagged() -> None:
    graph = LinkGraph([Link("a", "b", 50, 10, used_gbps=9.2)])
    path = graph.path("a", "b")
    # allocatable = 10 x 0.95 - 9.2 = 0.3 Gbit/s
    assert path is not None and path.congested and path.bottleneck_gbps == pytest.approx(0.3)


def test_no_path_is_none_and_paths_recompute_on_material_change() -> None:
    graph = _triangle()
    assert graph.path("b", "a") is None
    before = graph.version
    # 10 % of capacity is material: 4G of a 40G link's allocatable is not more than 4G
    assert not graph.observe("a", "c", rtt_ms=30, capacity_gbps=40, used_gbps=3.9)
    assert graph.version == before
    assert graph.observe("a", "c", rtt_ms=30, capacity_gbps=40, used_gbps=37.0)  # congested
    assert graph.version == before + 1
    assert graph.path("a", "b", 8.0).links == ("a>b",)  # type: ignore[union-attr]


def test_bad_links_are_refused() -> None:
    with pytest.raises(NetworkError, match="capacity_gbps"):
        Link("a", "b", 10, -1)
    with pytest.raises(NetworkError, match="two regions"):
        Link("a", "a", 10, 1)


def _job(**kw: object) -> JobSpec:
    base = dict(kind="TRAINING", params_b=7, precision="BF16", gpu_count=16, tensor_parallel=2)
    return JobSpec("j", **{**base, **kw})  # type: ignore[arg-type]


def test_demand_arithmetic() -> None:
    d = comm_demand(_job(grad_accum_steps=4, micro_batch=2, seq_len=4096), 312.0)
    assert d is not None
    # micro-batch: 6 x 7e9 x (2 x 4096) FLOPs / (2 GPUs x 312e12 x 0.4 MFU) = 1.3785 s
    assert d.micro_batch_s == pytest.approx(6 * 7e9 * 8192 / (2 * 312e12 * 0.4))
    assert d.compute_s == pytest.approx(4 * 1.37846, rel=1e-4)  # 4 micro-batches
    # gradients 7e9 x 2 B = 14 GB; a ring of 2 regions sends 2 x 14 x 1/2 = 14 GB per hop
    assert d.ring_bytes(2) == pytest.approx(14e9)
    assert d.ring_bytes(1) == 0
    # need: 14 GB = 112 Gbit within a 5.514 s step -> 20.31 Gbit/s
    assert d.need_gbps(2) == pytest.approx(112 / 5.51385, rel=1e-4)
    step = d.step_time(
        Layout((("a", 8, 1), ("b", 8, 1))), wan_gbps=20, wan_rtt_ms=80, intra_node_gbs=600
    )
    # data parallel: 112 / 20 = 5.6 s + 1 x 80 ms = 5.68 s, minus 2/3 x 1.378 s hidden = 4.761
    assert step.data_parallel == pytest.approx(5.68 - 2 / 3 * 1.37846, rel=1e-4)
    # tensor parallel: 4 x 33 layers x (2 x 4096 x 4224 x 2 B) x 2 x 1/2 = 9.135 GB per
    # micro-batch per GPU over 600 GB/s, x 4 micro-batches = 0.0609 s
    assert step.tensor_parallel == pytest.approx(4 * 9.135194e9 / 600e9, rel=1e-4)
    assert step.efficiency == pytest.approx(5.51385 / (5.51385 + 4.76103 + 0.06090), rel=1e-4)


def test_gradient_accumulation_is_what_tolerates_the_wan() -> None:
    # 7B on 2 GPUs per replica, 1 x 2048 tokens: 0.345 s per micro-batch; the all-reduce over
    # 20G: 5.6 s + 0.08 s - 0.23 s hidden = 5.45 s. One micro-batch per step: 0.345 / 5.79
    # = 6 %; 64 micro-batches: 22.1 / 27.5 = 80 %
    layout = Layout((("a", 8, 1), ("b", 8, 1)))
    eff = {
        ga: comm_demand(_job(grad_accum_steps=ga), 312.0)
        .step_time(  # type: ignore[union-attr]
            layout, wan_gbps=20, wan_rtt_ms=80
        )
        .efficiency
        for ga in (1, 64)
    }
    assert eff[1] == pytest.approx(0.0596, abs=1e-3)
    assert eff[64] == pytest.approx(0.802, abs=1e-3)


@pytest.mark.parametrize(
    "job",
    [
        _job(kind="INFERENCE"),  # not training: no gradient traffic modelled
        _job(params_b=0),  # unknown size
        _job(gpu_count=1, tensor_parallel=1),  # one GPU talks to nobody
    ],
)
def test_unmodelled_jobs_have_no_demand(job: JobSpec) -> None:
    assert comm_demand(job, 312.0) is None


def _flows(graph: LinkGraph, mode: str) -> BandwidthAllocator:
    alloc = BandwidthAllocator(graph, AllocationPolicy(mode=mode, idle_gbps=0.1))
    alloc.set_job("x", [Flow("x", "a", "b", need_gbps=2.0)], "COMM")
    alloc.set_job("y", [Flow("y", "a", "b", need_gbps=2.0)], "COMM")
    return alloc


def test_elastic_follows_phases_equal_does_not() -> None:
    graph = LinkGraph([Link("a", "b", 50, 20)])  # allocatable 20 x 0.95 = 19
    elastic, equal = _flows(graph, "elastic"), _flows(graph, "equal")
    for alloc in (elastic, equal):
        got = alloc.allocate().by_job_link
        assert got[("x", "a>b")] == pytest.approx(9.5) and got[("y", "a>b")] == pytest.approx(9.5)
    elastic.set_phase("x", "COMPUTE")
    equal.set_phase("x", "COMPUTE")
    # x computing asks 0.1 (idle_gbps); y may take 19 - 0.1 = 18.9
    got = elastic.allocate().by_job_link
    assert got[("x", "a>b")] == pytest.approx(0.1) and got[("y", "a>b")] == pytest.approx(18.9)
    got = equal.allocate().by_job_link  # the baseline: still 9.5 each
    assert got[("y", "a>b")] == pytest.approx(9.5)


def test_allocator_reroutes_when_a_link_congests_and_forgets_ended_jobs() -> None:
    graph = _triangle()
    alloc = BandwidthAllocator(graph)
    alloc.set_job("x", [Flow("x", "a", "b")])
    assert set(k[1] for k in alloc.allocate().by_job_link) == {"a>c", "c>b"}
    graph.observe("a", "c", rtt_ms=30, capacity_gbps=40, used_gbps=39)  # congested
    assert set(k[1] for k in alloc.allocate().by_job_link) == {"a>b"}
    alloc.remove("x")
    assert alloc.allocate().by_job_link == {}
    assert not np.any(alloc.allocate().load)
