"""The replay loop, shared by both engines: virtual events in order, decisions into the twin.

Events are job submissions (trace order) and job finishes (from the twin). At equal times a
finish goes first, so capacity freed at t is visible to a job submitted at t. A `Decider`
turns each event into the PlacementDecision records it caused: in process by calling the
worker's `Scheduler` directly, or through the real broker and worker.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agents.replay.trace import Trace, job_record, node_record
from agents.replay.twin import Twin, TwinConfig, slices_from
from scorer import ThroughputModel

__all__ = ["BASE_MS", "Decider", "ReplayResult", "run_replay"]

BASE_MS = 1_700_000_000_000  # virtual epoch: trace second 0, in ms (Avro timestamps)
Progress = Callable[[int, int], None]  # (events done, events total)


class Decider(Protocol):
    """Turns replay events into PlacementDecision records, in the order they were made."""

    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None: ...

    def submit(self, record: Mapping[str, Any]) -> list[dict[str, Any]]: ...

    def finished(self, job_id: str, region: str, ts_ms: int) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


@dataclass
class ReplayResult:
    twin: Twin
    decisions: list[dict[str, Any]] = field(default_factory=list)
    placements: dict[str, tuple[str, ...]] = field(default_factory=dict)  # job -> nodes
    first_refusal_alloc_rate: float | None = None
    first_refusal_s: float | None = None
    arrivals_only: bool = False


def _ms(t: float) -> int:
    return BASE_MS + round(t * 1000)


def run_replay(
    trace: Trace,
    decider: Decider,
    *,
    arrivals_only: bool = False,
    twin_config: TwinConfig | None = None,
    progress: Progress | None = None,
) -> ReplayResult:
    throughput = trace.throughput or ThroughputModel()
    twin = Twin(trace.nodes, throughput, twin_config)
    result = ReplayResult(twin, arrivals_only=arrivals_only)
    decider.setup([node_record(n, BASE_MS) for n in trace.nodes])
    jobs, i, done = trace.jobs, 0, 0
    total = len(jobs) * (1 if arrivals_only else 2)
    while i < len(jobs) or (not arrivals_only and not math.isinf(twin.next_finish())):
        next_submit = jobs[i].submit_s if i < len(jobs) else math.inf
        if not arrivals_only and twin.next_finish() <= next_submit:
            run = twin.pop_finish()
            region = twin.nodes[result.placements[run.job.job_id][0]].region
            out = decider.finished(run.job.job_id, region, _ms(twin.now))
        else:
            job = jobs[i]
            i += 1
            twin.submit(job, job.submit_s)
            out = decider.submit(job_record(job, _ms(job.submit_s)))
        _apply(result, out)
        done += 1
        if progress is not None:
            progress(done, total)
    return result


def _apply(result: ReplayResult, decisions: list[dict[str, Any]]) -> None:
    twin = result.twin
    for d in decisions:
        result.decisions.append(d)
        outcome, job_id = d["outcome"], d["job_id"]
        if outcome == "PLACED":
            slices = slices_from(d["assignments"])
            result.placements[job_id] = tuple(s.node_id for s in slices)
            twin.start(job_id, slices, twin.now)
        elif outcome == "REJECTED":
            twin.reject(job_id, twin.now)
        if outcome != "PLACED" and result.first_refusal_alloc_rate is None:
            result.first_refusal_alloc_rate = twin.alloc_rate
            result.first_refusal_s = twin.now
