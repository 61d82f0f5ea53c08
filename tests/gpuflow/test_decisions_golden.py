"""Both replay engines decide exactly as recorded at e81c6a4, the commit before issue 34's redesign.

`data/decisions_golden.json` holds, for each case and engine, every decision that matters, one
canonical line each, sorted by (virtual time, job) with each job's own decisions in the order
they were made:
- `place`: a PlacementDecision: outcome (PLACED, QUEUED, REJECTED), the wait reason of a
  refusal, and the GPUs of a placement as `node[indices]` (`*milli` for a GPU share);
- `migrate`: a MigrationDecision: reason, from -> to (no target: moved off);
- `preempt`: a PreemptionDecision: victim, the job it makes room for, cause, the victim's GPUs.
Wall-clock and uuid-based fields (event ids, `worker_us`), scores, throughputs and texts are
dropped; times are virtual trace seconds.

The cases (small, seconds each): the shipped example trace (`examples/trace`, the gavel table)
cut to its first 4 nodes and 20 jobs, so jobs queue and the re-planning preset migrates them;
and the seeded job streams of `gpuflow generate` (`packing`: a seeded 8-node fleet with
priority-1 jobs that preempt; `gavel`: a seeded gavel stream on 3 servers), under
`gpuflow` (the default: re-plans, migrates, preempts), `fgd` (preempts, never re-plans) and
`first_fit`. A re-planning case's timer runs every `tick_s` virtual seconds as given (300, not
the default 60, to keep the stream engine's lockstep replay short); the inputs are the same on
both engines.

Both engines decide alike on every case (asserted): the stream engine (real embedded broker
and Faust worker on its event clock) carries out preemptions on the twin and places CPU-only
jobs on GPU-less nodes as the in-process engine does. (At e81c6a4 it did neither: it read back
only placements and migrations, and the worker's input check refused a CPU-only job and a
GPU-less node; its lines were recorded again once fixed, equal to the in-process lines, which
are still those recorded at e81c6a4.)

Recorded again once since, on purpose: scoring never learns (issue 34 part 4). The plugins that
learn the job mix count a placement when it is committed (`Placer.observe`), not while they score
it, so a job no longer counts itself in its own score: `example-gpuflow` places job-00004 on the
V100 at once instead of on a P100 and moving it later (2 migrations fewer); every other case is
as at e81c6a4.

Determinism: every case was replayed twice on each engine at the base commit with the same
result; the stream engine is in lockstep on event time (each event answered before the next),
so nothing compared depends on wall-clock timing.

Record again (only when a decision change is intended, and say why in the commit):

    PYTHONPATH=$PWD .venv/bin/python tests/gpuflow/test_decisions_golden.py --record
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agents.replay import Trace, load_trace
from agents.replay.generate import gavel_cluster, gavel_jobs
from agents.replay.packing import packing_cluster, packing_jobs
from gpuflow.replay import replay_policy
from gpuflow.replay.engine import BASE_MS
from scorer import GAVEL_CSV, load_gavel_csv

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).with_name("data") / "decisions_golden.json"
EXAMPLE = ROOT / "examples" / "trace"
SHOWN = 12  # differing lines shown on a failure
READ_TIMEOUT_S = 30.0


def example_trace() -> Trace:
    """The shipped example trace, its first 4 nodes (16 GPUs) and first 20 jobs."""
    trace = load_trace(EXAMPLE / "nodes.csv", EXAMPLE / "jobs.csv", GAVEL_CSV)
    return dataclasses.replace(trace, nodes=trace.nodes[:4], jobs=trace.jobs[:20])


def packing_trace() -> Trace:
    """`gpuflow generate packing` seeded: 8 nodes, demand 1.5x their GPUs, 30% priority 1."""
    nodes = packing_cluster(8, seed=3)
    return Trace(nodes, packing_jobs(nodes, demand=1.5, seed=3, high_priority=0.3), None)


def gavel_trace() -> Trace:
    """`gpuflow generate gavel` seeded: 12 jobs on one server of each model (4 GPUs each)."""
    tp = load_gavel_csv(GAVEL_CSV)
    return Trace(gavel_cluster(4, 4), gavel_jobs(tp, 12, 120.0, seed=5), tp)


@dataclass(frozen=True)
class Case:
    trace: Callable[[], Trace]
    policy: str
    tick_s: float | None = None  # None: replay_policy's default (no timer without re-planning)


CASES: dict[str, Case] = {
    "example-gpuflow": Case(example_trace, "gpuflow", tick_s=300.0),
    "example-first_fit": Case(example_trace, "first_fit"),
    "packing-fgd": Case(packing_trace, "fgd"),
    "packing-gpuflow": Case(packing_trace, "gpuflow", tick_s=300.0),
    "gavel-gpuflow": Case(gavel_trace, "gpuflow", tick_s=300.0),
    "gavel-fgd": Case(gavel_trace, "fgd"),
}
RUNS = [(name, engine) for engine in ("inprocess", "stream") for name in CASES]


# ---- canonical form --------------------------------------------------------------------------
def _t(record: Mapping[str, Any]) -> float:
    return round((int(record["ts"]) - BASE_MS) / 1000, 3)


def _gpus(assignments: Sequence[Mapping[str, Any]] | None) -> str:
    parts = []
    for a in assignments or ():
        milli = int(a.get("gpu_milli") or 1000)
        share = "" if milli == 1000 else f"*{milli}"
        parts.append(f"{a['node_id']}{list(a.get('gpu_indices') or [])}{share}")
    return " ".join(parts) or "-"


def _place(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {"kind": "place", "outcome": d["outcome"], "gpus": _gpus(d.get("assignments"))}
    if d["outcome"] != "PLACED":
        out["wait"] = d.get("wait_reason") or ""
    return out


def _migrate(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "migrate",
        "reason": d.get("reason") or "",
        "from": _gpus(d.get("from_assignments")),
        "to": _gpus(d.get("to_assignments")),
        "checkpoint_first": bool(d.get("checkpoint_first")),
    }


def _preempt(d: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "kind": "preempt",
        "for": d.get("for_job_id") or "",
        "cause": d.get("cause") or "",
        "gpus": _gpus(d.get("victim_assignments")),
        "checkpoint_first": bool(d.get("checkpoint_first")),
        "victim_epoch": int(d.get("victim_epoch") or 0),
    }


def canonical(
    placements: Sequence[Mapping[str, Any]],
    migrations: Sequence[Mapping[str, Any]],
    preemptions: Sequence[Mapping[str, Any]],
) -> list[str]:
    """One JSON line per decision, sorted by (time, job); a job's own decisions keep their
    order (a stable sort of placements, then migrations, then preemptions, as made)."""
    rows = [
        {"t": _t(d), "job": d["job_id"], **shape(d)}
        for records, shape in (
            (placements, _place),
            (migrations, _migrate),
            (preemptions, _preempt),
        )
        for d in records
    ]
    rows.sort(key=lambda r: (r["t"], r["job"]))
    return [json.dumps(r, sort_keys=True) for r in rows]


# ---- replay -----------------------------------------------------------------------------------
def replay(name: str, engine: str) -> list[str]:
    case = CASES[name]
    trace = case.trace()
    result = replay_policy(trace, case.policy, engine=engine, tick_s=case.tick_s)
    return canonical(result.decisions, result.migrations, result.preemptions)


# ---- golden data ------------------------------------------------------------------------------
def load_golden() -> dict[str, list[str]]:
    raw = json.loads(GOLDEN.read_text())
    return {key: [json.dumps(r, sort_keys=True) for r in rows] for key, rows in raw.items()}


def write_golden(data: Mapping[str, list[str]]) -> None:
    """One decision per line, so a changed decision is one changed line in a diff."""
    blocks = []
    for key in sorted(data):
        lines = ",\n".join(f"    {row}" for row in data[key])
        blocks.append(f"  {json.dumps(key)}: [\n{lines}\n  ]")
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text("{\n" + ",\n".join(blocks) + "\n}\n")


def difference(expected: list[str], got: list[str]) -> str:
    """The first differing decisions, as a unified diff of the canonical lines."""
    diff = list(difflib.unified_diff(expected, got, "recorded", "now", n=1, lineterm=""))
    shown = diff[: SHOWN + 3]
    more = f"\n... and {len(diff) - len(shown)} more diff lines" if len(diff) > len(shown) else ""
    return f"{len(expected)} decisions recorded, {len(got)} now:\n" + "\n".join(shown) + more


def _check(name: str, engine: str) -> None:
    key = f"{name}/{engine}"
    expected = load_golden().get(key)
    assert expected is not None, f"no recorded decisions for {key}: record them (--record)"
    got = replay(name, engine)
    assert got == expected, f"{key} decides differently than at e81c6a4:\n" + difference(
        expected, got
    )


@pytest.mark.parametrize("name", list(CASES))
def test_inprocess_engine_decides_as_recorded(name: str) -> None:
    _check(name, "inprocess")


@pytest.mark.integration
@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", list(CASES))
def test_stream_engine_decides_as_recorded(name: str) -> None:
    _check(name, "stream")


def test_the_cases_exercise_queueing_preemption_and_migration() -> None:
    """The recorded data is not vacuous: each kind of decision is there, on both engines."""
    rows = {k: [json.loads(r) for r in v] for k, v in load_golden().items()}
    assert set(rows) == {f"{n}/{e}" for n, e in RUNS}
    for engine in ("inprocess", "stream"):
        mine = [r for k, v in rows.items() if k.endswith(f"/{engine}") for r in v]
        kinds = {r["kind"] for r in mine} | {r.get("outcome") for r in mine}
        assert {"place", "migrate", "preempt", "PLACED", "QUEUED"} <= kinds, engine
    for name in CASES:  # two engines, one answer
        assert rows[f"{name}/stream"] == rows[f"{name}/inprocess"], name


def record() -> None:
    data: dict[str, list[str]] = {}
    for name, engine in RUNS:
        first, again = replay(name, engine), replay(name, engine)
        if first != again:  # never record what does not replay the same
            raise SystemExit(f"{name}/{engine} is not deterministic:\n" + difference(first, again))
        data[f"{name}/{engine}"] = first
        print(f"{name}/{engine}: {len(first)} decisions")
    write_golden(data)
    print(f"wrote {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: test_decisions_golden.py --record")
    record()
