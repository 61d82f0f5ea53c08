"""The default preset's packing scores kept incrementally equal the scores computed afresh.

`FgdScore` keeps each node's score per job shape by row version (`scorer/scores/fgd_cache.py`)
and `model_pressure` reads each region's free GPU per model from the state's running totals
(`ClusterState.free_by_model`). Here a seeded churn of reservations (whole GPUs, shares, host
CPU and memory), releases, GPU and node health, inventory changes (another GPU model, another
region, fewer GPUs) and removals runs over a fleet of two GPU models, with pinned and unpinned
jobs moving the mixes, and after every step both are compared with a computation from scratch.
"""

from __future__ import annotations

import numpy as np
import pytest

from scorer import Assignment, ClusterState, JobSpec, NodeSpec
from scorer.fragmix import FULL, MixClasses, Profile, fragmentation
from scorer.framework import CycleContext
from scorer.outcome import model_vectors
from scorer.scores.fgd import FgdScore, share_growth
from scorer.scores.fragmentation import growth_score
from scorer.scores.model_pressure import ModelPressureScore, pressure_score
from scorer.throughput import ThroughputModel

REGIONS = ("a", "b", "c")
MODELS = ("H100", "T4")


def _node(i: int, region: str, model: str = "H100", gpus: int = 8) -> NodeSpec:
    return NodeSpec(f"n{i}", region, model, gpus, 16384,
                    cpu_milli=32_000 * (i % 3 == 0), memory_mib=256_000 * (i % 3 == 0))  # fmt: skip


def _fleet() -> ClusterState:
    state = ClusterState(capacity=2)
    for i in range(14):
        state.upsert_node(_node(i, REGIONS[i % 3], MODELS[i % 2]))
    return state


def _step(state: ClusterState, rng: np.random.Generator, i: int, held: list[str]) -> None:
    nodes = sorted(n.node_id for n in state.nodes)
    node = nodes[int(rng.integers(len(nodes)))]
    slot = state.slot_of(node)
    action = int(rng.integers(8))
    if action <= 2:
        free = np.flatnonzero(state.free_milli[slot, : state.gpu_count[slot]] == FULL).tolist()
        if free:
            take = free[: int(rng.integers(1, len(free) + 1))]
            milli = FULL if action else int(rng.choice([250, 500]))
            cpu = 4000 * int(rng.integers(3)) if state.cpu_milli[slot] else 0
            gpus = tuple(take[:1] if milli < FULL else take)
            state.reserve(f"j{i}", [Assignment(node, gpus, milli, cpu_milli=cpu)])
            held.append(f"j{i}")
    elif action == 3 and held:
        state.release(held.pop(int(rng.integers(len(held)))))
    elif action == 4:
        state.set_gpu_health(node, [bool(rng.random() > 0.3) for _ in range(8)])
    elif action == 5:
        state.set_node_healthy(node, bool(rng.random() > 0.3))
    elif action == 6:  # inventory change: another model, region or GPU count
        model, region = MODELS[int(rng.integers(2))], REGIONS[int(rng.integers(3))]
        state.upsert_node(_node(int(node[1:]), region, model, int(rng.choice([4, 8]))))
    elif len(nodes) > 8 and rng.random() < 0.5:
        state.remove_node(node)
    else:
        state.upsert_node(_node(100 + i, REGIONS[i % 3], MODELS[i % 2]))


def _context(state: ClusterState, job: JobSpec, region: str | None, spread: bool) -> CycleContext:
    tp = ThroughputModel(state.catalog)
    vectors = model_vectors(job, state.models, tp)
    return CycleContext(job, state, tp, state.slots(region), vectors, spread=spread)


def _fgd_afresh(fgd: FgdScore, ctx: CycleContext, slots: np.ndarray) -> np.ndarray:
    """FGD's score computed from scratch, model by model (the plugin before its cache)."""
    s, job = ctx.state, ctx.job
    growth, requested = np.zeros(slots.shape[0]), np.zeros(slots.shape[0])
    models = s.model[slots]
    for m in np.unique(models):
        at = np.flatnonzero(models == m)
        classes, no_access = fgd.mix.for_model(s.models[int(m)])
        part = slots[at]
        now = fragmentation(Profile.of_state(s, part), classes)
        if ctx.fractional:
            grown = share_growth(s, part, job, classes, now).min(axis=1)
            requested[at] = job.gpu_milli
        else:
            k = np.broadcast_to(np.asarray(ctx.gpus_taken(part)), (part.shape[0],))
            after = Profile.of_state(s, part).taking_whole(k, job.cpu_milli, job.memory_mib)
            grown = fragmentation(after, classes) - now
            requested[at] = k * FULL
        growth[at] = grown - no_access * requested[at]
    return growth_score(growth, requested)


