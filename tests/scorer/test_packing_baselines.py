"""The packing baselines as published (FGD, best fit) and gpuflow's model pressure: which node,
which GPU inside it, and the arithmetic (in each comment)."""

from __future__ import annotations

import numpy as np
import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, make_placer
from scorer.scores.bin_pack import leftover
from scorer.scores.model_pressure import pressure_score


def _state(*nodes: NodeSpec) -> ClusterState:
    state = ClusterState()
    for n in nodes:
        state.upsert_node(n)
    return state


def _v100(node_id: str, gpus: int = 4, cpu: int = 0) -> NodeSpec:
    return NodeSpec(node_id, "eu", "V100-16", gpus, 16384, cpu_milli=cpu)


def test_fgd_puts_a_share_on_the_gpu_whose_use_strands_least() -> None:
    # free per GPU: 1000, 600, 300, 0. The mix has seen 300-milli and 600-milli shares.
    # A 300 share on GPU 2 (300 free) leaves 0: nothing stranded; on GPU 1 (600) it leaves
    # 300, still usable by a 300 share, but the 600 class loses it -> FGD takes GPU 2 (best
    # fit by accident); the placer's own best fit agrees here, the next case does not.
    state = _state(_v100("a"))
    state.reserve("x", [Assignment("a", (1,), 400)])
    state.reserve("y", [Assignment("a", (2,), 700)])
    state.reserve("z", [Assignment("a", (3,), 1000)])
    placer = make_placer("fgd", state)
    for seen in (JobSpec("seen600", gpu_milli=600), JobSpec("seen300", gpu_milli=300)):
        placer.observe(seen)  # placed once (and ended since): the mix holds both classes
    result = placer.place(JobSpec("s", gpu_milli=300))
    assert result.assignments[0].gpu_indices == (2,)


def test_fgd_shares_tie_to_the_lowest_index_and_whole_gpus_are_the_lowest_free() -> None:
    state = _state(_v100("a"))
    placer = make_placer("fgd", state)
    # four empty GPUs: every choice strands the same -> GPU 0, as the artifact's first index
    share = placer.place(JobSpec("s", gpu_milli=500))
    assert share.assignments[0].gpu_indices == (0,)
    state.reserve("s", share.assignments)
    state.reserve("x", [Assignment("a", (1,))])
    # whole GPUs: the lowest-index free ones (0 is shared above, so not whole: 2 and 3)
    assert placer.place(JobSpec("w", gpu_count=2)).assignments[0].gpu_indices == (2, 3)


def test_fgd_counts_a_model_pinned_tasks_avoid_as_no_access() -> None:
    # a and b alike but for the model; every task seen so far was pinned to T4: on the V100
    # node those tasks count all its free GPU as fragment, so taking V100 GPUs lowers it
    state = _state(NodeSpec("t4", "eu", "T4", 4, 16384), NodeSpec("v", "eu", "V100-16", 4, 16384))
    placer = make_placer("fgd", state)
    for i in range(3):
        placer.observe(JobSpec(f"pin{i}", allowed_gpu_models=("T4",)))  # placed, ended since
    assert placer.place(JobSpec("free")).assignments[0].node_id == "v"


def test_fgd_ranks_cpu_only_tasks_by_the_fragmentation_they_cause() -> None:
    # g: 4 GPUs and 16 cores; c: no GPU. The mix's 1-GPU tasks ask 12 cores: a 8-core CPU
    # task on g leaves 8 cores, too few -> g's 4 free GPUs become fragment; on c nothing
    state = _state(_v100("g", cpu=16000), NodeSpec("c", "eu", "", 0, 0, cpu_milli=64000))
    placer = make_placer("fgd", state)
    placer.observe(JobSpec("seen", cpu_milli=12000))  # placed once, ended since
    result = placer.place(JobSpec("cpu", gpu_count=0, cpu_milli=8000))
    assert result.assignments[0].node_id == "c"


@pytest.mark.parametrize(
    ("free_cpu", "free_gpu", "ask_cpu", "ask_gpu", "expected"),
    [
        # largest node 96 cores / 8 GPUs: 0.5 x 12/96 + 0.5 x 1000/8000 = 0.125
        (24000, 2000, 12000, 1000, 0.125),
        # an empty largest node, a 1-GPU task of 12 cores: 0.5 x 84/96 + 0.5 x 7/8 = 0.875
        (96000, 8000, 12000, 1000, 0.875),
    ],
)
def test_best_fit_leftover_is_the_artifacts(
    free_cpu: int, free_gpu: int, ask_cpu: int, ask_gpu: int, expected: float
) -> None:
    big = NodeSpec("big", "eu", "V100-16", 8, 16384, cpu_milli=96000)
    state = _state(big, _v100("n", 4, 96000))
    used = 96000 - free_cpu
    gpus = tuple(range((8000 - free_gpu) // 1000))
    if gpus or used:
        state.reserve("x", [Assignment("big", gpus, 1000, used, 0)])
    slot = np.array([state.slots()[0]])
    assert leftover(state, slot, ask_cpu, ask_gpu)[0] == pytest.approx(expected)


def test_best_fit_takes_the_fullest_node_counting_cpu() -> None:
    # same free GPUs; b has less CPU left -> the fuller node by the artifact's measure
    state = _state(_v100("a", cpu=64000), _v100("b", cpu=64000))
    state.reserve("x", [Assignment("b", (), 1000, 32000, 0)])
    assert (
        make_placer("bestfit", state).place(JobSpec("j", cpu_milli=4000)).assignments[0].node_id
        == "b"
    )


@pytest.mark.parametrize(
    ("bound", "free", "expected"),
    [
        (0.06, 0.02, 25.0),  # pressure 3: 100 / 4
        (0.0, 0.5, 100.0),  # nothing pinned to it
        (0.1, 0.1, 50.0),  # pinned demand in step with what is left
        (0.1, 0.0, 0.0),  # demand bound to a model with nothing free
    ],
)
def test_pressure_score(bound: float, free: float, expected: float) -> None:
    got = pressure_score(np.array([bound]), np.array([free]))[0]
    assert got == pytest.approx(expected, abs=1e-6)


def test_gpuflow_leaves_the_model_pinned_jobs_need_to_them() -> None:
    # T4 and V100 nodes alike; a third of the jobs seen were pinned to T4 -> an unpinned job
    # goes to the V100 even though both pack the same
    state = _state(NodeSpec("t4", "eu", "T4", 4, 16384), NodeSpec("v", "eu", "V100-16", 4, 16384))
    placer = make_placer("gpuflow", state)
    for i, models in enumerate([("T4",), (), ()]):
        placer.observe(JobSpec(f"seen{i}", allowed_gpu_models=models))  # placed, ended since
    assert placer.place(JobSpec("free")).assignments[0].node_id == "v"
