"""The replay loop, shared by both engines: virtual events in order, decisions into the twin.

Events are job submissions (trace order), job finishes (from the twin), the executor's reports
of the decisions it carried out (a migration -> MIGRATED, a preemption -> EVICTED), the
executor's delayed actions (a checkpoint-first eviction stops its job once the checkpoint is
written), and, when `tick_s` is set, the scheduler's timer (re-planning passes, queue sweeps,
grace periods) every `tick_s` virtual seconds. At equal times a finish goes first, then the
executor's reports and delayed actions, then a submission, then the timer, so capacity freed at
t is visible to a job submitted at t. Every JobEvent carries the epoch of the placement it is
about (the PlacementDecision's), as a real executor must echo it.

A `Decider` turns each event into the decisions it caused, as `Decided(topic, record)`: in
process by calling the worker's `Scheduler` directly, or through the real broker and worker.
The engine plays the executor: each decision topic has a handler (`HANDLERS`) that carries the
decision out on the twin and returns the `JobEvent`s a real executor would report back.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.replay.runs import slices_from
from agents.replay.trace import Trace, job_record, node_record
from agents.replay.twin import Twin, TwinConfig
from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, DECISIONS_PREEMPTION

__all__ = ["BASE_MS", "HANDLERS", "Decided", "Decider", "ReplayResult", "run_replay"]

_SEQ = itertools.count()  # tie-break of delayed actions due at the same time
BASE_MS = 1_700_000_000_000  # virtual epoch: trace second 0, in ms (Avro timestamps)
Progress = Callable[[int, int], None]  # (events done, events total)
IDLE_TICKS = 2


@dataclass(frozen=True)
class Decided:
    """One decision a Decider emitted: its topic and its (decoded) record."""

    topic: str
    record: Mapping[str, Any]


class Decider(Protocol):
    """Turns replay events into the decisions they caused, in the order they were made."""

    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None: ...

    def submit(self, record: Mapping[str, Any]) -> list[Decided]: ...

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        """A `JobEvent` from the executor (FINISHED, MIGRATED, EVICTED, ...)."""
        ...

    def tick(self, ts_ms: int) -> list[Decided]:
        """The scheduler's timer fired at virtual time `ts_ms`."""
        ...

    def close(self) -> None: ...


@dataclass
class ReplayResult:
    twin: Twin
    decisions: list[dict[str, Any]] = field(default_factory=list)  # PlacementDecision records
    migrations: list[dict[str, Any]] = field(default_factory=list)
    preemptions: list[dict[str, Any]] = field(default_factory=list)
    other: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # by topic
    placements: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> nodes
    epochs: dict[str, int] = field(default_factory=dict)  # job -> epoch of its placement
    delayed: list[tuple[float, int, Callable[[], list[dict[str, Any]]]]] = field(
        default_factory=list
    )  # executor actions due later: (time, seq, action -> reports)
    first_refusal_alloc_rate: float | None = None
    first_refusal_s: float | None = None
    arrivals_only: bool = False
    # arrivals-only: (GPU demand arrived so far, allocated share after that job's decision)
    arrivals: list[tuple[float, float]] = field(default_factory=list)
    # every first refusal (QUEUED or REJECTED): job, time, allocated share, GPUs asked
    refusals: list[dict[str, Any]] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)


def _ms(t: float) -> int:
    return BASE_MS + round(t * 1000)


def job_event(
    twin: Twin, job_id: str, kind: str, region: str, nodes: Sequence[str], **extra: Any
) -> dict[str, Any]:
    """A JobEvent record as the executor reports it, at the twin's current time."""
    return {
        "event_id": f"{job_id}:{kind}:{twin.now:.3f}",
        "ts": _ms(twin.now),
        "job_id": job_id,
        "region": region,
        "type": kind,
        "node_ids": list(nodes),
        "progress": extra.pop("progress", 0.0),
        "detail": extra.pop("detail", "replay"),
        **extra,
    }


def later(result: ReplayResult, at: float, action: Callable[[], list[dict[str, Any]]]) -> None:
    """The executor does `action` at virtual time `at` (its reports then reach the decider)."""
    heapq.heappush(result.delayed, (at, next(_SEQ), action))


