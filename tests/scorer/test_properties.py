"""Invariants under random fleets and job streams (hypothesis):

- no placement violates a filter or over-allocates a GPU or a milli-share;
- gangs are all-or-nothing, of one GPU model, in one region unless allowed; TP groups never
  cross a node; sick GPUs and nodes are never chosen;
- reserve/release round-trips and release is idempotent.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scorer import ClusterState, JobSpec, NodeSpec, Placer, default_catalog, memory_need_mib

MODELS = ("K80", "V100-16", "T4", "A100-40", "H100", "MI300X")

nodes_st = st.lists(
    st.tuples(
        st.sampled_from(MODELS),
        st.sampled_from((1, 2, 4, 8)),
        st.sampled_from(("eu", "us")),
        st.sampled_from(("r0", "r1")),
    ),
    min_size=1,
    max_size=8,
)

jobs_st = st.lists(
    st.builds(
        lambda kind, precision, params, count, tp, milli, region, cross: JobSpec(
            "j",
            kind=kind,
            precision=precision,
            params_b=params,
            gpu_count=1 if milli < 1000 else count,
            tensor_parallel=tp if milli == 1000 and count % tp == 0 else 1,
            gpu_milli=milli,
            allowed_regions=region,
            cross_region_ok=cross,
        ),
        st.sampled_from(("TRAINING", "INFERENCE", "BATCH")),
        st.sampled_from(("FP32", "BF16", "FP16", "FP8")),
        st.sampled_from((0.0, 1.0, 7.0, 70.0)),
        st.sampled_from((1, 2, 4, 8, 16)),
        st.sampled_from((1, 2, 4, 8)),
        st.sampled_from((1000, 1000, 500, 250)),
        st.sampled_from(((), ("eu",), ("us",))),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


def _build(spec: list[tuple[str, int, str, str]]) -> ClusterState:
    state = ClusterState(capacity=2)
    cat = default_catalog()
    for i, (model, gpus, region, rack) in enumerate(spec):
        state.upsert_node(
            NodeSpec(f"n{i}", region, model, gpus, cat[model].memory_mib, rack=rack,
                     interconnect=cat[model].interconnect)
        )  # fmt: skip
    return state


def _check_placement(state: ClusterState, job: JobSpec, assignments) -> None:
    cat = default_catalog()
    models = {state.node(a.node_id).gpu_model for a in assignments}
    assert len(models) == 1  # one model per gang
    total = sum(len(a.gpu_indices) for a in assignments)
    assert total == job.gpu_count  # all of the gang
    for a in assignments:
        node = state.node(a.node_id)
        slot = state.slot_of(a.node_id)
        assert state.node_ok[slot] and all(state.gpu_ok[slot, g] for g in a.gpu_indices)
        spec = cat[node.gpu_model]
        assert spec.supports(job.precision)
        assert node.gpu_memory_mib >= memory_need_mib(job)
        assert not job.allowed_regions or node.region in job.allowed_regions
        assert len(a.gpu_indices) % max(1, job.tensor_parallel) == 0 or job.gpu_milli < 1000
        assert a.gpu_milli == job.gpu_milli
    if len({state.node(a.node_id).region for a in assignments}) > 1:
        assert job.cross_region_ok


@settings(
    max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(nodes_st, jobs_st, st.randoms(use_true_random=False))
def test_placements_respect_filters_and_never_over_allocate(nodes, jobs, rnd) -> None:
    state = _build(nodes)
    placer = Placer(state)
    held: list[str] = []
    for i, job in enumerate(jobs):
        job = JobSpec(**{**job.__dict__, "job_id": f"j{i}"})
        result = placer.place(job)
        if result.placed:
            _check_placement(state, job, result.assignments)
            state.reserve(job.job_id, result.assignments)  # raises if it over-allocates
            held.append(job.job_id)
        else:
            assert result.assignments == ()
            assert result.reasons  # every refusal is explained
        if held and rnd.random() < 0.3:
            state.release(held.pop(rnd.randrange(len(held))))
        if rnd.random() < 0.2:  # a GPU fails or recovers, a node goes down or comes back
            victim = f"n{rnd.randrange(len(nodes))}"
            gpus = state.node(victim).gpu_count
            state.set_gpu_health(victim, [rnd.random() < 0.8 for _ in range(gpus)])
            state.set_node_healthy(victim, rnd.random() < 0.9)
        used = state.free_milli[: len(nodes)]
        assert (used >= 0).all() and (used <= 1000).all()


@settings(max_examples=150, deadline=None, database=None)
@given(nodes_st, jobs_st)
def test_reserve_release_round_trip(nodes, jobs) -> None:
    state = _build(nodes)
    before = state.free_milli.copy()
    placer = Placer(state)
    ids = []
    for i, job in enumerate(jobs):
        result = placer.place(job)
        if result.placed:
            state.reserve(f"j{i}", result.assignments)
            ids.append(f"j{i}")
    for job_id in reversed(ids):
        assert state.release(job_id) is True
        assert state.release(job_id) is False
    assert np.array_equal(state.free_milli, before)
    assert dict(state.jobs) == {}


@settings(max_examples=100, deadline=None, database=None)
@given(
    st.dictionaries(
        st.sampled_from(("eu", "us", "ap", "sa")),
        st.tuples(st.sampled_from(MODELS), st.integers(0, 64), st.integers(0, 50)),
        min_size=1,
    ),
    jobs_st,
)
def test_router_lists_exactly_the_allowed_regions_with_bounded_scores(views, jobs) -> None:
    from scorer import RegionView, rank_regions

    region_views = {
        r: RegionView(r, {m: free}, {m: min(free, 8)}, {m: 64}, queue_depth=q)
        for r, (m, free, q) in views.items()
    }
    for job in jobs:
        ranked = rank_regions(job, region_views)
        allowed = {r for r in views if not job.allowed_regions or r in job.allowed_regions}
        assert {r for r, _ in ranked} == allowed
        assert all(0.0 <= s <= 100.0 for _, s in ranked)
        assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)
