"""Weights under load: fragmentation weighs more, load spreading less, as the GPUs in scope fill
(the arithmetic is in each comment)."""

from __future__ import annotations

import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, Placer, job_weights, make_placer
from scorer.weights import TIGHT_CAP, under_load

BASE = {"compute": 30.0, "cost": 22.5, "fragmentation": 15.0, "load_balance": 3.0}


@pytest.mark.parametrize(
    ("free_share", "fragmentation", "load_balance"),
    [
        (1.0, 15.0, 3.0),  # empty: as derived (15 / 1, 3 x 1)
        (0.5, 30.0, 1.5),  # half free: 15 / 0.5, 3 x 0.5
        (0.25, 60.0, 0.75),  # 15 / 0.25, 3 x 0.25
        (0.1, 150.0, 0.3),  # 15 / 0.1 = the cap (TIGHT_CAP 10 x 15), 3 x 0.1
        (0.02, 150.0, 0.06),  # below 10 % free the cap holds: 15 x 10; 3 x 0.02
        (0.0, 150.0, 0.0),  # full: 15 x 10, nothing left to spread into
        (1.7, 15.0, 3.0),  # clipped to 1
    ],
)
def test_under_load_scales_fragmentation_and_load_balance(
    free_share: float, fragmentation: float, load_balance: float
) -> None:
    out = under_load(BASE, free_share)
    assert out["fragmentation"] == pytest.approx(fragmentation)
    assert out["load_balance"] == pytest.approx(load_balance)
    # the job's own preferences are the same at any load
    assert (out["compute"], out["cost"]) == (30.0, 22.5)


def test_under_load_leaves_presets_without_the_scores_alone() -> None:
    # fgd / bestfit weigh other plugins: nothing to scale, nothing added
    assert under_load({"fgd": 100.0, "first_fit": 0.01}, 0.05) == {"fgd": 100.0, "first_fit": 0.01}
    assert TIGHT_CAP * job_weights(JobSpec("j"))["fragmentation"] == 150.0


def _state(full_k80_nodes: int) -> ClusterState:
    """v: a whole V100 node (4 free); p: a P100 node with 1 of 4 free; plus full K80 nodes."""
    state = ClusterState()
    state.upsert_node(NodeSpec("v", "eu", "V100-16", 4, 16384))
    state.upsert_node(NodeSpec("p", "eu", "P100", 4, 16384))
    state.reserve("x", [Assignment("p", (0, 1, 2))])
    for i in range(full_k80_nodes):
        state.upsert_node(NodeSpec(f"k{i}", "eu", "K80", 4, 12288))
        state.reserve(f"y{i}", [Assignment(f"k{i}", (0, 1, 2, 3))])
    return state


@pytest.mark.parametrize(
    ("full_nodes", "free_share", "chosen"),
    [
        # 5 of 8 GPUs free (f 0.625): fragmentation 15 / 0.625 = 24 of ~94; the V100's speed
        # and price per speed win, though the job breaks up the whole node
        (0, 0.625, "v"),
        # 5 of 16 free (f 0.3125): fragmentation 48; the P100's last GPU (a fragment consumed)
        (2, 0.3125, "p"),
        # 5 of 48 free (f 0.104): fragmentation 144; the whole V100 node stays whole
        (10, 5 / 48, "p"),
    ],
)
def test_a_tight_cluster_keeps_whole_nodes_over_the_faster_gpu(
    full_nodes: int, free_share: float, chosen: str
) -> None:
    # the default scores weighed together (the gpuflow preset packs first: below)
    state = _state(full_nodes)
    placer = Placer(state)
    assert placer._free_share(state.slots()) == pytest.approx(free_share)
    result = placer.place(JobSpec("j"))
    assert result.placed
    assert result.assignments[0].node_id == chosen


@pytest.mark.parametrize("full_nodes", [0, 2, 10])
def test_the_gpuflow_preset_packs_first_at_any_load(full_nodes: int) -> None:
    # once 4-GPU gangs have been seen, breaking up the whole V100 node strands it for them:
    # the P100's last GPU, however empty the cluster; with no gang seen the V100 is as good
    # a pack, and its speed decides
    state = _state(full_nodes)
    placer = make_placer("gpuflow", state)
    assert placer.place(JobSpec("first")).assignments[0].node_id == "v"
    placer.observe(JobSpec("gang", gpu_count=4))  # a gang was placed (and has ended)
    assert placer.place(JobSpec("j")).assignments[0].node_id == "p"


def test_model_pressure_weighs_less_as_the_cluster_fills() -> None:
    # 30 x f: half free -> 15, full -> 0 (what is left is packed, whoever asks)
    assert under_load({"model_pressure": 30.0}, 0.5) == {"model_pressure": 15.0}
    assert under_load({"model_pressure": 30.0}, 0.0) == {"model_pressure": 0.0}
