"""The worker's scheduler on the digital twin: an urgent job preempts, the victim checkpoints,
requeues and completes; jobs.csv carries the tenancy columns."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.replay.trace import Trace, TraceJob, TraceNode, load_jobs
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
