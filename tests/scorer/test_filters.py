"""Filter plugins, table-driven: which nodes each one refuses, and the reasons it gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from scorer import Assignment, ClusterState, CycleContext, JobSpec, ThroughputModel, build_filter

Ctx = Callable[..., CycleContext]


@pytest.fixture
def cluster(fleet, node) -> ClusterState:
    # slots in order: a100_40, h100, v100, k80, mi300x, t4 (second region)
    return fleet(
        [
            node("a100_40", "A100-40"),
            node("h100", "H100"),
            node("v100", "V100-16"),
            node("k80", "K80", 4),
            node("mi300x", "MI300X"),
            node("t4", "T4", 4, region="us"),
        ]
    )


def _mask(context: Ctx, filter_name: str, job: JobSpec, state: ClusterState) -> list[bool]:
    return [bool(x) for x in build_filter(filter_name).filter(context(state, job))]


T, F = True, False
CASES = [
    # filter, job, expected mask over (a100_40, h100, v100, k80, mi300x, t4)
    ("gpu_model", JobSpec("j"), [T, T, T, T, T, T]),
    ("gpu_model", JobSpec("j", allowed_gpu_models=("H100", "v100")), [F, T, T, F, F, F]),
    # 70B FP16 inference: 160,218 MiB/GPU > all but none; MI300X has 192 GiB = 196,608 MiB
    ("memory", JobSpec("j", kind="INFERENCE", params_b=70, precision="FP16"), [F, F, F, F, T, F]),
    # TP=8 -> 20,028 MiB: fits 40 GiB and up, not 16 GiB V100/T4 or 12 GiB K80
    (
        "memory",
        JobSpec("j", kind="INFERENCE", params_b=70, precision="FP16", tensor_parallel=8),
        [T, T, F, F, T, F],
    ),
    ("precision", JobSpec("j", precision="FP8"), [F, T, F, F, T, F]),
    ("precision", JobSpec("j", precision="BF16"), [T, T, F, F, T, F]),
    ("precision", JobSpec("j", precision="FP16"), [T, T, T, F, T, T]),
    ("region", JobSpec("j", allowed_regions=("us",)), [F, F, F, F, F, T]),
    ("region", JobSpec("j", allowed_regions=("mars",)), [F, F, F, F, F, F]),
    # 8 GPUs in one TP group must sit on one node; a data-parallel gang may spread (1 GPU each)
    ("capacity", JobSpec("j", gpu_count=8, tensor_parallel=8), [T, T, T, F, T, F]),
    ("capacity", JobSpec("j", gpu_count=8), [T, T, T, T, T, T]),
    # a gang of 16 in TP groups of 4 needs one TP group per node: 4 free GPUs
    ("capacity", JobSpec("j", gpu_count=16, tensor_parallel=4), [T, T, T, T, T, T]),
    ("host_resources", JobSpec("j", cpu_milli=4000), [T, T, T, T, T, T]),  # undeclared = ok
]


@pytest.mark.parametrize(("name", "job", "expected"), CASES)
def test_filter_masks(
    context: Ctx, cluster: ClusterState, name: str, job: JobSpec, expected: list[bool]
) -> None:
    assert _mask(context, name, job, cluster) == expected


def test_runnable_refuses_where_gavel_measured_zero(
    context: Ctx, cluster: ClusterState, gavel: ThroughputModel
) -> None:
    state = cluster
    job = JobSpec("j", job_type="ResNet-50 (batch size 128)", gpu_count=2)  # 0 on 2 K80s
    mask = build_filter("runnable").filter(context(state, job, gavel))
    assert mask.tolist() == [T, T, T, F, T, T]


def test_capacity_counts_free_gpus_and_shares(context: Ctx, cluster: ClusterState) -> None:
    state = cluster
    state.reserve("x", [Assignment("h100", tuple(range(7)))])  # 1 GPU left
    state.reserve("y", [Assignment("k80", (0, 1, 2, 3), 600)])  # 400 milli left on each
    pair = JobSpec("j", gpu_count=2, tensor_parallel=2)
    assert _mask(context, "capacity", pair, state) == [T, F, T, F, T, T]
    assert _mask(context, "capacity", JobSpec("j", gpu_count=1), state) == [T, T, T, F, T, T]
    assert _mask(context, "capacity", JobSpec("j", gpu_milli=500), state) == [T, T, T, F, T, T]
    assert _mask(context, "capacity", JobSpec("j", gpu_milli=400), state) == [T, T, T, T, T, T]


def test_health_follows_node_and_gpu_health(context: Ctx, cluster: ClusterState) -> None:
    state = cluster
    state.set_node_healthy("h100", False)
    state.set_gpu_health("v100", [True] * 4 + [False] * 4)  # 4 healthy GPUs
    assert _mask(context, "health", JobSpec("j", gpu_count=4), state) == [T, F, T, T, T, T]
    assert _mask(context, "health", JobSpec("j", gpu_count=8, tensor_parallel=8), state) == [
        T,
        F,
        F,
        F,
        T,
        F,
    ]


def test_host_resources_when_declared(context: Ctx, fleet, node) -> None:
    state = fleet([replace(node("small", "T4", 1), cpu_milli=2000)])
    assert _mask(context, "host_resources", JobSpec("j", cpu_milli=4000), state) == [F]
    assert _mask(context, "host_resources", JobSpec("j", cpu_milli=2000), state) == [T]


@pytest.mark.parametrize(
    ("name", "job", "slot", "needle"),
    [
        # 50,000 MiB = 48.8 GiB; an A100-40 has 40,960 MiB = 40.0 GiB
        (
            "memory",
            JobSpec("j", min_gpu_memory_mib=50_000),
            0,
            "needs 48.8 GiB per GPU, A100-40 has 40.0 GiB",
        ),
        ("precision", JobSpec("j", precision="FP8"), 0, "A100-40 has no native FP8 arithmetic"),
        (
            "gpu_model",
            JobSpec("j", allowed_gpu_models=("H100",)),
            0,
            "A100-40 is not an allowed GPU model (H100)",
        ),
        ("region", JobSpec("j", allowed_regions=("us",)), 0, "eu is not an allowed region (us)"),
        ("capacity", JobSpec("j", gpu_count=8, tensor_parallel=8), 3, "free GPUs: needs 8, has 4"),
    ],
)
def test_explain_lists_the_reason(
    context: Ctx, cluster: ClusterState, name: str, job: JobSpec, slot: int, needle: str
) -> None:
    state = cluster
    status = build_filter(name).explain(context(state, job), slot)
    assert not status.ok
    assert needle in str(status)


def test_explain_success_on_a_fitting_node(context: Ctx, cluster: ClusterState) -> None:
    state = cluster
    for name in ("memory", "precision", "gpu_model", "region", "capacity", "health"):
        assert build_filter(name).explain(context(state, JobSpec("j")), 1).ok


def test_health_explain_gives_every_reason(context: Ctx, cluster: ClusterState) -> None:
    state = cluster
    state.set_node_healthy("v100", False)
    state.set_gpu_health("v100", [False] * 8)
    status = build_filter("health").explain(context(state, JobSpec("j")), 2)
    assert len(status.reasons) == 2  # node down and no healthy GPU


def test_filters_are_vectorised_over_nodes(context: Ctx, cluster: ClusterState) -> None:
    mask = build_filter("memory").filter(context(cluster, JobSpec("j")))
    assert isinstance(mask, np.ndarray) and mask.dtype == bool
