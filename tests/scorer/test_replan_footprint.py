"""Cheaper or greener moves on plain data: a running job moves when another place finishes it
for less money and/or carbon by more than the margin (restore and lost work charged), never a
job that cannot checkpoint, never finishing later than `max_slowdown` allows, and only where
its regions permit."""

from __future__ import annotations

import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, make_placer
from scorer.replan import (
    Footprint,
    MoveCost,
    ReplanConfig,
    RunningJob,
    Statement,
    cheaper_or_greener,
    footprint_saving,
)

H = 3600.0
NOW = 10 * 3_600_000  # 10 h into the trace
# the job started 1 h ago and checkpoints every 1800 s: compute 3600 s, nothing lost now
STARTED = NOW - 3_600_000
ALLOW = ReplanConfig(max_slowdown=0.05)  # same-speed moves pay a 60 s restore: allow 5 %


@pytest.mark.parametrize(
    ("stay", "move", "stay_s", "move_s", "w", "expected"),
    [
        # carbon only matters (w 1): 120 g/h x 10 h = 1200 g vs 15 g/h x 10.0167 h = 150.25 g
        # -> (1200 - 150.25) / 1200 = 0.8748
        (Footprint(2.48, 120.0), Footprint(2.48, 15.0), 36000, 36060, 1.0, 0.8748),
        # price only (w 0): $24.80 vs $2.48 x 10.0167 h = $24.8413 -> -0.17 %
        (Footprint(2.48, 120.0), Footprint(2.48, 15.0), 36000, 36060, 0.0, -0.00167),
        # half and half: (0.8748 - 0.00167) / 2 = 0.4366
        (Footprint(2.48, 120.0), Footprint(2.48, 15.0), 36000, 36060, 0.5, 0.4366),
        # half price, same grid, 2 h vs 2 h + 600 s: $2 x 2 = 4 vs $1 x 2.1667 = 2.1667 ->
        # 45.8 % on price, carbon 10 x 2 = 20 vs 10 x 2.1667 = 21.667 -> -8.3 %; w 0.5: 18.75 %
        (Footprint(2.0, 10.0), Footprint(1.0, 10.0), 7200, 7800, 0.5, 0.1875),
        # a free node (price 0) leaves only carbon: weights renormalise to carbon alone
        (Footprint(0.0, 10.0), Footprint(0.0, 5.0), 3600, 3600, 0.5, 0.5),
        # nothing costs anything: nothing to save
        (Footprint(0.0, 0.0), Footprint(0.0, 0.0), 3600, 3600, 0.5, 0.0),
    ],
)  # fmt: skip
def test_footprint_saving_arithmetic(
    stay: Footprint, move: Footprint, stay_s: float, move_s: float, w: float, expected: float
) -> None:
    cost = MoveCost(stay_s, move_s, 60.0, 0.0, stay_s - move_s)
    assert footprint_saving(stay, move, cost, w)[0] == pytest.approx(expected, abs=1e-4)


def two_regions(
    *, carbon: tuple[float, float] = (400.0, 50.0), price: tuple[float, float] = (2.0, 2.0)
) -> ClusterState:
    """`dirty` (where the job runs) and `clean`: one 4-GPU V100 node each."""
    state = ClusterState()
    for (region, g), p in zip((("dirty", carbon[0]), ("clean", carbon[1])), price, strict=True):
        state.upsert_node(NodeSpec(f"n-{region}", region, "V100-16", 4, 16384,
                                   price_per_gpu_hour=p))  # fmt: skip
        state.set_region_signal(region, carbon_g_per_kwh=g)
    return state


def run_on_dirty(state: ClusterState, job: JobSpec, *, started_ms: int = STARTED) -> RunningJob:
    assignment = (Assignment("n-dirty", (0,)),)
    state.reserve(job.job_id, assignment)
    return RunningJob(job, "dirty", "V100-16", assignment, 1.0, started_ms)


def moves(state: ClusterState, runs: list[RunningJob], config: ReplanConfig) -> list[str]:
    placer = make_placer("gpuflow", state)
    proposals = cheaper_or_greener(state, placer, runs, NOW, config, Statement(state), budget=4)
    return [f"{p.run.job_id}:{p.reason}:{p.target.region}" for p in proposals]


def job(**kw: object) -> JobSpec:
    args: dict[str, object] = {"expected_duration_s": 11 * H, "checkpoint_interval_s": 1800}
    return JobSpec("j", **(args | kw))  # type: ignore[arg-type]


