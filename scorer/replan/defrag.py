"""Progressive defragmentation: when a gang waits although its region has the GPUs in total,
move a few short (or just checkpointed) jobs so that one node is whole for it.

For the waiting gang, every node of a model it can use with enough GPUs is a candidate; the
jobs on it that hold GPUs are its blockers. A node is freed only if every blocker may move
(`movable`), the gang would wait longer for it than the moves cost (the wait is the time until
the node's slowest blocker finishes; the cost, each mover's restore plus the work it loses since
its last checkpoint), and each blocker has a target elsewhere at no lower speed (the placer
picks it; the node being freed is shielded meanwhile). Among such nodes the one whose movers
cost least wins, shortest jobs first. FGD's fragmentation of the region (against the learned
mix) before and after is measured and reported, and the node is freed only if the moves do not
fragment the region more. At most `budget` moves per pass: a few at a time, progressively.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scorer.fragmix import LearnedMix, region_fragmentation
from scorer.placer import Placer
from scorer.replan.config import ReplanConfig
from scorer.replan.migration import MoveProposal, Statement, hold_key, movable
from scorer.replan.progress import RunningJob, move_cost
from scorer.state import FULL_GPU, ClusterState
from scorer.types import Assignment, JobSpec

__all__ = ["Defrag", "free_node_for"]

SHIELD = "#shield"  # the node being freed, held while targets are chosen


@dataclass(frozen=True)
class Defrag:
    """The moves that free `node_id` for `gang`, and what they are worth."""

    gang: str
    node_id: str
    moves: tuple[MoveProposal, ...]
    wait_s: float  # how long the gang would wait for the node without the moves
    cost_s: float  # the movers' restores and lost work
    fragmentation: tuple[float, float]  # the region's FGD measure before and after (milli-GPU)


def _blockers(run_on: dict[str, list[RunningJob]], node_id: str) -> list[RunningJob]:
    return run_on.get(node_id, [])


def free_node_for(
    state: ClusterState,
    placer: Placer,
    gang: JobSpec,
    region: str,
    runs: Sequence[RunningJob],
    now_ms: int,
    config: ReplanConfig,
    statement: Statement,
    mix: LearnedMix,
    *,
    budget: int,
) -> Defrag | None:
    """Moves (targets held in `statement`) that leave one node whole for `gang`, or None."""
    need = gang.gpu_count
    speeds = {m: placer.throughput.relative_speed(gang, m) for m in state.models if m}
    allowed = {placer.throughput.catalog.canonical(m) for m in gang.allowed_gpu_models}
    run_on: dict[str, list[RunningJob]] = {}
    for run in runs:
        for node in {a.node_id for a in run.assignments}:
            run_on.setdefault(node, []).append(run)
    options = []
    for slot in state.slots(region):
        model = state.models[int(state.model[slot])]
        if speeds.get(model, 0) <= 0 or (allowed and model not in allowed):
            continue
        if state.gpu_count[slot] < need or not state.node_ok[slot]:
            continue
        node_id = state.spec(int(slot)).node_id
        plan = _plan(state, int(slot), node_id, need, _blockers(run_on, node_id), now_ms, config)
        if plan is not None:
            options.append((plan[1], -speeds[model], node_id, plan[0], plan[2]))
    before = region_fragmentation(state, region, mix.classes())
    tried = 0
    for cost, _, node_id, movers, wait in sorted(options):
        if len(movers) > budget:
            continue
        if tried >= config.defrag_nodes:
            break
        tried += 1
        moves = _targets(state, placer, node_id, movers, now_ms, config, statement, gang.job_id)
        if moves is None:
            continue
        after = _fragmentation_after(state, region, movers, mix)
        if after > before + 1e-6:
            statement.discard()
            continue
        gain = (wait - cost) / len(moves)
        moves = [replace(m, gain_s=gain) for m in moves]
        return Defrag(gang.job_id, node_id, tuple(moves), wait, cost, (before, after))
    return None


def _fragmentation_after(
    state: ClusterState, region: str, movers: list[RunningJob], mix: LearnedMix
) -> float:
    """The region's measure once the movers sit on their (held) targets and left their GPUs."""
    for run in movers:
        state.release(run.job_id)
    try:
        return region_fragmentation(state, region, mix.classes())
    finally:
        for run in movers:
            state.reserve(run.job_id, run.assignments)


def _plan(
    state: ClusterState,
    slot: int,
    node_id: str,
    need: int,
    blockers: list[RunningJob],
    now_ms: int,
    config: ReplanConfig,
) -> tuple[list[RunningJob], float, float] | None:
    """The blockers to move off this node (shortest first), their cost, the gang's wait."""
    free = int(state.free_whole[slot])
    if free >= need or not blockers:
        return None  # it fits already (the placer will find it) or nothing to move
    if any(movable(r, now_ms, config) is not None for r in blockers):
        return None
    held = {b.job_id: sum(len(a.gpu_indices) for a in b.assignments if a.node_id == node_id)
            for b in blockers}  # fmt: skip
    order = sorted(blockers, key=lambda r: (r.finish_at(now_ms) or np.inf, r.job_id))
    movers, cost, freed = [], 0.0, free
    for run in order:
        if freed >= need:
            break
        interval = config.interval_s(run.job)
        c = move_cost(run, now_ms, run.speed, restore_s=config.restore_s, interval_s=interval)
        if c is None:
            return None
        movers.append(run)
        cost += c.restore_s + c.lost_s
        freed += held[run.job_id] if _whole(run, node_id) else 0
    if freed < need:
        return None
    wait = max((r.finish_at(now_ms) or np.inf) for r in movers)
    return (movers, cost, wait) if wait > cost + config.margin_s else None


def _whole(run: RunningJob, node_id: str) -> bool:
    """Only whole GPUs come back whole when a job leaves (a share leaves the GPU shared)."""
    return all(a.gpu_milli >= FULL_GPU for a in run.assignments if a.node_id == node_id)


def _targets(
    state: ClusterState,
    placer: Placer,
    node_id: str,
    movers: list[RunningJob],
    now_ms: int,
    config: ReplanConfig,
    statement: Statement,
    gang: str,
) -> list[MoveProposal] | None:
    """A target for every mover, off the node (shielded meanwhile), no slower; all or none."""
    slot = state.slot_of(node_id)
    free = [g for g in range(int(state.gpu_count[slot])) if state.free_milli[slot, g] > 0]
    shield = f"{gang}{SHIELD}"
    if free:
        shares = [int(state.free_milli[slot, g]) for g in free]
        state.reserve(
            shield, [Assignment(node_id, (g,), m) for g, m in zip(free, shares, strict=True)]
        )
    try:
        out = []
        for run in movers:
            spec = replace(run.job, allowed_gpu_models=(run.gpu_model,))
            target = placer.place(spec, run.region, explain=False)  # placed or not is enough
            speed = target.expected_throughput or 0.0
            if not target.placed or speed < run.speed * 0.999:
                statement.discard()
                return None
            if not statement.hold(hold_key(run.job_id), target.assignments):
                statement.discard()
                return None
            interval = config.interval_s(run.job)
            cost = move_cost(run, now_ms, speed, restore_s=config.restore_s, interval_s=interval)
            assert cost is not None
            why = (
                f"defragmentation: frees {node_id} for waiting gang {gang}",
                f"moves to {target.gpu_model} at {speed:.2f} of its reference speed "
                f"(restore {cost.restore_s:.0f} s, {cost.lost_s:.0f} s of work lost)",
            )
            out.append(MoveProposal(run, target, cost, "DEFRAGMENTATION", why, for_job=gang))
        return out
    finally:
        state.release(shield)
