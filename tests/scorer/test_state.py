"""ClusterState: incremental arrays, reservations all-or-nothing, idempotent release."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scorer import Assignment, ClusterState, ReservationError


@pytest.fixture
def state(fleet, node) -> ClusterState:
    return fleet(
        [
            node("a", "H100", 8, islands=((0, 1, 2, 3), (4, 5, 6, 7))),
            node("b", "A100-80", 4, region="us"),
            node("c", "T4", 2, region="us", interconnect="pcie"),
        ]
    )


def test_free_gpus_by_model_and_region(state: ClusterState) -> None:
    assert state.free_gpus() == {"H100": 8, "A100-80": 4, "T4": 2}
    assert state.free_gpus("us") == {"A100-80": 4, "T4": 2}
    assert state.free_gpus("nowhere") == {}


def test_reserve_and_release_round_trip(state: ClusterState) -> None:
    before = state.gpu_free_milli("a")
    state.reserve("j", [Assignment("a", (0, 1)), Assignment("b", (3,), 250)])
    assert state.gpu_free_milli("a") == (0, 0) + (1000,) * 6
    assert state.gpu_free_milli("b") == (1000, 1000, 1000, 750)
    assert state.reservation("j") == (Assignment("a", (0, 1)), Assignment("b", (3,), 250))
    assert state.release("j") is True
    assert state.gpu_free_milli("a") == before
    assert state.release("j") is False  # idempotent
    assert state.reservation("j") is None


def test_over_allocation_is_refused_all_or_nothing(state: ClusterState) -> None:
    state.reserve("x", [Assignment("b", (0,), 600)])
    with pytest.raises(ReservationError):
        # a's GPUs are free but b/0 has only 400 milli left: nothing is taken
        state.reserve("y", [Assignment("a", (0, 1)), Assignment("b", (0,), 500)])
    assert state.gpu_free_milli("a") == (1000,) * 8
    assert state.reservation("y") is None
    state.reserve("z", [Assignment("b", (0,), 400)])  # exactly the rest
    assert state.gpu_free_milli("b")[0] == 0


@pytest.mark.parametrize(
    "bad",
    [
        [Assignment("nope", (0,))],  # unknown node
        [Assignment("c", (2,))],  # no GPU 2 on a 2-GPU node
        [Assignment("c", (0, 0))],  # repeated GPU
        [Assignment("c", (0,), 0)],  # empty share
        [Assignment("c", (0,), 600), Assignment("c", (0,), 600)],  # 1200 milli on one GPU
        [],  # nothing
    ],
)
def test_bad_reservations_raise(state: ClusterState, bad: list[Assignment]) -> None:
    with pytest.raises(ReservationError):
        state.reserve("j", bad)


def test_replayed_reservation_is_a_no_op_and_a_different_one_raises(state: ClusterState) -> None:
    state.reserve("j", [Assignment("a", (0,))])
    state.reserve("j", [Assignment("a", (0,))])  # at-least-once replay
    assert state.gpu_free_milli("a")[0] == 0
    with pytest.raises(ReservationError):
        state.reserve("j", [Assignment("a", (1,))])


def test_upsert_keeps_reservations_and_remove_forgets_the_node(state: ClusterState) -> None:
    state.reserve("j", [Assignment("a", (0, 1))])
    state.upsert_node(replace(state.node("a"), price_per_gpu_hour=1.0))
    assert state.gpu_free_milli("a")[:2] == (0, 0)
    state.upsert_node(replace(state.node("a"), gpu_count=4, nvlink_islands=()))  # shrank
    assert state.gpu_free_milli("a") == (0, 0, 1000, 1000)
    state.remove_node("a")
    assert "H100" not in state.free_gpus()
    assert state.release("j") is True  # the node is gone: releasing is still safe
    state.remove_node("a")  # twice is fine


def test_health_and_perf_update_derived_columns(state: ClusterState) -> None:
    slot = state.slot_of("a")
    state.set_gpu_health("a", [False, True, True, True, True, True, True, True])
    assert state.free_whole[slot] == 7 and state.healthy_count[slot] == 7
    assert state.island_free[slot] == 4  # the second island is whole
    state.set_perf_factor("a", [0.5] * 8)
    assert state.perf_mean[slot] == pytest.approx(0.5)
    state.set_node_healthy("a", False)
    assert "H100" not in state.free_gpus()


def test_slots_are_reused_and_arrays_grow(fleet, node) -> None:
    state = ClusterState(capacity=1, gpus=1)
    for i in range(10):
        state.upsert_node(node(f"n{i}", "H100", 8))
    state.remove_node("n3")
    state.upsert_node(node("n10", "H100", 16))  # wider than any before
    assert state.slot_of("n10") == 3
    assert state.free_gpus() == {"H100": 9 * 8 + 16}
    assert len(list(state.nodes)) == 10


def test_region_views_summarise_each_region(state: ClusterState) -> None:
    state.reserve("j", [Assignment("b", (0, 1, 2))])
    state.set_region_signal("us", carbon_g_per_kwh=120, price_per_kwh=0.1)
    state.set_queue_depth("us", 7)
    us = state.region_views()["us"]
    assert us.free_gpus == {"A100-80": 1, "T4": 2}
    assert us.largest_free_block == {"A100-80": 1, "T4": 2}
    assert us.total_gpus == {"A100-80": 4, "T4": 2}
    assert us.carbon_g_per_kwh == 120 and us.price_per_kwh == 0.1 and us.queue_depth == 7
    assert us.price_per_gpu_hour["T4"] == pytest.approx(0.35)  # catalogue price


def test_growing_rows_and_columns_at_once(node) -> None:
    state = ClusterState(capacity=1, gpus=1)
    state.upsert_node(node("a", "T4", 1))
    state.upsert_node(node("b", "H100", 16))  # needs a new row and wider columns
    assert state.gpu_free_milli("b") == (1000,) * 16
    assert state.free_gpus() == {"T4": 1, "H100": 16}


def test_region_slots_are_cached_until_membership_changes(state: ClusterState, node) -> None:
    us = state.slots("us")
    state.reserve("j", [Assignment("b", (0,))])  # occupancy does not touch membership
    state.set_gpu_health("b", [True] * 4)
    assert state.slots("us") is us
    state.upsert_node(node("d", "T4", 1, region="us"))
    assert state.slots("us") is not us and len(state.slots("us")) == 3


def test_region_views_match_a_plain_count(fleet, node) -> None:
    import random

    rnd = random.Random(5)
    models = ("H100", "T4", "A100-80")
    nodes = [
        node(f"n{i}", rnd.choice(models), rnd.choice((2, 4, 8)), region=rnd.choice(("eu", "us")))
        for i in range(60)
    ]
    state = fleet(nodes)
    for i, n in enumerate(nodes):
        used = tuple(range(rnd.randrange(n.gpu_count + 1)))
        if used:
            state.reserve(f"j{i}", [Assignment(n.node_id, used)])
    state.set_node_healthy("n0", False)
    views = state.region_views()
    for region in ("eu", "us"):
        live = [n for n in nodes if n.region == region and n.node_id != "n0"]
        for model in models:
            mine = [n for n in live if n.gpu_model == model]
            if not mine:
                assert model not in views[region].free_gpus
                continue
            free = [state.gpu_free_milli(n.node_id).count(1000) for n in mine]
            assert views[region].free_gpus[model] == sum(free)
            assert views[region].largest_free_block[model] == max(free)
            assert views[region].total_gpus[model] == sum(n.gpu_count for n in mine)
