"""Re-planning policy on plain data: who may move, what a move costs, the speed-aware queue
with aging, better-match moves that never make a job finish later, and defragmentation that
moves the shortest blockers first and never fragments the region more."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer import Assignment, ClusterState, JobSpec, NodeSpec, ThroughputModel, make_placer
from scorer.fragmix import LearnedMix, region_fragmentation
from scorer.replan import (
    ReplanConfig,
    RunningJob,
    Statement,
    Waiting,
    better_match,
    free_node_for,
    movable,
    move_cost,
    speed_aware_order,
)

H = 3600.0
CONFIG = ReplanConfig()  # job_cooldown_s 1800, max_moves_per_job 4


def run_of(job: JobSpec, *, moves: int = 0, last_move_ms: int | None = None) -> RunningJob:
    return RunningJob(job, "r", "K80", (Assignment("k", (0,)),), 0.25, 0, moves=moves,
                      last_move_ms=last_move_ms)  # fmt: skip


@pytest.mark.parametrize(
    ("job", "moves", "last_move_ms", "now_ms", "why"),
    [
        (JobSpec("a", expected_duration_s=H), 0, None, 0, None),
        (JobSpec("a", expected_duration_s=H, checkpointable=False), 0, None, 0,
         "cannot checkpoint"),
        (JobSpec("a", expected_duration_s=H, preemptible=False), 0, None, 0, "not preemptible"),
        (JobSpec("a"), 0, None, 0, "no duration estimate"),
        (JobSpec("a", expected_duration_s=H, gpu_count=0, cpu_milli=4000), 0, None, 0, "CPU-only"),
        # max_moves_per_job 4: the 5th move is refused whenever it comes
        (JobSpec("a", expected_duration_s=H), 4, 0, 10 * 3_600_000, "moved 4 times already"),
        # cooldown 1800 s: moved at 0, now 1799.999 s -> too soon; at 1800 s -> allowed
        (JobSpec("a", expected_duration_s=H), 1, 0, 1_799_999, "moved recently"),
        (JobSpec("a", expected_duration_s=H), 1, 0, 1_800_000, None),
    ],
)  # fmt: skip
def test_who_may_move(
    job: JobSpec, moves: int, last_move_ms: int | None, now_ms: int, why: str | None
) -> None:
    assert movable(run_of(job, moves=moves, last_move_ms=last_move_ms), now_ms, CONFIG) == why


def test_move_cost_arithmetic() -> None:
    # 4 h of reference work at speed 0.25 on a K80; 1 h (3600 s) after its start, checkpoints
    # every 1000 s: compute 3600 s, kept 3000 s, lost 600 s x 0.25 = 150 ref-s.
    # done 3600 x 0.25 = 900 ref-s, left 14400 - 900 = 13500; stay 13500 / 0.25 = 54000 s;
    # on a V100 (1.0) with a 60 s restore: 60 + (13500 + 150) / 1.0 = 13710 s; saved 40290 s
    run = RunningJob(JobSpec("a", expected_duration_s=4 * H), "r", "K80", (), 0.25, 0)
    cost = move_cost(run, 3_600_000, 1.0, restore_s=60, interval_s=1000)
    assert cost is not None
    assert (cost.stay_s, cost.move_s, cost.lost_s, cost.saved_s) == pytest.approx(
        (54000, 13710, 600, 40290)
    )
    assert cost.pays(margin_s=120, margin_frac=0.05)  # 40290 > 120 + 0.05 x 54000 = 2820
    # the same job with 150 ref-s left: stay 150 / 0.25 = 600 s; lost 150 ref-s again;
    # move 60 + (150 + 150) / 1.0 = 360 s: saves 240 s > 120 + 0.05 x 600 = 150 -> pays;
    # with a 300 s margin and no share it does not (240 < 300)
    late = RunningJob(JobSpec("a", expected_duration_s=4 * H), "r", "K80", (), 0.25, 0,
                      done_s=4 * H - 150 - 3600 * 0.25)  # fmt: skip
    small = move_cost(late, 3_600_000, 1.0, restore_s=60, interval_s=1000)
    assert small is not None and small.stay_s == pytest.approx(600)
    assert small.move_s == pytest.approx(360)
    assert small.pays(120, 0.05) and not small.pays(300, 0.0)


# -- the speed-aware queue --------------------------------------------------------------------


def waiting(job_id: str, hours: float, speeds: dict[str, float], queued_ms: int = 0) -> Waiting:
    return Waiting(job_id, queued_ms, 1, hours * H, speeds, max(speeds.values()))


@pytest.mark.parametrize(
    ("free", "order", "models"),
    [
        # a V100 frees: A 1 h / 1.0 -> key 1 h, B 3 h / 1.0 -> 3 h: A first
        ({"V100": 1}, ["A", "B"], ["V100", "V100"]),
        # a K80 frees: A 1 h at 0.1 -> 10 h, fit 0.1 -> 100 h; B 3 h at 0.5 -> 6 h, fit 0.5
        # -> 12 h: B first (A waits for a better GPU)
        ({"K80": 1}, ["B", "A"], ["K80", "K80"]),
        # nothing free that fits: both sort last (key inf), oldest first
        ({}, ["A", "B"], [None, None]),
    ],
)
def test_speed_aware_order(
    free: dict[str, int], order: list[str], models: list[str | None]
) -> None:
    jobs = [
        waiting("A", 1, {"V100": 1.0, "K80": 0.1}, queued_ms=0),
        waiting("B", 3, {"V100": 1.0, "K80": 0.5}, queued_ms=1),
    ]
    ranked = speed_aware_order(jobs, free, now_ms=0, aging=0.25)
    assert [r.job_id for r in ranked] == order
    assert [r.model for r in ranked] == models
    assert ranked[0].explain.startswith("speed-aware queue: 1 of 2")


@pytest.mark.parametrize(
    ("waited_h", "first"),
    [
        # L: 8 h on a V100, key 8 h - 0.25 x waited; S: a newcomer of 1 h, key 1 h.
        (0, "S"),  # 8 > 1
        (27.9, "S"),  # 8 - 6.975 = 1.025 > 1
        (28.1, "L"),  # 8 - 7.025 = 0.975 < 1: after 4 x (8 - 1) = 28 h it outranks any 1 h job
    ],
)
def test_aging_lets_a_long_job_overtake(waited_h: float, first: str) -> None:
    now = int(waited_h * H * 1000)
    jobs = [waiting("L", 8, {"V100": 1.0}, 0), waiting("S", 1, {"V100": 1.0}, now)]
    assert speed_aware_order(jobs, {"V100": 1}, now, aging=0.25)[0].job_id == first


def test_nothing_starves_under_a_stream_of_short_jobs() -> None:
    # One V100; every 30 min a 0.5 h job arrives and a GPU frees. L (10 h) waits from t=0.
    # Its key is 10 h - 0.25 x waited, a newcomer's 0.5 h: equal once 0.25 w = 9.5 h, i.e. at
    # 38 h = release 76 (i x 0.5 h), where the tie goes to the older job; without aging L would
    # never go.
    def first_release_for_long(aging: float, releases: int) -> int | None:
        queue = [waiting("L", 10, {"V100": 1.0}, 0)]
        for i in range(releases):
            now = int(i * 0.5 * H * 1000)
            queue.append(waiting(f"s{i}", 0.5, {"V100": 1.0}, now))
            chosen = speed_aware_order(queue, {"V100": 1}, now, aging=aging)[0].job_id
            if chosen == "L":
                return i
            queue = [w for w in queue if w.job_id != chosen]
        return None

    assert first_release_for_long(0.25, 200) == 76
    assert first_release_for_long(0.0, 200) is None


# -- better match never lengthens a job's expected finish ------------------------------------

MODELS = ("K80", "P100", "V100-16")
JOB_TYPES = ("ResNet-50 (batch size 64)", "Transformer (batch size 64)", "A3C", "CycleGAN")


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from(JOB_TYPES),
            st.sampled_from(MODELS),
            st.floats(0.2, 20),  # hours of reference work
            st.floats(0, 0.9),  # share done before this segment
            st.integers(0, 7200),  # seconds into this segment
            st.sampled_from((0, 300, 1800)),  # checkpoint interval (0: the config's)
        ),
        min_size=1,
        max_size=6,
    ),
    free_v100=st.integers(0, 4),
    free_p100=st.integers(0, 4),
    margin_s=st.sampled_from((0.0, 120.0)),
)
def test_better_match_never_lengthens_the_expected_finish(
    gavel: ThroughputModel,
    jobs: list[tuple[str, str, float, float, int, int]],
    free_v100: int,
    free_p100: int,
    margin_s: float,
) -> None:
    state = ClusterState()
    for model in MODELS:  # one 8-GPU node per model
        state.upsert_node(NodeSpec(f"n-{model}", "r", model, 8, 16384))
    placer = make_placer("gpuflow", state, throughput=gavel)
    config = ReplanConfig(margin_s=margin_s)
    now_ms = 10 * 3_600_000
    runs = []
    for i, (job_type, model, hours, share, into_s, interval) in enumerate(jobs):
        spec = JobSpec(f"j{i}", job_type=job_type, expected_duration_s=hours * H,
                       checkpoint_interval_s=interval, reference_gpu_model="V100-16")  # fmt: skip
        used = [g for g in range(8) if state.free_milli[state.slot_of(f"n-{model}"), g] > 0]
        if not used:
            continue
        assignment = (Assignment(f"n-{model}", (used[0],)),)
        state.reserve(spec.job_id, assignment)
        speed = gavel.relative_speed(spec, model)
        runs.append(RunningJob(spec, "r", model, assignment, speed, now_ms - into_s * 1000,
                               done_s=share * hours * H))  # fmt: skip
    for model, free in (("V100-16", free_v100), ("P100", free_p100)):  # fill the rest
        slot = state.slot_of(f"n-{model}")
        left = [g for g in range(8) if state.free_milli[slot, g] > 0]
        if len(left) > free:
            state.reserve(f"busy-{model}", [Assignment(f"n-{model}", tuple(left[free:]))])
    proposals = better_match(state, placer, runs, now_ms, config, Statement(state), budget=4)
    for p in proposals:
        run, new_speed = p.run, p.target.expected_throughput
        assert new_speed is not None and new_speed > run.speed
        # independently: stay = remaining / speed; move = restore + (remaining + lost) / new
        # speed, lost = the compute since the last checkpoint, at the old speed
        every = float(run.job.checkpoint_interval_s or config.checkpoint_interval_s)
        compute = (now_ms - run.started_ms) / 1000
        lost = (compute - math.floor(compute / every) * every) * run.speed
        assert run.duration_s is not None
        remaining = max(0.0, run.duration_s - run.done_s - compute * run.speed)
        stay = remaining / run.speed
        move = config.restore_s + (remaining + lost) / new_speed
        assert move < stay - margin_s, (run.job_id, stay, move)
        assert p.cost.move_s == pytest.approx(move) and p.cost.stay_s == pytest.approx(stay)


# -- defragmentation ---------------------------------------------------------------------------


def v100(node_id: str) -> NodeSpec:
    return NodeSpec(node_id, "r", "V100-16", 4, 16384)


def running(state: ClusterState, job_id: str, node_id: str, gpus: tuple[int, ...],
            hours: float, *, checkpointable: bool = True) -> RunningJob:  # fmt: skip
    spec = JobSpec(job_id, gpu_count=len(gpus), expected_duration_s=hours * H,
                   checkpointable=checkpointable, checkpoint_interval_s=600)  # fmt: skip
    assignment = (Assignment(node_id, gpus),)
    state.reserve(job_id, assignment)
    return RunningJob(spec, "r", "V100-16", assignment, 1.0, 0)


def defrag_setup() -> tuple[ClusterState, list[RunningJob]]:
    # n1: long (10 h) on GPU 0, short (1 h) on GPU 1, 2 free; n2: a 3-GPU job that cannot
    # checkpoint, 1 free. A 3-GPU gang waits: 3 GPUs free in total, no node has 3.
    state = ClusterState()
    for n in ("n1", "n2"):
        state.upsert_node(v100(n))
    runs = [
        running(state, "long", "n1", (0,), 10),
        running(state, "short", "n1", (1,), 1),
        running(state, "pinned", "n2", (0, 1, 2), 20, checkpointable=False),
    ]
    return state, runs


def test_defragmentation_moves_the_shortest_blocker_and_not_the_pinned_one() -> None:
    state, runs = defrag_setup()
    gang = JobSpec("gang", gpu_count=3)
    mix = LearnedMix()
    mix.observe("gang", 3, 1000, 0, 0)
    placer = make_placer("gpuflow", state)
    statement = Statement(state)
    # now 600 s in (a checkpoint just passed: nothing lost); short's wait 3000 s > restore
    # 60 s + margin 120 s: the move pays. n2 cannot be freed (pinned cannot checkpoint).
    plan = free_node_for(state, placer, gang, "r", runs, 600_000, ReplanConfig(), statement,
                         mix, budget=2)  # fmt: skip
    assert plan is not None
    assert plan.node_id == "n1"
    assert [m.run.job_id for m in plan.moves] == ["short"]  # shortest first; one is enough
    assert plan.moves[0].target.assignments[0].node_id == "n2"
    assert plan.wait_s == pytest.approx(3000)  # short: 3600 s - 600 s done
    before, after = plan.fragmentation
    assert after <= before
    # the target is held: n2's last GPU is promised to short, not free for anyone else
    assert state.free_gpus("r") == {"V100-16": 2}


def test_defragmentation_needs_the_wait_to_exceed_the_cost() -> None:
    state, runs = defrag_setup()
    gang = JobSpec("gang", gpu_count=3)
    mix = LearnedMix()
    mix.observe("gang", 3, 1000, 0, 0)
    # at 3420 s short has 180 s left: 180 < restore 60 + margin 120 + ... -> not worth it
    plan = free_node_for(state, make_placer("gpuflow", state), gang, "r", runs, 3_420_000,
                         ReplanConfig(), Statement(state), mix, budget=2)  # fmt: skip
    assert plan is None


@settings(max_examples=40, deadline=None)
@given(
    layout=st.lists(  # per node: jobs as (gpus, hours)
        st.lists(st.tuples(st.integers(1, 2), st.floats(0.5, 12)), max_size=3),
        min_size=2,
        max_size=4,
    ),
    need=st.integers(2, 4),
)
def test_defragmentation_never_fragments_the_region_more(
    layout: list[list[tuple[int, float]]], need: int
) -> None:
    state = ClusterState()
    runs = []
    for n, jobs in enumerate(layout):
        state.upsert_node(v100(f"n{n}"))
        next_gpu = 0
        for j, (gpus, hours) in enumerate(jobs):
            if next_gpu + gpus > 4:
                break
            gpu_ids = tuple(range(next_gpu, next_gpu + gpus))
            runs.append(running(state, f"j{n}.{j}", f"n{n}", gpu_ids, hours))
            next_gpu += gpus
    mix = LearnedMix()
    mix.observe("gang", need, 1000, 0, 0)
    for r in runs:
        mix.observe(r.job_id, r.job.gpu_count, 1000, 0, 0)
    before = region_fragmentation(state, "r", mix.classes())
    statement = Statement(state)
    plan = free_node_for(state, make_placer("gpuflow", state), JobSpec("gang", gpu_count=need),
                         "r", runs, 600_000, ReplanConfig(), statement, mix, budget=2)  # fmt: skip
    if plan is None:
        assert statement.held == []  # nothing left held by a plan that was dropped
        return
    assert 1 <= len(plan.moves) <= 2
    # carry the moves out: each mover leaves its GPUs for its (held) target
    for move in plan.moves:
        state.release(move.run.job_id)
        state.release(f"{move.run.job_id}#move")
        state.reserve(move.run.job_id, move.target.assignments)
    after = region_fragmentation(state, "r", mix.classes())
    assert after <= before + 1e-6
    assert plan.fragmentation[0] == pytest.approx(before)
    # the freed node now hosts the gang
    slot = state.slot_of(plan.node_id)
    assert int(state.free_whole[slot]) >= need
    # shortest first: no blocker left on the node finishes sooner than a mover
    movers = {m.run.job_id for m in plan.moves}
    on_node = [r for r in runs if r.assignments[0].node_id == plan.node_id]
    moved_left = max(r.finish_at(600_000) or 0 for r in on_node if r.job_id in movers)
    stayed = [r.finish_at(600_000) or 0 for r in on_node if r.job_id not in movers]
    assert all(moved_left <= s for s in stayed)


def test_defragmentation_tries_at_most_defrag_nodes_nodes() -> None:
    """The same setup as above: n1 is the only node worth freeing. With no node to try, the
    pass gives up at once (a pass's work is bounded however full the region is)."""
    state, runs = defrag_setup()
    gang = JobSpec("gang", gpu_count=3)
    mix = LearnedMix()
    mix.observe("gang", 3, 1000, 0, 0)
    placer = make_placer("gpuflow", state)
    for nodes, found in ((0, False), (1, True)):
        config = ReplanConfig(defrag_nodes=nodes)
        plan = free_node_for(state, placer, gang, "r", runs, 600_000, config, Statement(state),
                             mix, budget=2)  # fmt: skip
        assert (plan is not None) == found
