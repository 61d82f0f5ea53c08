"""The regional Placer: choice of model, node, GPUs; gangs and topology; explanations."""

from __future__ import annotations

import pytest

from scorer import (
    Assignment,
    ClusterState,
    JobSpec,
    Placer,
    ThroughputModel,
    UnknownPluginError,
    make_placer,
)

ISLANDS = ((0, 1, 2, 3), (4, 5, 6, 7))


@pytest.fixture
def mixed(fleet, node) -> ClusterState:
    return fleet(
        [
            node("v100", "V100-16", 8),
            node("h100", "H100", 8, islands=ISLANDS),
            node("t4", "T4", 4, interconnect="pcie"),
        ]
    )


def _gpus(result) -> dict[str, tuple[int, ...]]:
    return {a.node_id: a.gpu_indices for a in result.assignments}


def test_speed_seeker_gets_the_fastest_gpu(mixed: ClusterState) -> None:
    result = Placer(mixed).place(JobSpec("j", kind="TRAINING", cost_speed_preference=1.0))
    assert result.placed and result.gpu_model == "H100"
    assert result.expected_throughput == pytest.approx(67 / 15.7, rel=1e-3)  # fp32 vs V100
    assert result.price_per_hour == pytest.approx(11.06)
    assert 0 < result.score <= 100
    assert len(result.breakdown) <= 4 and "compute" in result.breakdown


def test_inference_on_a_budget_takes_the_cheap_gpu(mixed: ClusterState) -> None:
    # FP16 decode: T4 320 GB/s at $0.35 beats V100 900 at $2.48 and H100 3350 at $11.06 per byte
    job = JobSpec("j", kind="INFERENCE", precision="FP16", params_b=1, cost_speed_preference=0)
    assert Placer(mixed).place(job).gpu_model == "T4"


def test_placer_proposes_but_does_not_reserve(mixed: ClusterState) -> None:
    before = mixed.free_gpus()
    result = Placer(mixed).place(JobSpec("j", gpu_count=4))
    assert result.placed and mixed.free_gpus() == before
    mixed.reserve("j", result.assignments)
    assert sum(mixed.free_gpus().values()) == sum(before.values()) - 4


def test_gang_stays_in_one_nvlink_island_best_fit(mixed: ClusterState) -> None:
    mixed.reserve("x", [Assignment("h100", (0, 1))])  # island 0 has 2 left, island 1 has 4
    job = JobSpec("j", gpu_count=2, allowed_gpu_models=("H100",))
    assert _gpus(Placer(mixed).place(job)) == {"h100": (2, 3)}  # the tighter island
    job4 = JobSpec("k", gpu_count=4, allowed_gpu_models=("H100",))
    assert _gpus(Placer(mixed).place(job4)) == {"h100": (4, 5, 6, 7)}


def test_unhealthy_and_throttled_gpus(mixed: ClusterState) -> None:
    mixed.set_gpu_health("h100", [False] * 4 + [True] * 4)
    mixed.set_perf_factor("h100", [1, 1, 1, 1, 0.5, 1, 1, 1])
    result = Placer(mixed).place(JobSpec("j", allowed_gpu_models=("H100",)))
    (gpu,) = result.assignments[0].gpu_indices
    assert gpu in (5, 6, 7)  # healthy, not the throttled one


def test_share_goes_to_the_tightest_gpu(mixed: ClusterState) -> None:
    mixed.reserve("x", [Assignment("t4", (2,), 500)])
    job = JobSpec("j", gpu_milli=400, allowed_gpu_models=("T4",))
    result = Placer(mixed).place(job)
    assert result.assignments == (Assignment("t4", (2,), 400),)
    assert result.price_per_hour == pytest.approx(0.35 * 0.4)


def test_spread_gang_prefers_one_rack_and_keeps_tp_groups_whole(fleet, node) -> None:
    state = fleet(
        [
            node("r1a", rack="r1"),
            node("r2a", rack="r2"),
            node("r2b", rack="r2"),
            node("r3a", rack="r3", zone="z1"),
        ]
    )
    job = JobSpec("j", kind="TRAINING", gpu_count=16, tensor_parallel=8)
    result = Placer(state).place(job)
    assert result.placed
    assert _gpus(result) == {"r2a": tuple(range(8)), "r2b": tuple(range(8))}
    assert result.breakdown.get("topology", 0) > 0