def _pressure_afresh(mp: ModelPressureScore, ctx: CycleContext) -> np.ndarray:
    s, scope = ctx.state, ctx.slots
    free = np.bincount(s.model[scope], weights=s.free_milli_total[scope],
                       minlength=len(s.models)).astype(float)  # fmt: skip
    bound = mp._bound_share(s.models, free > 0)
    return pressure_score(bound, free / max(float(free.sum()), 1.0))[s.model[ctx.slots]]


JOBS = [
    (JobSpec("one"), False),
    (JobSpec("share", gpu_milli=250, cpu_milli=4000, memory_mib=8000), False),
    (JobSpec("eight", gpu_count=8, tensor_parallel=8), False),
    (JobSpec("gang", gpu_count=16, tensor_parallel=4), True),
]


@pytest.mark.parametrize(("job", "spread"), JOBS)
def test_cached_fgd_and_pressure_equal_them_afresh(job: JobSpec, spread: bool) -> None:
    rng = np.random.default_rng(11)
    state = _fleet()
    fgd, pressure, held = FgdScore(), ModelPressureScore(), list[str]()
    for i in range(150):
        _step(state, rng, i, held)
        # the mixes move: a job scored once each, pinned to T4 every third
        pinned = ("T4",) if i % 3 == 0 else ()
        seen = JobSpec(f"m{i}", gpu_count=int(rng.choice([1, 2, 8])), allowed_gpu_models=pinned)
        fgd.score(_context(state, seen, None, False), state.slots())
        pressure.score(_context(state, seen, None, False), state.slots())
        for region in (REGIONS[i % 3], None):
            ctx = _context(state, job, region, spread)
            slots = ctx.slots[::2] if i % 2 else ctx.slots  # candidates: a subset, or all
            got = fgd.score(ctx, slots)
            assert got.tolist() == _fgd_afresh(fgd, ctx, slots).tolist(), (i, region)
            got_p = np.broadcast_to(pressure.score(ctx, slots), slots.shape)
            assert got_p.tolist() == _pressure_afresh(pressure, ctx)[:: 1 + i % 2].tolist()


def test_free_by_model_follows_churn() -> None:
    rng = np.random.default_rng(4)
    state, held = _fleet(), list[str]()
    for i in range(300):
        _step(state, rng, i, held)
        for region in (*REGIONS, None, "nowhere"):
            slots = state.slots(region)
            want = np.bincount(state.model[slots], weights=state.free_milli_total[slots],
                               minlength=len(state.models))  # fmt: skip
            assert state.free_by_model(region).tolist() == want.tolist(), (i, region)


def _share_growth_per_gpu(
    s: ClusterState, slots: np.ndarray, job: JobSpec, classes: MixClasses, now: np.ndarray
) -> np.ndarray:
    """Share growth as it was computed before the one-pass form: a pass per GPU column."""
    before = Profile.of_state(s, slots)
    free = np.where(s.gpu_exists[slots] & s.gpu_ok[slots], s.free_milli[slots], -1)
    out = np.full(free.shape, np.inf)
    for g in range(free.shape[1]):
        fits = free[:, g] >= job.gpu_milli
        if not fits.any():
            continue
        x = np.where(fits, free[:, g], job.gpu_milli)
        after = before.taking_share(x, job.gpu_milli, job.cpu_milli, job.memory_mib)
        out[:, g] = np.where(fits, fragmentation(after, classes) - now, np.inf)
    return out


@pytest.mark.parametrize(("milli", "cpu", "memory"), [(250, 0, 0), (500, 4000, 8000), (100, 0, 9)])
def test_share_growth_in_one_pass_equals_a_pass_per_gpu(milli: int, cpu: int, memory: int) -> None:
    rng = np.random.default_rng(milli)
    state, fgd, held = _fleet(), FgdScore(), list[str]()
    job = JobSpec("s", gpu_milli=milli, cpu_milli=cpu, memory_mib=memory)
    for i in range(150):
        _step(state, rng, i, held)
        seen = JobSpec(f"m{i}", gpu_count=1, gpu_milli=int(rng.choice([125, 500, 1000])),
                       cpu_milli=2000 * (i % 2), memory_mib=4000 * (i % 3))  # fmt: skip
        fgd.observe(seen)
        slots = state.slots()
        for m in np.unique(state.model[slots]):
            part = slots[state.model[slots] == m]
            classes, _ = fgd.mix.for_model(state.models[int(m)])
            now = fragmentation(Profile.of_state(state, part), classes)
            want = _share_growth_per_gpu(state, part, job, classes, now)
            assert share_growth(state, part, job, classes, now).tolist() == want.tolist(), i
