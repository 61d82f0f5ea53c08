"""The worker's scheduler on the digital twin: an urgent job preempts, the victim checkpoints,
requeues and completes; jobs.csv carries the tenancy columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.replay.trace import Trace, TraceJob, TraceNode
from agents.replay.trace_reader import load_jobs
from gpuflow.replay.engine import run_replay
from gpuflow.replay.inprocess import InProcessDecider
from scorer import ThroughputModel

NODES = tuple(TraceNode(f"n{i}", "r", "V100-16", 4) for i in range(2))
# four 2-GPU batch jobs of an hour fill 8 GPUs; a 2-GPU serving job arrives at 1000 s
JOBS = (
    *(
        TraceJob(f"b{i}", 0.0, 2, 3600.0, tenant="batch-team", checkpoint_interval_s=600)
        for i in range(4)
    ),
    TraceJob(
        "inf",
        1000.0,
        2,
        600.0,
        tenant="serving",
        priority_class="online-inference",
        kind="INFERENCE",
    ),
)


def test_preemption_round_trip_on_the_twin() -> None:
    result = run_replay(
        Trace(NODES, JOBS, ThroughputModel()), InProcessDecider("gpuflow"), tick_s=60
    )
    [pre] = result.preemptions
    # every victim has 1000 - 600 = 400 s unsaved (> 300): checkpoint first; the tie on lost
    # work (400 s x 2 GPUs) goes to the job id
    assert (pre["job_id"], pre["for_job_id"], pre["checkpoint_first"]) == ("b0", "inf", True)
    runs = result.twin.runs
    # the checkpoint takes the twin's 30 s; then inf starts on b0's GPUs
    assert runs["inf"].first_start_s == pytest.approx(1030.0)
    assert runs["b0"].preemptions == 1 and runs["b0"].lost_gpu_seconds == 0.0
    # b0 kept 1000 s of its 3600, restarts when inf ends (1630) and pays the 60 s restore
    assert runs["b0"].end_s == pytest.approx(1630 + 60 + 2600)
    epochs = [(d["job_id"], d["epoch"]) for d in result.decisions if d["outcome"] == "PLACED"]
    assert epochs.count(("b0", 0)) == epochs.count(("b0", 1)) == 1
    assert all(r.end_s is not None for r in runs.values())


def _serving(job_id: str, at: float) -> TraceJob:
    return TraceJob(job_id, at, 2, 200.0, tenant="serving", priority_class="online-inference",
                    kind="INFERENCE")  # fmt: skip


def test_a_resumed_victim_s_unsaved_work_is_what_the_twin_loses() -> None:
    batch = TraceJob("b", 0.0, 2, 3600.0, tenant="batch-team", checkpoint_interval_s=600)
    jobs = (batch, _serving("inf1", 700.0), _serving("inf2", 1500.0))
    node = TraceNode("n", "r", "V100-16", 2)  # room for one of them at a time
    result = run_replay(
        Trace((node,), jobs, ThroughputModel()), InProcessDecider("gpuflow"), tick_s=60
    )
    first, second = result.preemptions
    # at 700 b has computed 100 s since its checkpoint at 600 (< 300: stopped at once) and
    # loses 100 s x 2 GPUs = 200 GPU-s, as the decision expected
    assert (first["for_job_id"], first["checkpoint_first"]) == ("inf1", False)
    assert first["expected_lost_gpu_s"] == 200.0
    # b resumes at 900 when inf1 ends and reloads until 960: its periodic checkpoint is due
    # at 960 + 600 = 1560, so at 1500 it has 540 s unsaved (not 0, as counting from its
    # start at 900 would say): 540 x 2 = 1080 GPU-s, stale, it checkpoints first
    assert (second["for_job_id"], second["checkpoint_first"]) == ("inf2", True)
    assert second["expected_lost_gpu_s"] == 1080.0
    run = result.twin.runs["b"]
    assert run.preemptions == 2 and run.lost_gpu_seconds == pytest.approx(200.0)
    assert run.end_s is not None


def test_jobs_csv_carries_priority_class_kind_and_checkpoints(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(
        "job_id,submit_s,num_gpus,duration_s,tenant,priority_class,kind,checkpoint_interval_s\n"
        "a,0,1,60,vision,online-inference,inference,0\n"
        "b,5,2,600,nlp,,,300\n"
    )
    a, b = load_jobs(path)
    assert (a.priority_class, a.kind, a.tenant) == ("online-inference", "INFERENCE", "vision")
    assert (b.priority_class, b.kind, b.checkpoint_interval_s) == (None, "TRAINING", 300)
    path.write_text("job_id,submit_s,num_gpus,duration_s,kind\nc,0,1,60,gaming\n")
    with pytest.raises(Exception, match=r"jobs.csv:2:5: \(kind\) expected one of"):
        load_jobs(path)