def run_replay(
    trace: Trace,
    decider: Decider,
    *,
    arrivals_only: bool = False,
    twin_config: TwinConfig | None = None,
    progress: Progress | None = None,
    tick_s: float | None = None,
) -> ReplayResult:
    """Replay `trace` through `decider` on a twin. `tick_s`: run the scheduler's timer every
    so many virtual seconds while jobs run (None: never; arrivals-only replays never tick)."""
    twin = Twin(trace.nodes, trace.throughput_model(), twin_config)
    result = ReplayResult(twin, arrivals_only=arrivals_only)
    decider.setup([node_record(n, BASE_MS) for n in trace.nodes])
    reports: deque[dict[str, Any]] = deque()  # executor -> scheduler, at the current time
    jobs, i, done, arrived, idle_ticks = trace.jobs, 0, 0, 0.0, 0
    total = len(jobs) * (1 if arrivals_only else 2)
    ticking = tick_s is not None and tick_s > 0 and not arrivals_only
    next_tick = float(tick_s) if ticking else math.inf  # type: ignore[arg-type]
    while True:
        next_submit = jobs[i].submit_s if i < len(jobs) else math.inf
        next_finish = math.inf if arrivals_only else twin.next_finish()
        next_action = result.delayed[0][0] if result.delayed else math.inf
        if reports:
            out = decider.job_event(reports.popleft())
        elif next_finish <= min(next_submit, next_tick, next_action) and math.isfinite(next_finish):
            run = twin.pop_finish()
            job_id = run.job.job_id
            region = twin.nodes[result.placements[job_id][0]].region
            nodes = result.placements[job_id]
            epoch = result.epochs.get(job_id, 0)
            out = decider.job_event(
                job_event(twin, job_id, "FINISHED", region, nodes, progress=1.0, epoch=epoch)
            )
            done += 1
        elif next_action <= min(next_submit, next_tick) and math.isfinite(next_action):
            _, _, action = heapq.heappop(result.delayed)
            twin.advance_to(next_action)
            reports.extend(action())
            continue
        elif next_submit <= next_tick and math.isfinite(next_submit):
            job = jobs[i]
            i += 1
            twin.submit(job, job.submit_s)
            out = decider.submit(job_record(job, _ms(job.submit_s)))
            done += 1
            if arrivals_only:  # tried once: what is not placed now is refused for good
                arrived += job.gpu_demand
                reports.extend(_apply(result, out))
                if twin.runs[job.job_id].first_start_s is None:
                    twin.reject(job.job_id, twin.now)
                result.arrivals.append((arrived, twin.alloc_rate))
                out = []
        elif math.isfinite(next_tick) and (
            i < len(jobs)
            or math.isfinite(next_finish)
            or result.delayed
            or (idle_ticks < IDLE_TICKS and _waiting(twin))
        ):
            twin.advance_to(next_tick)
            out = decider.tick(_ms(next_tick))
            next_tick += float(tick_s)  # type: ignore[arg-type]
            # with nothing running or to come, jobs may still wait for a round-based decider;
            # give up after IDLE_TICKS ticks that decide nothing
            busy = i < len(jobs) or math.isfinite(twin.next_finish())
            idle_ticks = 0 if out or busy else idle_ticks + 1
        else:
            break
        reports.extend(_apply(result, out))
        if progress is not None:
            progress(min(done, total), total)
    return result


def _waiting(twin: Twin) -> bool:
    """Some submitted job has neither run to its end nor been rejected, and is not running."""
    return any(r.end_s is None and not r.rejected and not r.running for r in twin.runs.values())


def _apply(result: ReplayResult, decided: list[Decided]) -> list[dict[str, Any]]:
    """Carry out decisions on the twin; the JobEvents the executor reports back."""
    reports: list[dict[str, Any]] = []
    for d in decided:
        handler = HANDLERS.get(d.topic)
        record = dict(d.record)
        if handler is None:
            result.other.setdefault(d.topic, []).append(record)
            continue
        reports.extend(handler(result, record))
    return reports


def _on_placement(result: ReplayResult, d: dict[str, Any]) -> list[dict[str, Any]]:
    twin = result.twin
    result.decisions.append(d)
    outcome, job_id = d["outcome"], d["job_id"]
    if outcome == "PLACED":
        slices = slices_from(d["assignments"])
        result.placements[job_id] = tuple(s.node_id for s in slices)
        result.epochs[job_id] = int(d.get("epoch") or 0)
        twin.start(job_id, slices, twin.now)
    elif outcome == "REJECTED":
        twin.reject(job_id, twin.now)
    if outcome != "PLACED" and job_id not in result.refused:
        result.refused.add(job_id)
        run = twin.runs.get(job_id)
        gpus = run.job.num_gpus if run is not None else int(d.get("gpu_count", 1))
        reasons = list(d.get("reasons") or ())
        result.refusals.append(
            {
                "job_id": job_id,
                "t": twin.now,
                "alloc_rate": twin.alloc_rate,
                "gpus": gpus,
                "outcome": outcome,
                # no room now (queued, or refused with a wait reason when tried once), as
                # against a job that could never fit
                "no_room": outcome == "QUEUED" or bool(d.get("wait_reason")),
                # the decisive filter: the placer lists the refusing filters decisive first
                "why": reasons[0].split(":", 1)[0].strip() if reasons else "unknown",
            }
        )
    if outcome != "PLACED" and result.first_refusal_alloc_rate is None:
        result.first_refusal_alloc_rate = twin.alloc_rate
        result.first_refusal_s = twin.now
    return []


