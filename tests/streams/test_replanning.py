"""The worker's Scheduler deciding again, against plain dicts and event time: migrations of
checkpointable jobs only, held targets released on timeout, the region's move limit, and the
speed-aware queue's choice explained on the decision."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, JOBS_ROUTED
from scorer import ClusterState, ThroughputModel, gavel_throughputs, make_placer
from scorer.replan import ReplanConfig
from streams.base.clock import EventClock
from streams.base.outbox import Outgoing
from streams.runtime.fleet import FleetTracker
from streams.scheduler.core import Scheduler

RESNET = "ResNet-50 (batch size 64)"  # Gavel: K80 0.619, P100 2.619, V100 4.395 steps/s
K80_SPEED = 0.6190282202246573 / 4.394774823323071  # 0.1409 of a V100


@pytest.fixture(scope="module")
def gavel() -> ThroughputModel:
    return gavel_throughputs()


def node(node_id: str, model: str, gpus: int) -> dict[str, Any]:
    return {"node_id": node_id, "region": "r", "gpu_model": model, "gpu_count": gpus,
            "gpu_memory_mib": 16384, "zone": "z", "rack": "k"}  # fmt: skip


def job(job_id: str, ts_ms: int, hours: float, gpus: int = 1, **kw: Any) -> dict[str, Any]:
    return {"event_id": f"e-{job_id}", "ts": ts_ms, "job_id": job_id, "kind": "TRAINING",
            "job_type": RESNET, "gpu_count": gpus, "gpu_milli": 1000,
            "expected_duration_s": hours * 3600, "reference_gpu_model": "V100-16",
            "checkpoint_interval_s": 600, **kw}  # fmt: skip


def make(
    gavel: ThroughputModel, *nodes: dict[str, Any], policy: str = "gpuflow", **replan: Any
) -> Scheduler:
    state = ClusterState()
    s = Scheduler(
        state,
        make_placer(policy, state, throughput=gavel),
        reservations={},
        queue={},
        nodes={n["node_id"]: n for n in nodes},
        partitions=4,
        view_ttl_s=0,
        moves={},
        replan=ReplanConfig(**replan),
        queue_order="speed_aware" if policy == "gpuflow" else "fifo",
        clock=EventClock(),
    )
    s.rebuild({})
    return s


def follow(s: Scheduler, out: list[Outgoing]) -> list[Outgoing]:
    """Deliver routed hops as the broker would; the decisions, in order."""
    decisions = []
    while out:
        msg = out.pop(0)
        if msg.topic == JOBS_ROUTED:
            out.extend(s.place(dict(msg.record), started_ns=0))
        else:
            decisions.append(msg)
    return decisions


def submit(s: Scheduler, record: dict[str, Any]) -> list[Outgoing]:
    return follow(s, s.route(record, started_ns=0))


def finish(s: Scheduler, job_id: str, ts_ms: int) -> list[Outgoing]:
    event = {"event_id": f"f-{job_id}", "type": "FINISHED", "job_id": job_id, "ts": ts_ms}
    return follow(s, s.on_job_event(event))


def moves(out: list[Outgoing]) -> list[Mapping[str, Any]]:
    return [m.record for m in out if m.topic == DECISIONS_MIGRATION]


def k80_job_waiting_for_a_v100(gavel: ThroughputModel, **kw: Any) -> Scheduler:
    """v: 1 V100 taken by `a` (1 h); x (10 h) starts on the K80 at 2 s."""
    s = make(gavel, node("v", "V100-16", 1), node("k", "K80", 1))
    submit(s, job("a", 1_000, 1))
    placed = submit(s, job("x", 2_000, 10, **kw))
    assert placed[0].record["gpu_model"] == "K80"
    return s


@pytest.mark.parametrize(
    ("flags", "moved"),
    [
        ({}, True),
        ({"checkpointable": False}, False),  # never a job that cannot checkpoint
        ({"preemptible": False}, False),
        ({"priority_class": "online-inference"}, False),  # its class is not preemptible
        ({"priority_class": "batch"}, True),
    ],
)
def test_only_checkpointable_jobs_move_to_a_faster_gpu(
    gavel: ThroughputModel, flags: dict[str, Any], moved: bool
) -> None:
    s = k80_job_waiting_for_a_v100(gavel, **flags)
    out = finish(s, "a", 3_601_000)
    assert [m["job_id"] for m in moves(out)] == (["x"] if moved else [])
    if moved:
        move = moves(out)[0]
        # x ran 3599 s on the K80 at 0.1409: 507 ref-s done, 35493 left; checkpoints every
        # 600 s keep 3000 s, so 599 s are lost. Stay 35493 / 0.1409 = 251975 s; move 60 +
        # (35493 + 599 x 0.1409) / 1.0 = 35637 s; the decision says what it gains
        # (the reservation keeps the decision's speed, rounded to 4 places: 0.1409)
        speed = round(K80_SPEED, 4)
        done = 3599 * speed
        stay = (36000 - done) / speed
        move_s = 60 + (36000 - done + 599 * speed)
        assert move["expected_gain"] == pytest.approx(stay - move_s, rel=1e-4)
        assert move["lost_work_s"] == pytest.approx(599)
        assert (move["from_gpu_model"], move["to_gpu_model"]) == ("K80", "V100-16")
        assert s.state.jobs["x#move"][0].node_id == "v"  # the target is held


def test_held_target_is_released_when_the_move_times_out(gavel: ThroughputModel) -> None:
    s = k80_job_waiting_for_a_v100(gavel)
    (move,) = moves(finish(s, "a", 3_601_000))
    deadline = move["hold_until_ts"]
    assert deadline == 3_601_000 + 300_000  # hold_s 300
    replanner = s.replanner
    assert replanner is not None
    s.clock.observe(deadline)  # at the deadline the hold still stands
    assert replanner.expire() == [] and s.state.free_gpus("r") == {}
    s.clock.observe(deadline + 1)  # no MIGRATED in time: the V100 comes back, x stays
    assert replanner.expire() == ["r"]
    assert "x#move" not in s.state.jobs
    assert s.state.free_gpus("r") == {"V100-16": 1}
    assert s.state.jobs["x"][0].node_id == "k"
    assert s.moves["x"]["status"] == "expired"


def test_confirmed_move_frees_the_old_gpus(gavel: ThroughputModel) -> None:
    s = k80_job_waiting_for_a_v100(gavel)
    (move,) = moves(finish(s, "a", 3_601_000))
    event = {"event_id": "m-x", "type": "MIGRATED", "job_id": "x", "ts": 3_700_000,
             "node_ids": ["v"]}  # fmt: skip
    follow(s, s.on_job_event(event))
    assert s.state.jobs["x"][0].node_id == "v" and "x#move" not in s.state.jobs
    assert s.state.free_gpus("r") == {"K80": 1}
    entry = s.reservations["x"]
    assert (entry["moves"], entry["last_move_ms"]) == (1, move["ts"])


def test_an_end_that_is_not_about_this_placement_keeps_its_move(gavel: ThroughputModel) -> None:
    """An EVICTED of an earlier epoch (late, or replayed) frees nothing and ends nothing: the
    move in flight keeps its hold, and its MIGRATED still lands."""
    s = k80_job_waiting_for_a_v100(gavel)
    moves(finish(s, "a", 3_601_000))
    stale = {"event_id": "e-old", "type": "EVICTED", "job_id": "x", "ts": 3_650_000, "epoch": 7}
    follow(s, s.on_job_event(stale))
    assert s.moves["x"]["status"] == "pending" and "x#move" in s.state.jobs
    event = {"event_id": "m-x", "type": "MIGRATED", "job_id": "x", "ts": 3_700_000,
             "node_ids": ["v"]}  # fmt: skip
    follow(s, s.on_job_event(event))
    assert s.state.jobs["x"][0].node_id == "v" and s.state.free_gpus("r") == {"K80": 1}


@pytest.mark.parametrize(("region_max_moves", "expected"), [(1, 1), (2, 2), (8, 2)])
def test_moves_per_region_are_capped(
    gavel: ThroughputModel, region_max_moves: int, expected: int
) -> None:
    # a 2-GPU job holds both V100s; x and y run on the two K80s. When it ends two V100s free
    # and both want one: the region may begin at most `region_max_moves` moves per window
    s = make(gavel, node("v", "V100-16", 2), node("k", "K80", 2),
             region_max_moves=region_max_moves)  # fmt: skip
    submit(s, job("a", 1_000, 1, gpus=2))
    submit(s, job("x", 2_000, 10))
    submit(s, job("y", 3_000, 10))
    assert len(moves(finish(s, "a", 3_601_000))) == expected


def test_a_job_moves_once_per_cooldown(gavel: ThroughputModel) -> None:
    # x: K80 -> P100 when the P100 frees at 3601 s; the V100 frees at 4201 s, within the
    # 1800 s cooldown (until 3601 + 1800 = 5401 s): x stays. The tick at 5401 s moves it
    # (no gap between passes: the ticks 1 ms apart each look).
    s = make(gavel, node("v", "V100-16", 1), node("p", "P100", 1), node("k", "K80", 1),
             pass_gap_s=0.0)  # fmt: skip
    submit(s, job("a", 1_000, 2))  # V100
    submit(s, job("b", 1_500, 1))  # P100
    assert submit(s, job("x", 2_000, 20))[0].record["gpu_model"] == "K80"
    (first,) = moves(finish(s, "b", 3_601_000))
    assert first["to_gpu_model"] == "P100"
    follow(s, s.on_job_event({"event_id": "m1", "type": "MIGRATED", "job_id": "x",
                              "ts": 3_700_000, "node_ids": ["p"]}))  # fmt: skip
    assert moves(finish(s, "a", 4_201_000)) == []
    assert moves(follow(s, s.on_tick(5_400_999))) == []
    (second,) = moves(follow(s, s.on_tick(5_401_000)))
    assert (second["from_gpu_model"], second["to_gpu_model"]) == ("P100", "V100-16")


def test_a_burst_of_releases_looks_for_moves_once_per_gap(gavel: ThroughputModel) -> None:
    # x and y run on K80s; a frees a V100 at 3601 s (x moves there), b frees the other V100
    # 0.5 s later, within the 2 s gap: no pass, y stays. The tick at 3603 s (2 s after the
    # pass) looks again and moves y.
    s = make(gavel, node("v", "V100-16", 2), node("k", "K80", 2))
    submit(s, job("a", 1_000, 1))
    submit(s, job("b", 1_000, 1))
    submit(s, job("x", 2_000, 10))
    submit(s, job("y", 2_100, 10))
    assert len(moves(finish(s, "a", 3_601_000))) == 1
    assert moves(finish(s, "b", 3_601_500)) == []
    assert moves(follow(s, s.on_tick(3_602_999))) == []
    assert len(moves(follow(s, s.on_tick(3_603_000)))) == 1


@pytest.mark.parametrize(("policy", "first"), [("gpuflow", "short"), ("bestfit", "long")])
def test_queue_order_when_a_gpu_frees(gavel: ThroughputModel, policy: str, first: str) -> None:
    # one V100 busy for 1 h; long (8 h) queued before short (1 h). When it frees, the
    # speed-aware queue takes short (key 1 h < 8 h); fifo takes the oldest
    s = make(gavel, node("v", "V100-16", 1), policy=policy)
    submit(s, job("a", 1_000, 1))
    submit(s, job("long", 2_000, 8))
    submit(s, job("short", 3_000, 1))
    placed = [m.record for m in finish(s, "a", 3_601_000) if m.topic == DECISIONS_PLACEMENT]
    assert placed[0]["job_id"] == first and placed[0]["outcome"] == "PLACED"
    if policy == "gpuflow":
        assert any(r.startswith("speed-aware queue: 1 of 2") for r in placed[0]["reasons"])


def test_an_expired_move_frees_the_region_budget_after_the_window(
    gavel: ThroughputModel,
) -> None:
    # region_max_moves 1 per 300 s window, hold 60 s. The move decided at 3601 s is never
    # confirmed: its hold ends at 3661 s. It began at 3601 s, so it counts against the region
    # until 3601 + 300 = 3901 s; after that the region may move again.
    s = make(gavel, node("v", "V100-16", 1), node("k", "K80", 1), region_max_moves=1, hold_s=60)
    submit(s, job("a", 1_000, 1))
    submit(s, job("x", 2_000, 10))
    (first,) = moves(finish(s, "a", 3_601_000))
    replanner = s.replanner
    assert replanner is not None
    assert moves(follow(s, s.on_tick(3_662_000))) == []  # expired; the window is still full
    assert s.moves["x"]["status"] == "expired"
    assert replanner.region_budget("r", 3_900_000) == 0
    assert replanner.region_budget("r", 3_902_000) == 1
    (again,) = moves(follow(s, s.on_tick(3_902_000)))
    assert again["job_id"] == "x" and again["ts"] == 3_902_000 != first["ts"]


# -- cheaper or greener ------------------------------------------------------------------------


def grid(region: str, carbon: float, ts_ms: int) -> dict[str, Any]:
    return {"event_id": f"g-{region}-{ts_ms}", "ts": ts_ms, "region": region,
            "carbon_g_per_kwh": carbon, "price_per_kwh": 0.1}  # fmt: skip


def dirty_and_clean(
    gavel: ThroughputModel, replan: dict[str, Any] | None = None, **kw: Any
) -> tuple[Scheduler, FleetTracker]:
    """x (10 h, checkpoints every 600 s) runs on the dirty V100; a (1 h) on the clean one.
    The move passes look on every event (no gaps) unless `replan` says otherwise."""
    dirty, clean = node("d", "V100-16", 1), node("c", "V100-16", 1)
    dirty["region"], clean["region"] = "dirty", "clean"
    gaps = {"pass_gap_s": 0.0, "footprint_every_s": 0.0, **(replan or {})}
    s = make(gavel, dirty, clean, max_slowdown=0.05, **gaps)
    submit(s, job("a", 1_000, 1, allowed_regions=["clean"]))
    placed = submit(s, job("x", 2_000, 10, allowed_regions=["dirty", "clean"], **kw))
    assert placed[0].record["region"] == "dirty"
    return s, FleetTracker(s, stale_after_s=1e9)


@pytest.mark.parametrize(
    ("clean_g", "checkpointable", "moved"),
    [
        # 400 -> 40 g/kWh on the same V100: carbon 1 - 0.1 x 1.0017 = 90 %, price -0.17 %,
        # weighted 45 % > margin 10 %: x moves to `clean`
        (40.0, True, True),
        # 400 -> 390 g/kWh: carbon 2.3 %, weighted 1 % < 10 %: stays
        (390.0, True, False),
        # never a job that cannot checkpoint
        (40.0, False, False),
    ],
)
def test_a_job_moves_to_a_region_whose_grid_is_much_cleaner(
    gavel: ThroughputModel, clean_g: float, checkpointable: bool, moved: bool
) -> None:
    s, fleet = dirty_and_clean(gavel, checkpointable=checkpointable)
    fleet.on_grid(grid("dirty", 400.0, 3_000))
    fleet.on_grid(grid("clean", clean_g, 3_000))
    finish(s, "a", 3_601_000)  # the clean V100 frees
    # x ran 3599 s at 1.0 (checkpoints every 600 s: 3000 s kept, 599 s lost): 32401 s left;
    # moving costs 60 s + 599 s redone = 33060 s, 2.0 % later (max_slowdown 5 %)
    out = follow(s, s.on_tick(3_602_000))
    got = moves(out)
    assert [(m["job_id"], m["to_region"], m["reason"]) for m in got] == (
        [("x", "clean", "GREENER")] if moved else []
    )
    if moved:
        assert got[0]["from_region"] == "dirty"
        assert any("carbon" in r for r in got[0]["reasons"])
        # held: the clean V100 is promised to x until MIGRATED or the hold runs out
        assert s.state.free_gpus("clean") == {}


def test_a_grid_change_wakes_a_quiet_pass(gavel: ThroughputModel) -> None:
    s, fleet = dirty_and_clean(gavel)
    fleet.on_grid(grid("dirty", 400.0, 3_000))
    fleet.on_grid(grid("clean", 390.0, 3_000))
    finish(s, "a", 3_601_000)
    assert moves(follow(s, s.on_tick(3_602_000))) == []  # 1 % saved: nothing pays, quiet
    # the clean grid drops to 40 g/kWh; nothing else changed (same free GPUs, no checkpoint
    # passed between 3.602 and 3.603 Ms): the next tick looks again and x moves
    fleet.on_grid(grid("clean", 40.0, 3_602_500))
    (move,) = moves(follow(s, s.on_tick(3_603_000)))
    assert (move["job_id"], move["to_region"], move["reason"]) == ("x", "clean", "GREENER")


def test_a_region_looks_for_cheaper_or_greener_places_once_a_minute(
    gavel: ThroughputModel,
) -> None:
    # the same wake-up with the default gaps: dirty's pass at the tick of 3602 s found
    # nothing, so the grid change at 3602.5 s waits for the minute to pass (3662 s)
    s, fleet = dirty_and_clean(gavel, {"pass_gap_s": 2.0, "footprint_every_s": 60.0})
    fleet.on_grid(grid("dirty", 400.0, 3_000))
    fleet.on_grid(grid("clean", 390.0, 3_000))
    finish(s, "a", 3_601_000)
    assert moves(follow(s, s.on_tick(3_602_000))) == []
    fleet.on_grid(grid("clean", 40.0, 3_602_500))
    assert moves(follow(s, s.on_tick(3_605_000))) == []
    assert moves(follow(s, s.on_tick(3_660_000))) == []  # a pass, but not a minute yet
    (move,) = moves(follow(s, s.on_tick(3_662_000)))
    assert (move["job_id"], move["to_region"]) == ("x", "clean")


def test_the_speed_order_keeps_each_waiting_job_s_speeds_between_passes(
    gavel: ThroughputModel,
) -> None:
    from streams.scheduler.speed_order import order_waiting

    s = make(gavel, node("v", "V100-16", 1), node("k", "K80", 1))
    waiting = [
        {"job": job(f"w{i}", 1_000 * i, hours), "region": "r", "queued_ts": 1_000 * i}
        for i, hours in enumerate((3.0, 1.0, 2.0))
    ]

    def order(known: dict[Any, Any] | None) -> list[Any]:
        return order_waiting(waiting, order="speed_aware", state=s.state, region="r",
                             throughput=gavel, now_ms=10_000, aging=0.25, known=known)  # fmt: skip

    known: dict[Any, Any] = {}
    first = order(known)
    kept = dict(known)
    again = order(known)
    plain = order(None)
    assert [r.job_id for _, r in first] == [r.job_id for _, r in plain] == ["w1", "w2", "w0"]
    assert [r.job_id for _, r in again] == [r.job_id for _, r in first]
    assert len(known) == 3 and all(known[k] is kept[k] for k in kept)  # reused, not rebuilt
