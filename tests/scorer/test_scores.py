"""Score plugins, table-driven on their pure maths (the arithmetic is in each comment)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from scorer import Assignment, ClusterState, CycleContext, JobSpec, build_score, job_weights
from scorer.scores.carbon import carbon_score
from scorer.scores.compute import compute_score
from scorer.scores.cost import cost_score
from scorer.scores.fragmentation import DEFAULT_MIX, FragmentationScore, TaskMix, growth_score
from scorer.scores.load_balance import least_allocated_score
from scorer.scores.memory_fit import memory_fit_score
from scorer.scores.topology import domain_score, node_topology_score

Ctx = Callable[..., CycleContext]
A = np.array


@pytest.mark.parametrize(
    ("speed", "best", "expected"),
    [
        ([1.0, 0.6, 0.14], 1.0, [100, 60, 14]),  # V100, P100, K80 on ResNet-50 vs best V100
        ([4.27], 4.27, [100]),
        ([2.0], 0.0, [0]),  # nothing can run: no compute credit
    ],
)
def test_compute_score(speed: list[float], best: float, expected: list[float]) -> None:
    assert compute_score(A(speed), best) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("need", "memory", "expected"),
    [
        (20_028, [40_960, 81_920], [48.896, 24.448]),  # 20028/40960, 20028/81920
        (0, [16_384, 196_608], [50, 50]),  # unknown need: neutral
        (90_000, [81_920], [100]),  # over 100 clipped (the memory filter refuses it anyway)
    ],
)
def test_memory_fit_score(need: int, memory: list[int], expected: list[float]) -> None:
    assert memory_fit_score(need, A(memory)) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("gpus", "island_free", "link", "expected"),
    [
        ([1], [0], [16], [100]),  # one GPU: no communication
        ([4], [4], [900], [100]),  # one NVLink island holds it
        ([8], [4], [900], [70]),  # two islands over NVLink
        ([4], [1], [16], [40]),  # PCIe only
    ],
)
def test_node_topology_score(gpus, island_free, link, expected) -> None:
    assert node_topology_score(A(gpus), A(island_free), A(link)).tolist() == expected


def test_domain_scores_order_node_rack_zone_region_global() -> None:
    levels = ["node", "rack", "zone", "region", "global"]
    assert [domain_score(lv) for lv in levels] == [100, 75, 50, 25, 0]


@pytest.mark.parametrize(
    ("price", "speed", "hours", "budget", "expected"),
    [
        # costs 2.48/1.0 = 2.48 and 1.46/0.6 = 2.433 -> 2.433/2.48 = 98.1 and 100
        ([2.48, 1.46], [1.0, 0.6], None, None, [98.118, 100.0]),
        # 11.06/4.27 = 2.5902 vs 0.9/0.14 = 6.4286 -> 100 and 40.291
        ([11.06, 0.90], [4.27, 0.14], None, None, [100.0, 40.291]),
        # budget $3 for 1 reference hour: 2.48 fits, 0.9/0.14 = 6.43 does not -> 0
        ([2.48, 0.90], [1.0, 0.14], 1.0, 3.0, [100.0, 0.0]),
        ([0.0], [1.0], None, None, [100.0]),  # free GPUs (price unknown)
    ],
)
def test_cost_score(price, speed, hours, budget, expected) -> None:
    assert cost_score(A(price), A(speed), hours, budget) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("intensity", "watts", "speed", "expected"),
    [
        # 50 x 700 / 4.27 = 8197 vs 400 x 300 / 1.0 = 120000 -> 100 and 6.83
        ([50, 400], [700, 300], [4.27, 1.0], [100.0, 6.831]),
        ([300, 300], [300, 300], [1.0, 0.5], [100.0, 50.0]),  # half speed: twice the energy
    ],
)
def test_carbon_score(intensity, watts, speed, expected) -> None:
    assert carbon_score(A(intensity), A(watts), A(speed)) == pytest.approx(expected, abs=1e-3)


@pytest.mark.parametrize(
    ("free_after", "capacity", "expected"),
    [([4000, 0, 8000], [8000, 8000, 8000], [50, 0, 100])],  # 4000/8000 = 50 ...
)
def test_least_allocated_score(free_after, capacity, expected) -> None:
    assert least_allocated_score(A(free_after), A(capacity)).tolist() == expected


@pytest.mark.parametrize(
    ("growth", "requested", "expected"),
    [
        ([0.0], [1000.0], [50]),  # nothing stranded, nothing freed
        ([-1000.0], [1000.0], [100]),  # consumed only fragments
        ([700.0], [1000.0], [15]),  # 50 - 50 x 0.7
        ([5000.0], [1000.0], [0]),  # clipped
    ],
)
def test_growth_score(growth, requested, expected) -> None:
    assert growth_score(A(growth), A(requested)).tolist() == pytest.approx(expected)


def _frag_cluster(fleet, node) -> ClusterState:
    state = fleet([node("full", gpus=8), node("one", gpus=8), node("two", gpus=8)])
    state.reserve("a", [Assignment("one", tuple(range(7)))])  # 1 free
    state.reserve("b", [Assignment("two", tuple(range(6)))])  # 2 free
    return state


def test_fragmentation_prefers_consuming_fragments(fleet, node, context: Ctx) -> None:
    # mix {1: .55, 2: .10, 4: .15, 8: .10}; one GPU from:
    #   8 free -> 7: 8-class strands 7000 x .10 = +700         -> 50 - 35 = 15
    #   1 free -> 0: 2/4/8-classes lose 1000 x (.10+.15+.10)   -> 50 + 17.5 = 67.5
    #   2 free -> 1: 2-class strands +1000 x .10; 4/8 -1000 x .25 -> -150 -> 57.5
    state = _frag_cluster(fleet, node)
    ctx = context(state, JobSpec("j"))
    scores = FragmentationScore(DEFAULT_MIX, learn=False).score(ctx, state.slots())
    assert scores.tolist() == pytest.approx([15.0, 67.5, 57.5])


def test_fragmentation_for_shares_prefers_a_partly_used_gpu(fleet, node, context: Ctx) -> None:
    # a 250-milli job: on a GPU with 500 free the GPU keeps 250 free; on a whole GPU it breaks
    # one whole GPU (stranding it for whole-GPU classes)
    state = fleet([node("whole", gpus=2), node("part", gpus=2)])
    state.reserve("s", [Assignment("part", (0,), 500)])
    mix = TaskMix(whole={1: 1.0}, shares={250: 0.0})
    ctx = context(state, JobSpec("j", gpu_milli=250))
    whole, part = FragmentationScore(mix, learn=False).score(ctx, state.slots())
    # whole: the broken GPU's 750 left is stranded for 1-GPU jobs: growth +750 -> 50 - 150 -> 0
    # part: the partial GPU shrinks 500 -> 250: growth -250 -> 50 + 50 = 100
    assert (whole, part) == pytest.approx((0.0, 100.0))


def test_data_affinity(fleet, node, context: Ctx) -> None:
    state = fleet([node("eu1", region="eu"), node("us1", region="us")])
    plugin = build_score("data_affinity")
    in_us = plugin.score(context(state, JobSpec("j", data_region="us")), state.slots())
    assert np.asarray(in_us).tolist() == [0, 100]
    assert plugin.score(context(state, JobSpec("j")), state.slots()) == 100.0  # no data: all tie


def test_compute_plugin_applies_perf_factor(fleet, node, context: Ctx) -> None:
    state = fleet([node("a"), node("b")])
    state.set_perf_factor("b", [0.5] * 8)  # throttled to half speed
    scores = build_score("compute").score(context(state, JobSpec("j")), state.slots())
    assert np.asarray(scores).tolist() == [100.0, 50.0]


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        # p = .5: compute 10 + 20 = 30, cost 5 + 17.5 = 22.5, topology 0 for one GPU
        (JobSpec("a"), {"compute": 30, "cost": 22.5, "topology": 0, "carbon": 5}),
        # p = 1: compute 50, cost 5; a TP gang gets topology 25
        (
            JobSpec("b", cost_speed_preference=1, gpu_count=8, tensor_parallel=8),
            {"compute": 50, "cost": 5, "topology": 25},
        ),
        # deferrable: carbon 15; data region: affinity 10
        (
            JobSpec("c", deferrable_until_ts=1, data_region="eu"),
            {"carbon": 15, "data_affinity": 10},
        ),
    ],
)
def test_job_weights(job: JobSpec, expected: dict[str, float]) -> None:
    weights = job_weights(job)
    assert {k: weights[k] for k in expected} == pytest.approx(expected)


@pytest.mark.parametrize(
    "mix",
    [
        TaskMix(whole={0: 1.0}, shares={}),
        TaskMix(whole={1: -0.5}, shares={}),
        TaskMix(whole={1: 1.0}, shares={1000: 0.1}),
    ],
)
def test_fragmentation_refuses_a_bad_task_mix(mix: TaskMix) -> None:
    from scorer import ScorerError

    with pytest.raises(ScorerError):
        FragmentationScore(mix)
