"""Migration to a better match: running jobs move when faster GPUs free up and the move pays.

A candidate is a running job that can checkpoint (and may be stopped), has a duration estimate,
and is not rate-limited. Candidates are tried in order of the most they could gain (time to
finish where they are minus time to finish on the fastest free model, before costs). For each,
the placer proposes GPUs among the free ones of models strictly faster for it (its own scores
choose among them: cost, carbon, topology, fragmentation); the move is kept only when it saves
more than restore + the work lost since the last checkpoint + the margin (`MoveCost.pays`), so
a move never makes the job finish later. Accepted targets are held in a `Statement` at once, so
one pass never promises the same GPUs twice; the caller commits or discards it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scorer.errors import ReservationError
from scorer.holds import move_key as hold_key
from scorer.placer import Placer
from scorer.replan.config import ReplanConfig
from scorer.replan.progress import MoveCost, RunningJob, move_cost
from scorer.state import ClusterState
from scorer.types import Assignment, PlacementResult

__all__ = [
    "MoveProposal",
    "Statement",
    "better_match",
    "hold_key",
    "movable",
    "next_checkpoint_ms",
]


@dataclass(frozen=True)
class MoveProposal:
    run: RunningJob
    target: PlacementResult
    cost: MoveCost
    reason: str  # MigrationReason: BETTER_MATCH, DEFRAGMENTATION
    explain: tuple[str, ...]
    for_job: str = ""  # the waiting job a defragmentation move makes room for
    gain_s: float | None = None  # what the move gains (default: the job's own time saved)

    @property
    def expected_gain(self) -> float:
        return self.cost.saved_s if self.gain_s is None else self.gain_s


class Statement:
    """Tentative holds (Volcano's Statement): reserved now, committed or discarded together."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.held: list[str] = []

    def hold(self, key: str, assignments: Sequence[Assignment]) -> bool:
        try:
            self.state.reserve(key, assignments)
        except ReservationError:
            return False
        self.held.append(key)
        return True

    def discard(self) -> None:
        for key in self.held:
            self.state.release(key)
        self.held.clear()


def movable(run: RunningJob, now_ms: int, config: ReplanConfig) -> str | None:
    """Why `run` may not move now (None: it may)."""
    job = run.job
    if not job.checkpointable:
        return "cannot checkpoint"
    if not job.preemptible:
        return "not preemptible"
    if job.cpu_only:
        return "CPU-only"
    if run.duration_s is None:
        return "no duration estimate"
    if run.moves >= config.max_moves_per_job:
        return f"moved {run.moves} times already"
    if run.last_move_ms is not None and now_ms - run.last_move_ms < config.job_cooldown_s * 1000:
        return "moved recently"
    return None


def better_match(
    state: ClusterState,
    placer: Placer,
    runs: Sequence[RunningJob],
    now_ms: int,
    config: ReplanConfig,
    statement: Statement,
    *,
    budget: int,
    region: Callable[[RunningJob], str | None] = lambda r: r.region,
    tried: dict[str, tuple[object, int]] | None = None,
) -> list[MoveProposal]:
    """Up to `budget` moves of `runs` to faster free GPUs that pay; targets held in `statement`.

    `region(run)` names where to look (None: every region this state holds). `tried` remembers
    jobs whose try failed: they are not tried again until the free GPUs change or their next
    checkpoint passes (when the work a move would lose drops).
    """
    if budget <= 0:
        return []
    tried = {} if tried is None else tried
    free: dict[str, dict[str, int]] = {}
    ranked: list[tuple[float, RunningJob, tuple[tuple[str, int], ...]]] = []
    for run in runs:
        if run.region not in free:
            free[run.region] = state.free_gpus(run.region)
        seen = tried.get(run.job_id)
        signature = tuple(sorted(free[run.region].items()))
        if seen is not None and seen[0] == signature and now_ms < seen[1]:
            continue
        bound = _upper_bound(placer, run, now_ms, free[run.region], config)
        if bound > 0:
            ranked.append((bound, run, signature))
    ranked.sort(key=lambda br: (-br[0], br[1].job_id))
    out: list[MoveProposal] = []
    for _, run, signature in ranked[: 3 * budget]:  # a bounded number of placer calls per pass
        proposal = _try(state, placer, run, now_ms, config, region(run))
        if proposal is None:
            tried[run.job_id] = (signature, next_checkpoint_ms(run, now_ms, config))
        elif statement.hold(hold_key(run.job_id), proposal.target.assignments):
            out.append(proposal)
            if len(out) >= budget:
                break
    return out


def next_checkpoint_ms(run: RunningJob, now_ms: int, config: ReplanConfig) -> int:
    """Just after the job's next periodic checkpoint (a move then loses least)."""
    interval = config.interval_s(run.job)
    if interval <= 0:
        return now_ms
    compute = run.compute_s(now_ms)
    return now_ms + int(1000 * (interval - compute % interval)) + 1


def _faster_models(placer: Placer, run: RunningJob) -> dict[str, float]:
    """Models of the state strictly faster for the job than where it runs (allow-list kept),
    with the job's speed on each."""
    tp, job = placer.throughput, run.job
    allowed = {tp.catalog.canonical(m) for m in job.allowed_gpu_models}
    speeds = {m: tp.relative_speed(job, m) for m in placer.state.models if m}
    return {
        m: v for m, v in speeds.items() if (not allowed or m in allowed) and v > run.speed * 1.0001
    }


def _upper_bound(
    placer: Placer,
    run: RunningJob,
    now_ms: int,
    free: dict[str, int],
    config: ReplanConfig,
) -> float:
    """The most the job could gain on the fastest model with free GPUs, after the restore, the
    work lost since its last checkpoint and the margin (0: no move can pay)."""
    need = max(1, run.job.gpu_count)
    speeds = [v for m, v in _faster_models(placer, run).items() if free.get(m, 0) >= need]
    if not speeds:
        return 0.0
    interval = config.interval_s(run.job)
    cost = move_cost(run, now_ms, max(speeds), restore_s=config.restore_s, interval_s=interval)
    if cost is None:
        return 0.0
    return max(0.0, cost.saved_s - config.margin_s - config.margin_frac * cost.stay_s)


def _try(
    state: ClusterState,
    placer: Placer,
    run: RunningJob,
    now_ms: int,
    config: ReplanConfig,
    region: str | None,
) -> MoveProposal | None:
    faster = tuple(_faster_models(placer, run))
    if not faster:
        return None
    target = placer.place(replace(run.job, allowed_gpu_models=faster), region)
    if not target.placed or target.expected_throughput is None:
        return None
    interval = config.interval_s(run.job)
    cost = move_cost(
        run, now_ms, target.expected_throughput, restore_s=config.restore_s, interval_s=interval
    )
    if cost is None or not cost.pays(config.margin_s, config.margin_frac):
        return None
    explain = (
        f"better match: {run.gpu_model} at {run.speed:.2f} -> {target.gpu_model} at "
        f"{target.expected_throughput:.2f} of its reference speed",
        f"finish in {cost.move_s / 3600:.2f} h instead of {cost.stay_s / 3600:.2f} h "
        f"(restore {cost.restore_s:.0f} s, {cost.lost_s:.0f} s of work since its last "
        "checkpoint lost)",
    )
    return MoveProposal(run, target, cost, "BETTER_MATCH", explain)