def test_tp_groups_never_cross_a_node(fleet, node) -> None:
    state = fleet([node(f"n{i}") for i in range(3)])
    for i in range(3):
        state.reserve(f"x{i}", [Assignment(f"n{i}", (0, 1))])  # 6 free on each
    job = JobSpec("j", kind="TRAINING", gpu_count=12, tensor_parallel=4, data_parallel=3)
    result = Placer(state).place(job)
    assert result.placed and result.gpu_total == 12
    assert all(len(a.gpu_indices) % 4 == 0 for a in result.assignments)  # 4 per node, not 6+6


def test_gang_is_all_or_nothing(fleet, node) -> None:
    state = fleet([node("a"), node("b")])
    result = Placer(state).place(JobSpec("j", gpu_count=24))
    assert not result.placed and result.assignments == ()
    assert result.never_fits  # 16 GPUs in all: it can never fit here


def test_multi_node_gangs_stay_in_one_region_unless_allowed(fleet, node) -> None:
    state = fleet([node("eu1", region="eu"), node("us1", region="us")])
    job = JobSpec("j", gpu_count=16)
    assert not Placer(state).place(job).placed
    assert Placer(state).place(job).never_fits
    crossing = Placer(state).place(JobSpec("k", gpu_count=16, cross_region_ok=True))
    assert crossing.placed and {a.node_id for a in crossing.assignments} == {"eu1", "us1"}


def test_refusal_counts_and_reasons(mixed: ClusterState) -> None:
    # weights 70e9 x 2 B = 130.4 GiB + KV 2 x 80 x 8 x 128 x 4096 x 2 B = 1.25 GiB + 1.5 GiB
    job = JobSpec("j", kind="INFERENCE", params_b=70, precision="FP16", model_family="llama")
    result = Placer(mixed).place(job)
    assert not result.placed and result.never_fits
    assert result.refusals["memory"] == 3
    # the example is the largest GPU refused (H100, 81,920 MiB here), with what would fit
    assert result.reasons == (
        "memory: needs 133 GiB per GPU, H100 has 80.0 GiB; fits with tensor_parallel 2 "
        "(2 GPUs), or in FP8 or INT8 (3 of 3 nodes)",
    )


def test_full_cluster_queues_instead_of_rejecting(mixed: ClusterState) -> None:
    mixed.reserve("x", [Assignment("h100", tuple(range(8)))])
    mixed.reserve("y", [Assignment("v100", tuple(range(8)))])
    mixed.reserve("z", [Assignment("t4", tuple(range(4)))])
    result = Placer(mixed).place(JobSpec("j"))
    assert not result.placed and not result.never_fits
    assert result.refusals == {"capacity": 3}


def test_usable_nodes_ignore_occupancy_but_not_the_job_s_constraints(mixed: ClusterState) -> None:
    mixed.reserve("x", [Assignment("h100", tuple(range(8)))])  # full: still usable
    placer = Placer(mixed)
    usable = {mixed.spec(int(i)).node_id for i in placer.usable(JobSpec("j", gpu_count=8))}
    assert usable == {"v100", "h100", "t4"}
    only_h100 = JobSpec("j", allowed_gpu_models=("H100",))
    assert {mixed.spec(int(i)).node_id for i in placer.usable(only_h100)} == {"h100"}
    assert mixed.jobs_on("h100") == {"x"} and mixed.jobs_on("t4") == frozenset()


def test_place_within_a_region(fleet, node) -> None:
    state = fleet([node("eu1", region="eu"), node("us1", region="us")])
    assert Placer(state).place(JobSpec("j"), region="us").region == "us"
    missing = Placer(state).place(JobSpec("j"), region="mars")
    assert not missing.placed and missing.never_fits and "no nodes" in missing.reasons[0]


def test_allowed_regions_refuse_other_regions(fleet, node) -> None:
    state = fleet([node("eu1", region="eu"), node("us1", region="us")])
    result = Placer(state).place(JobSpec("j", allowed_regions=("us",)))
    assert result.region == "us" and result.refusals == {"region": 1}


