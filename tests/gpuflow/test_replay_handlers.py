"""The replay engine as executor: migrations, preemptions and timer ticks reach the twin, and
the executor's reports reach the decider (a scripted decider stands in for the scheduler)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from agents.replay.trace import Trace, TraceJob, TraceNode
from gpuflow.replay.engine import BASE_MS, Decided, run_replay
from infra.topics import DECISIONS_MIGRATION, DECISIONS_PLACEMENT, DECISIONS_PREEMPTION
from scorer import ThroughputModel

NODES = (
    TraceNode("a", "r", "V100-16", 1, price_per_gpu_hour=1.0),
    TraceNode("b", "r", "V100-16", 1, price_per_gpu_hour=1.0),
)
# x: 1000 s of work, checkpoint every 100 s; y arrives at 250 s
JOBS = (
    TraceJob("x", 0.0, 1, 1000.0, checkpoint_interval_s=100),
    TraceJob("y", 250.0, 1, 100.0),
)


def _placed(job_id: str, node: str) -> Decided:
    assignments = [{"node_id": node, "gpu_indices": [0], "gpu_milli": 1000}]
    return Decided(
        DECISIONS_PLACEMENT,
        {"job_id": job_id, "outcome": "PLACED", "region": "r", "assignments": assignments},
    )


class Scripted:
    """Places x on a; at the 300 s tick moves x to b; when y arrives, preempts x for y."""

    def __init__(self, preempt: bool) -> None:
        self.preempt = preempt
        self.events: list[Mapping[str, Any]] = []
        self.ticks: list[int] = []
        self.moved = False

    def setup(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        assert [n["node_id"] for n in nodes] == ["a", "b"]

    def submit(self, record: Mapping[str, Any]) -> list[Decided]:
        if record["job_id"] == "x":
            return [_placed("x", "a")]
        if not self.preempt:
            return [_placed("y", "a" if self.moved else "b")]
        victim = {"job_id": "x", "for_job_id": "y", "region": "r"}
        return [Decided(DECISIONS_PREEMPTION, victim)]

    def job_event(self, record: Mapping[str, Any]) -> list[Decided]:
        self.events.append(record)
        if record["type"] == "EVICTED":
            return [_placed("y", "a")]
        if record["type"] == "FINISHED" and record["job_id"] == "y" and self.preempt:
            return [_placed("x", "a")]  # the victim requeued and resumes
        return []

    def tick(self, ts_ms: int) -> list[Decided]:
        self.ticks.append(ts_ms)
        if ts_ms == BASE_MS + 200_000 and not self.preempt:
            self.moved = True
            move = {
                "job_id": "x",
                "to_region": "r",
                "to_assignments": [{"node_id": "b", "gpu_indices": [0], "gpu_milli": 1000}],
            }
            return [Decided(DECISIONS_MIGRATION, move)]
        return []

    def close(self) -> None:
        return None


def _trace() -> Trace:
    return Trace(NODES, JOBS, ThroughputModel())


def test_a_migration_moves_the_job_and_reports_migrated() -> None:
    decider = Scripted(preempt=False)
    result = run_replay(_trace(), decider, tick_s=100.0)
    x = result.twin.runs["x"]
    assert [e["type"] for e in decider.events if e["job_id"] == "x"] == ["MIGRATED", "FINISHED"]
    assert x.migrations == 1 and result.placements["x"] == ("b",)
    # moved at 200 s with its work kept (200 s), restored for 60 s, then 800 s more
    assert x.end_s == pytest.approx(200 + 60 + 800)
    assert len(result.migrations) == 1
    # ticks every 100 s while anything runs or is still to arrive, none after the last finish
    assert decider.ticks[0] == BASE_MS + 100_000
    assert x.end_s is not None and max(decider.ticks) < BASE_MS + x.end_s * 1000


def test_a_preemption_evicts_reports_progress_and_the_victim_resumes() -> None:
    decider = Scripted(preempt=True)
    result = run_replay(_trace(), decider)
    evicted = [e for e in decider.events if e["type"] == "EVICTED"]
    # x ran 250 s with a checkpoint every 100 s: 200 s kept of 1000 s
    assert len(evicted) == 1 and evicted[0]["progress"] == pytest.approx(0.2)
    x, y = result.twin.runs["x"], result.twin.runs["y"]
    assert x.preemptions == 1 and y.end_s == pytest.approx(350.0)
    # x resumes at 350 s: 60 s restore, then the 800 s it still owes
    assert x.end_s == pytest.approx(350 + 60 + 800)
    assert len(result.preemptions) == 1 and decider.ticks == []


def test_arrivals_only_never_ticks() -> None:
    decider = Scripted(preempt=False)
    run_replay(_trace(), decider, arrivals_only=True, tick_s=100.0)
    assert decider.ticks == []