# The job: 11 h of work at speed 1.0, 1 h done, 10 h (36,000 s) left on one V100 (300 W).
# Staying: 36,000 s. Moving at NOW: nothing lost (compute 3600 s = 2 checkpoints), restore
# 60 s -> 36,060 s, i.e. 0.17 % later (allowed by max_slowdown 0.05, not by 0).
@pytest.mark.parametrize(
    ("carbon", "price", "spec", "config", "expected"),
    [
        # 400 -> 50 g/kWh, same price. Carbon 120 g/h x 10 h = 1200 g vs 15 g/h x 10.0167 h
        # = 150 g: 87.5 %; price -0.17 %; w 0.5 -> 43.7 % > margin 10 %: moves, GREENER
        ((400, 50), (2, 2), job(), ALLOW, ["j:GREENER:clean"]),
        # 400 -> 380 g/kWh: carbon 1 - 0.95 x 1.00167 = 4.8 %, w 0.5 -> 2.3 % < 10 %: stays
        ((400, 380), (2, 2), job(), ALLOW, []),
        # 400 -> 300: carbon 24.8 %, w 0.5 -> 12.3 % > 10 %: moves; with margin 0.15: stays
        ((400, 300), (2, 2), job(), ALLOW, ["j:GREENER:clean"]),
        ((400, 300), (2, 2), job(), ReplanConfig(max_slowdown=0.05, footprint_margin=0.15), []),
        # same grid, $2 -> $1: price 1 - 0.5 x 1.00167 = 49.9 %, carbon -0.17 %: 24.9 % ->
        # CHEAPER; price ignored (carbon_weight 1): -0.17 %, stays
        ((400, 400), (2, 1), job(), ALLOW, ["j:CHEAPER:clean"]),
        ((400, 400), (2, 1), job(), ReplanConfig(max_slowdown=0.05, carbon_weight=1.0), []),
        # the default max_slowdown 0: the restore makes it finish 60 s later -> stays
        ((400, 50), (2, 2), job(), ReplanConfig(), []),
        # a job that cannot checkpoint (or be stopped) never moves, whatever it would save
        ((400, 50), (2, 2), job(checkpointable=False), ALLOW, []),
        ((400, 50), (2, 2), job(preemptible=False), ALLOW, []),
        # its regions forbid it: allowed_regions, a data region elsewhere, cross_region off
        ((400, 50), (2, 2), job(allowed_regions=("dirty",)), ALLOW, []),
        ((400, 50), (2, 2), job(data_region="dirty"), ALLOW, []),
        ((400, 50), (2, 2), job(data_region="clean"), ALLOW, ["j:GREENER:clean"]),
        ((400, 50), (2, 2), job(), ReplanConfig(max_slowdown=0.05, cross_region=False), []),
    ],
)  # fmt: skip
def test_moves_only_when_the_saving_beats_cost_and_margin(
    carbon: tuple[float, float],
    price: tuple[float, float],
    spec: JobSpec,
    config: ReplanConfig,
    expected: list[str],
) -> None:
    state = two_regions(carbon=carbon, price=price)
    assert moves(state, [run_on_dirty(state, spec)], config) == expected


@pytest.mark.parametrize(
    ("into_s", "left_h", "expected"),
    [
        # 1790 s since the last checkpoint (compute 3590 s, checkpoint at 1800 s): moving
        # redoes 1790 s + 60 s restore = 1850 s more. 10 h left: 5.1 % later > 5 %: stays
        (3590, 10.0, []),
        # 10 s since the checkpoint: 70 s more on 10 h, 0.19 %: moves
        (1810, 10.0, ["j:GREENER:clean"]),
        # 0.25 h (900 s) left, 10 s lost: 70 / 900 = 7.8 % later > 5 %: stays
        (1810, 0.25, []),
    ],
)
def test_never_finishes_later_than_the_allowed_slowdown(
    into_s: int, left_h: float, expected: list[str]
) -> None:
    state = two_regions()
    spec = job(expected_duration_s=into_s + left_h * H)
    run = run_on_dirty(state, spec, started_ms=NOW - into_s * 1000)
    assert moves(state, [run], ALLOW) == expected


def test_every_proposal_respects_the_slowdown_and_margin() -> None:
    # many jobs at different points of their checkpoint period: whatever moves, its move time
    # (restore + remaining + lost) stays within 1.05 x the stay time and its saving > 10 %
    state = two_regions()
    state.upsert_node(NodeSpec("n-dirty2", "dirty", "V100-16", 8, 16384, price_per_gpu_hour=2))
    runs = []
    for i in range(8):
        spec = JobSpec(f"j{i}", expected_duration_s=(i + 1) * 1500.0 + 3600,
                       checkpoint_interval_s=1800)  # fmt: skip
        assignment = (Assignment("n-dirty2", (i,)),)
        state.reserve(spec.job_id, assignment)
        runs.append(
            RunningJob(spec, "dirty", "V100-16", assignment, 1.0, NOW - 3600_000 + i * 200_000)
        )
    placer = make_placer("gpuflow", state)
    proposals = cheaper_or_greener(state, placer, runs, NOW, ALLOW, Statement(state), budget=8)
    assert proposals  # the clean node has 4 GPUs: some move
    assert len(proposals) <= 4  # never more than the clean node's free GPUs (held)
    for p in proposals:
        assert p.cost.move_s <= 1.05 * p.cost.stay_s
        assert p.target.region == "clean"