def test_expected_duration_follows_speed(mixed: ClusterState, gavel: ThroughputModel) -> None:
    job = JobSpec("j", job_type="ResNet-50 (batch size 64)", expected_duration_s=3600)
    result = Placer(mixed, throughput=gavel).place(job)
    assert result.expected_throughput is not None
    assert result.expected_duration_s == pytest.approx(3600 / result.expected_throughput, rel=1e-3)


def test_presets_and_registry_errors(mixed: ClusterState) -> None:
    first = make_placer("first_fit", mixed).place(JobSpec("j", cost_speed_preference=1))
    assert first.assignments[0].node_id == "v100"  # inventory order, blind to the model
    assert make_placer("fifo", mixed).place(JobSpec("j")).assignments == first.assignments
    with pytest.raises(UnknownPluginError):
        make_placer("magic", mixed)
    with pytest.raises(UnknownPluginError):
        Placer(mixed, filters=["gpu_model", "nope"])
    with pytest.raises(UnknownPluginError):
        Placer(mixed, scores=["nope"])


def test_best_fit_packs_the_fullest_node(fleet, node) -> None:
    state = fleet([node("a"), node("b")])
    state.reserve("x", [Assignment("b", (0, 1, 2))])
    assert make_placer("best_fit", state).place(JobSpec("j")).assignments[0].node_id == "b"


def test_a_loaded_catalogue_reaches_the_placer(tmp_path, gavel: ThroughputModel) -> None:
    from scorer import NodeSpec, load_catalog

    path = tmp_path / "cat.yaml"
    path.write_text("models:\n  B200: {fp32_tflops: 80, bf16_tflops: 2250, memory_gb: 180}\n")
    state = ClusterState(load_catalog(path))
    state.upsert_node(NodeSpec("b", "eu", "B200", 8, 184320))
    result = Placer(state, throughput=gavel).place(JobSpec("j", precision="BF16"))
    assert result.placed and result.gpu_model == "B200"


def test_a_data_parallel_gang_spreads_only_when_it_pays(fleet, node) -> None:
    state = fleet([node("k80", "K80", 8, rack="r0"), node("h1", rack="r1"), node("h2", rack="r1")])
    for n in ("h1", "h2"):
        state.reserve(f"x-{n}", [Assignment(n, (0, 1, 2, 3))])  # 4 free H100s on each
    # speed seeker: 2 x 4 H100 in one rack (topology 75) beat 8 K80s on one node
    fast = Placer(state).place(JobSpec("f", kind="TRAINING", gpu_count=8, cost_speed_preference=1))
    assert {a.node_id for a in fast.assignments} == {"h1", "h2"}
    # a TP=8 gang may not spread: it takes the only node that holds it whole
    whole = Placer(state).place(JobSpec("w", gpu_count=8, tensor_parallel=8))
    assert [a.node_id for a in whole.assignments] == ["k80"]


@pytest.mark.parametrize(
    ("job", "placed"),
    [
        (JobSpec("fits", gpu_count=4), True),  # 8 free V100s, 8 H100s, 4 T4s
        (JobSpec("too-big", gpu_count=16), False),  # no node has 16 GPUs
        (JobSpec("no-such-model", gpu_count=8, allowed_gpu_models=("A100-80",)), False),
    ],
)
def test_unexplained_answer_is_the_same_answer(
    mixed: ClusterState, job: JobSpec, placed: bool
) -> None:
    placer = Placer(mixed)
    explained = placer.place(job)
    quiet = placer.place(job, explain=False)
    assert explained.placed == quiet.placed == placed
    assert explained.assignments == quiet.assignments
    # the per-filter counts stay (spill-overs merge them); only the explanation is skipped
    assert quiet.refusals.items() <= explained.refusals.items()
    if not placed:
        assert explained.reasons and quiet.reasons == ()


def test_options_of_a_cpu_only_job_is_its_host_placement(mixed: ClusterState) -> None:
    # no GPU model to compare: the one host-only placement, as place() makes it
    job = JobSpec("c", gpu_count=0, cpu_milli=1000)
    placer = Placer(mixed)
    [option] = placer.options(job)
    assert option.placed and option.assignments == placer.place(job).assignments