def _on_migration(result: ReplayResult, d: dict[str, Any]) -> list[dict[str, Any]]:
    """Checkpoint, move and resume (the twin charges the restore); report MIGRATED. A move
    without a target (NODE_UNHEALTHY: get off this node) checkpoints and stops the job, reported
    EVICTED with its progress, and the scheduler places it again elsewhere."""
    twin = result.twin
    result.migrations.append(d)
    job_id = d["job_id"]
    run = twin.runs.get(job_id)
    if run is None or not run.running:  # finished (or evicted) before the move: nothing to do
        return []
    if not d.get("to_assignments"):
        return _evict(result, job_id, d.get("from_region", ""), checkpoint_at=twin.now,
                      detail=f"moved off: {d.get('reason', '')}")  # fmt: skip
    slices = slices_from(d["to_assignments"])
    twin.migrate(job_id, slices, twin.now, checkpoint_first=bool(d.get("checkpoint_first")))
    result.placements[job_id] = tuple(s.node_id for s in slices)
    nodes = [s.node_id for s in slices]
    progress = run.done / run.job.duration_s if run.job.duration_s else 0.0
    epoch = result.epochs.get(job_id, 0)
    return [
        job_event(twin, job_id, "MIGRATED", d["to_region"], nodes, progress=progress, epoch=epoch)
    ]


def _on_preemption(result: ReplayResult, d: dict[str, Any]) -> list[dict[str, Any]]:
    """Evict the victim. Checkpoint-first: it writes a checkpoint (the twin's `checkpoint_s`)
    and stops then, keeping its work, unless that takes longer than the grace period, which
    stops it at the deadline losing the work since its last periodic checkpoint. Otherwise it
    stops now, losing that work. Reported EVICTED with the progress kept and the work lost."""
    twin = result.twin
    result.preemptions.append(d)
    job_id = d["job_id"]
    run = twin.runs.get(job_id)
    if run is None or not run.running:
        return []
    if result.epochs.get(job_id, 0) != int(d.get("victim_epoch") or 0):
        return []  # a decision about an earlier placement
    grace = float(d.get("grace_period_s") or 0.0) or math.inf
    if not d.get("checkpoint_first"):
        return _evict(result, job_id, d["region"], detail=f"preempted for {d['for_job_id']}")
    epoch, started = result.epochs.get(job_id, 0), twin.now
    writes = twin.config.checkpoint_s
    at = started + min(writes, grace)

    def stop() -> list[dict[str, Any]]:
        current = twin.runs[job_id]
        if not current.running or result.epochs.get(job_id, 0) != epoch:
            return []  # it finished while checkpointing
        saved = started if writes <= grace else None
        return _evict(result, job_id, d["region"], checkpoint_at=saved,
                      detail=f"preempted for {d['for_job_id']}")  # fmt: skip

    if at <= twin.now:  # an instant checkpoint: stopped before anything else is decided
        return stop()
    later(result, at, stop)
    return []


def _evict(
    result: ReplayResult,
    job_id: str,
    region: str,
    *,
    checkpoint_at: float | None = None,
    detail: str = "",
) -> list[dict[str, Any]]:
    twin = result.twin
    run = twin.runs[job_id]
    nodes = [s.node_id for s in run.slices]
    lost_before = run.lost_gpu_seconds
    kept = twin.evict(job_id, twin.now, checkpoint_at=checkpoint_at)
    fraction = kept / run.job.duration_s if run.job.duration_s else 0.0
    return [
        job_event(
            twin, job_id, "EVICTED", region, nodes, progress=fraction, detail=detail,
            epoch=result.epochs.get(job_id, 0), lost_gpu_s=run.lost_gpu_seconds - lost_before,
        )
    ]  # fmt: skip


Handler = Callable[[ReplayResult, dict[str, Any]], list[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {
    DECISIONS_PLACEMENT: _on_placement,
    DECISIONS_MIGRATION: _on_migration,
    DECISIONS_PREEMPTION: _on_preemption,
}
